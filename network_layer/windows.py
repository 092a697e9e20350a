"""What networks that keep their arrivals in a heap share when the engine advances them by a window."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from stratasim.v1 import network_pb2

__all__ = ["window_result"]


def window_result(
    arrivals: list[tuple[int, int]], until_ps: int, following: Callable[[], int | None]
) -> network_pb2.AdvanceResult:
    """The result of advancing to ``until_ps``: every (time, message id) of the heap ``arrivals`` due by then,
    popped in (time, id) order, and the next event the network knows of once they are gone (``following()``)."""
    result = network_pb2.AdvanceResult(window_end_ps=until_ps)
    times: list[int] = []
    ids: list[int] = []
    while arrivals and arrivals[0][0] <= until_ps:
        time_ps, msg_id = heapq.heappop(arrivals)
        times.append(time_ps)
        ids.append(msg_id)
    result.deliveries.id.extend(ids)
    result.deliveries.time_ps.extend(times)
    next_event = following()
    if next_event is not None:
        result.has_next = True
        result.next_event_ps = next_event
    return result
