"""What networks that keep their arrivals share: taking out of a heap those a window decides when the engine
advances them, or keeping them by time (:class:`Landings`)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from itertools import repeat

from stratasim.v1 import network_pb2

__all__ = ["Landings", "due_arrivals", "window_result"]

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


class Landings:
    """Arrivals kept by time, for a network that decides many at a time: the ids landing at each time in the order
    they were decided (``by_time``) and a heap of those times (``times``); the event loop adds to both directly.
    Taken out in (time, id) order, as :func:`due_arrivals` takes them out of a heap, with one heap operation per
    time rather than per message (an all-to-all lands a thousand messages at each of a thousand times)."""

    __slots__ = ("by_time", "times")

    def __init__(self) -> None:
        self.by_time: dict[int, list[int]] = {}
        self.times: list[int] = []

    def add(self, time_ps: int, msg_id: int) -> None:
        """Add the arrival of ``msg_id`` at ``time_ps``."""
        landing = self.by_time.get(time_ps)
        if landing is None:
            self.by_time[time_ps] = [msg_id]
            heapq.heappush(self.times, time_ps)
        else:
            landing.append(msg_id)

    def first(self) -> int | None:
        """The earliest arrival's time (None when there is none)."""
        return self.times[0] if self.times else None

    def due(self, until_ps: int) -> list[tuple[int, int]]:
        """Every (time, message id) due by ``until_ps``, taken out in (time, id) order."""
        due: list[tuple[int, int]] = []
        times, by_time = self.times, self.by_time
        while times and times[0] <= until_ps:
            time_ps = heapq.heappop(times)
            ids = by_time.pop(time_ps)
            ids.sort()
            due += zip(repeat(time_ps), ids)
        return due

    def items(self) -> Iterator[tuple[int, int]]:
        """Every (time, message id) still to land, in no order."""
        for time_ps, ids in self.by_time.items():
            for msg_id in ids:
                yield time_ps, msg_id

    def count(self) -> int:
        """How many messages are still to land."""
        return sum(map(len, self.by_time.values()))

    def forget(self, gone: set[int]) -> None:
        """Drop the arrivals of the messages in ``gone``."""
        for time_ps, ids in list(self.by_time.items()):
            kept = [msg_id for msg_id in ids if msg_id not in gone]
            if kept:
                self.by_time[time_ps] = kept
            else:
                del self.by_time[time_ps]
        self.times[:] = list(self.by_time)
        heapq.heapify(self.times)

    def clear(self) -> None:
        self.by_time.clear()
        self.times.clear()

    def result(self, until_ps: int, following: Callable[[], int | None]) -> network_pb2.AdvanceResult:
        """:func:`window_result` of these arrivals."""
        result = network_pb2.AdvanceResult(window_end_ps=until_ps)
        due = self.due(until_ps)
        result.deliveries.id.extend([msg_id for _, msg_id in due])
        result.deliveries.time_ps.extend([time_ps for time_ps, _ in due])
        next_event = following()
        if next_event is not None:
            result.has_next = True
            result.next_event_ps = next_event
        return result
