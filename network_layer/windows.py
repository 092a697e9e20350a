"""What networks that keep their arrivals in a heap share: adding arrivals to it, and taking out those a window
decides when the engine advances them."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from stratasim.v1 import network_pb2

__all__ = ["due_arrivals", "into_heap", "window_result"]

_SCAN = 1 << 14
"""Most arrivals scanned to see whether all are due: beyond, popping only the due ones costs less."""


def window_result(
    arrivals: list[tuple[int, int]], until_ps: int, following: Callable[[], int | None]
) -> network_pb2.AdvanceResult:
    """The result of advancing to ``until_ps``: every (time, message id) of the heap ``arrivals`` due by then,
    taken out in (time, id) order, and the next event the network knows of once they are gone (``following()``)."""
    result = network_pb2.AdvanceResult(window_end_ps=until_ps)
    due = due_arrivals(arrivals, until_ps)
    result.deliveries.id.extend([msg_id for _, msg_id in due])
    result.deliveries.time_ps.extend([time_ps for time_ps, _ in due])
    next_event = following()
    if next_event is not None:
        result.has_next = True
        result.next_event_ps = next_event
    return result


def due_arrivals(arrivals: list[tuple[int, int]], until_ps: int) -> list[tuple[int, int]]:
    """Every (time, message id) of the heap ``arrivals`` due by ``until_ps``, taken out in (time, id) order."""
    due: list[tuple[int, int]] = []
    if arrivals and arrivals[0][0] <= until_ps:
        if len(arrivals) <= _SCAN and max(arrivals)[0] <= until_ps:  # all due (a collective's step): one sort
            due = sorted(arrivals)
            arrivals.clear()
        else:
            while arrivals and arrivals[0][0] <= until_ps:
                due.append(heapq.heappop(arrivals))
    return due


def into_heap(heap: list[tuple[int, int]], items: list[tuple[int, int]]) -> None:
    """Add ``items`` to ``heap``: pushed one by one when few, else appended and the whole heapified (cheaper); to
    an empty heap, sorted (a sorted list is a heap, and a collective step's arrivals come nearly in order)."""
    if not heap:
        items.sort()
        heap += items
    elif len(items) < len(heap):
        for item in items:
            heapq.heappush(heap, item)
    else:
        heap += items
        heapq.heapify(heap)
