"""Taking a flow's messages off the congestion-aware network at a time (``NetworkBackend.cancel``).

The network decides each link crossing as the message's head reaches the link, ahead of the engine's time: a
crossing decided may hold its link past the time a job fails, and crossings of other flows queued behind it were
given starts after it. So the network logs, window by window, the crossings it decides that end after the committed
time (:data:`Crossing`); a cancel sorts them by link (:func:`by_link`), in each link's order, which is also the order
of their starts and ends. Cancelling flow
``f`` at ``at`` — once every crossing whose head arrives before ``at`` is decided — walks each link's log from its
first crossing of ``f`` still holding the link after ``at``:

- that crossing, when it started before ``at``, is cut there: the link is free from ``at``, keeps the busy time up
  to ``at`` and drops the message's bytes and count (the message did not cross);
- every later crossing of ``f`` is dropped (it keeps only the time it waited up to ``at``);
- every later crossing of another flow is undone and decided again, in its first order, on the link freed: it
  starts as early as the freed capacity lets it, no earlier than ``at``.

What followed an undone crossing (the message's next crossing, not decided yet, or its arrival) is forgotten and
made again; every message of ``f`` still on its way (on a link, queued, or arriving after ``at``) is never
delivered. Crossings that ended by ``at`` and arrivals at or before ``at`` are kept as they were.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from stratasim.kernel.link_changes import LinkKey
from stratasim.network_layer.congestion_aware_counters import BusyStretches, FlowLoad
from stratasim.network_layer.congestion_aware_routes import Hop
from stratasim.network_layer.windows import Landings

__all__ = ["Crossing", "CrossingLog", "Undone", "by_link", "cancel_on_links", "forget"]

Crossing = tuple[int, int, int, int, int, tuple[Hop, ...], int, int]
"""A decided crossing: (end, start, time the head reached the link, time the tail was there, message id, route,
hop index, earliest delivery) — what deciding it again needs, its end first for trimming."""

CrossingLog = dict[LinkKey, list[Crossing]]
"""Each link's decided crossings that may end after a cancel's time, in the order they were decided."""

Undone = tuple[int, int, int, tuple[Hop, ...], int, int, int]
"""A crossing to decide again: (time the head reached the link, start it had, message id, route, hop index, earliest
delivery, time its tail was there)."""


def by_link(windows: Iterable[tuple[int, list[Crossing]]]) -> CrossingLog:
    """The crossings logged window by window, link by link, each link's in the order they were decided."""
    logs: CrossingLog = {}
    for _, crossings in windows:
        for crossing in crossings:
            link = crossing[5][crossing[6]][5]
            log = logs.get(link)
            if log is None:
                logs[link] = [crossing]
            else:
                log.append(crossing)
    return logs


def cancel_on_links(
    logs: CrossingLog,
    flow_of: Callable[[int], int],
    flow: int,
    at_ps: int,
    flow_load: FlowLoad,
    busy: BusyStretches | None,
) -> tuple[set[int], list[Undone]]:
    """Cut, drop and undo the crossings of every link of ``logs`` from its first crossing of ``flow`` holding the
    link after ``at_ps`` (see the module's docstring), correcting the link's state and counters; return the ids of
    the messages of ``flow`` cut or dropped, and the crossings of other flows undone, in the order to decide them
    again (by head time, then the start each had: on a link, its first order)."""
    dropped: set[int] = set()
    undone: list[Undone] = []
    for link, log in list(logs.items()):
        first = next((i for i, c in enumerate(log) if c[0] > at_ps and flow_of(c[4]) == flow), None)
        if first is None:
            continue
        state = log[first][5][log[first][6]][0]
        for end, start, head, tail, msg_id, route, index, earliest in log[first:]:
            size = route[index][2]
            mine = flow_of(msg_id) == flow
            if mine:
                dropped.add(msg_id)
                kept = max(0, at_ps - start)  # busy time it keeps: what it sent before at_ps
                waited = max(0, start - at_ps)  # queue time it gives back: what it would have waited after at_ps
            else:
                undone.append((head, start, msg_id, route, index, earliest, tail))
                kept, waited = 0, start - head
            _uncount(state, flow_load, (link, flow_of(msg_id)), end - start - kept, size, waited)
        state[0] = max(log[first][1], at_ps)
        del log[first:]
        if not log:
            del logs[link]
        if busy is not None and link in busy:
            _clip(busy[link], state[0])
    undone.sort(key=lambda crossing: crossing[:3])
    return dropped, undone


def _uncount(state: list[int], flow_load: FlowLoad, key: tuple[LinkKey, int], busy: int, size: int, queue: int) -> None:
    """Take a crossing (``busy`` ps of it, its ``size`` bytes, one message and ``queue`` ps of waiting) off a link's
    state and, for a flow other than 0, off its flow's load there."""
    state[1] -= busy
    state[2] -= size
    state[3] -= 1
    state[4] -= queue
    if key[1]:
        load = flow_load[key]
        load[0] -= size
        load[1] -= 1
        load[2] -= queue
        if not any(load):
            del flow_load[key]


def _clip(stretches: tuple[list[int], list[int]], free_ps: int) -> None:
    """End a link's busy stretches at ``free_ps``: what was decided after it is undone."""
    starts, ends = stretches
    while starts and starts[-1] >= free_ps:
        starts.pop()
        ends.pop()
    if ends and ends[-1] > free_ps:
        ends[-1] = free_ps


def forget(
    events: dict[int, list[tuple[int, tuple[Hop, ...], int, int, int]]],
    times: list[int],
    arrivals: Landings,
    gone: set[int],
) -> None:
    """Remove every crossing still to decide and every arrival of the messages in ``gone`` from ``events`` (their
    times from the heap ``times``) and from ``arrivals``."""
    for time_ps in list(events):
        crossings = events[time_ps]
        kept = [crossing for crossing in crossings if crossing[0] not in gone]
        if len(kept) < len(crossings):
            if kept:
                events[time_ps] = kept
            else:
                del events[time_ps]
    times[:] = list(events)
    heapq.heapify(times)
    if any(msg_id in gone for _, msg_id in arrivals.items()):
        arrivals.forget(gone)
