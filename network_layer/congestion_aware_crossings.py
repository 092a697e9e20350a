"""The congestion-aware network's crossings: a message's head at a link, decided first come first served.

:func:`cross` is the event loop's hot path (nothing followed, logged, recorded or claimed); :func:`at_time` files a
crossing under the time its head reaches its link.
"""

from __future__ import annotations

import heapq

from stratasim.network_layer.congestion_aware_routes import Hop
from stratasim.network_layer.windows import Landings

__all__ = ["Event", "at_time", "cross"]

Event = tuple[int, tuple[Hop, ...], int, int, int]
"""A crossing to decide: (message id, route, hop index, earliest delivery = send time + lookahead, time the tail
is at the hop)."""


def at_time(events: dict[int, list[Event]], times: list[int], time_ps: int) -> list[Event]:
    """The crossings to decide at ``time_ps``, a new list (its time pushed on the heap ``times``) if none yet."""
    crossings = events.get(time_ps)
    if crossings is None:
        crossings = events[time_ps] = []
        heapq.heappush(times, time_ps)
    return crossings


def cross(
    time_ps: int, crossings: list[Event], events: dict[int, list[Event]], times: list[int], arrivals: Landings
) -> None:
    """Decide ``crossings`` (their heads at a link at ``time_ps``), in order: each waits for its link to be free,
    holds it for its serialisation (no less than its tail takes to come), then moves on to its next link — into
    ``events`` at the time its head gets there (a new time pushed on the heap ``times``) — or lands in
    ``arrivals``. The event loop's hot path, when nothing is followed, logged, recorded or claimed."""
    arriving, arrival_times = arrivals.by_time, arrivals.times
    for msg_id, route, index, earliest, tail in crossings:  # may grow as it goes: heads moving on at once
        state, hold, size, onward, store, _, last = route[index]
        start = state[0]
        if time_ps > start:
            start = time_ps
        else:  # the link is busy (or just free): the message waits for it
            state[4] += start - time_ps
        end = start + hold
        if end < tail:  # the body streams in no faster than the link before delivers it
            end = tail
        state[0] = end
        state[1] += end - start
        state[2] += size
        state[3] += 1
        head = start + onward
        tail = head if store else end + onward
        if last:  # the message has arrived when its tail has
            if tail < earliest:
                tail = earliest
            arrived = arriving.get(tail)
            if arrived is None:
                arriving[tail] = [msg_id]
                heapq.heappush(arrival_times, tail)
            else:
                arrived.append(msg_id)
        else:
            following = events.get(head)
            if following is None:
                following = events[head] = []
                heapq.heappush(times, head)
            following.append((msg_id, route, index + 1, earliest, tail))
