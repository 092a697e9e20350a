"""The deterministic event queue every simulated component schedules on.

Time is an integer number of picoseconds. Events at equal time run in the order they were scheduled (a
sequence number breaks ties), so a study gives the same result bit for bit on every run.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from stratasim.kernel.errors import SimulationError

__all__ = ["EventQueue", "Callback", "Progress", "RunStopped"]

Callback = Callable[[Any], None]

Progress = Callable[[int, int], None]
"""Told, every few hundred distinct event times (or every window), the simulated time reached in ps and the events
processed so far: a progress display throttles it by wall time itself. It may raise :class:`RunStopped` to end the
run there."""


class RunStopped(Exception):
    """Raised by a :data:`Progress` to stop a run where it is (Ctrl-C): the engine reports what it simulated so far,
    marked incomplete, instead of losing it."""

    def __init__(self, reason: str = "interrupted") -> None:
        super().__init__(reason)
        self.reason = reason


_PROGRESS_EVERY = 256  # distinct event times between two calls of a Progress


class EventQueue:
    """A heap of ``(time_ps, seq, callback, arg)``; ``run``/``run_until`` pop in order and call ``callback(arg)``.

    A callback may schedule more events, at the current time or later, never earlier.
    """

    __slots__ = ("_heap", "_seq", "now", "processed")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callback, Any]] = []
        self._seq = 0
        self.now = 0
        self.processed = 0

    def schedule(self, time_ps: int, callback: Callback, arg: Any = None) -> None:
        """Run ``callback(arg)`` at ``time_ps`` (not before ``now``)."""
        if time_ps < self.now:
            raise SimulationError(f"event scheduled at {time_ps} ps, before the current time {self.now} ps")
        self._seq += 1
        heapq.heappush(self._heap, (time_ps, self._seq, callback, arg))

    def peek(self) -> int | None:
        """Time of the next event, or None when the queue is empty."""
        return self._heap[0][0] if self._heap else None

    def run_until(self, until_ps: int) -> None:
        """Process every event with time at most ``until_ps``, including those they schedule in that range."""
        heap = self._heap
        pop = heapq.heappop
        count = 0
        while heap and heap[0][0] <= until_ps:
            time_ps, _, callback, arg = pop(heap)
            self.now = time_ps
            callback(arg)
            count += 1
        self.processed += count

    def run_until_busy(self, outbox: list[Any]) -> None:
        """Process events in order until one leaves something in ``outbox`` (a message to send) or none are
        left: how the engine runs ahead while the network has nothing in flight."""
        heap = self._heap
        pop = heapq.heappop
        count = 0
        while heap and not outbox:
            time_ps, _, callback, arg = pop(heap)
            self.now = time_ps
            callback(arg)
            count += 1
        self.processed += count

    def run(self, progress: Progress | None = None) -> None:
        """Process events until none are left, telling ``progress`` how far it got now and then."""
        heap = self._heap
        pop = heapq.heappop
        if progress is None:  # one loop over every event, in (time, sequence) order as run_until takes them
            count = 0
            try:
                while heap:
                    time_ps, _, callback, arg = pop(heap)
                    self.now = time_ps
                    callback(arg)
                    count += 1
            finally:
                self.processed += count
            return
        steps = 0
        while heap:  # run_until each event time in turn, inline: most times hold one event
            now = heap[0][0]
            self.now = now
            count = 0
            while heap and heap[0][0] == now:
                callback, arg = pop(heap)[2:]
                callback(arg)
                count += 1
            self.processed += count
            steps += 1
            if steps % _PROGRESS_EVERY == 0:
                progress(self.now, self.processed)

    def __len__(self) -> int:
        return len(self._heap)
