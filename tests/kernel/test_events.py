from __future__ import annotations

import pytest

from stratasim.kernel.errors import SimulationError
from stratasim.kernel.events import EventQueue


def test_events_run_in_time_order_and_ties_in_schedule_order() -> None:
    queue = EventQueue()
    seen: list[tuple[int, str]] = []
    for time_ps, label in [(5, "a"), (1, "b"), (5, "c"), (3, "d"), (1, "e")]:
        queue.schedule(time_ps, lambda lbl: seen.append((queue.now, lbl)), label)
    queue.run()
    assert seen == [(1, "b"), (1, "e"), (3, "d"), (5, "a"), (5, "c")]
    assert queue.processed == 5


def test_run_until_stops_at_the_horizon_and_includes_new_events_within_it() -> None:
    queue = EventQueue()
    seen: list[int] = []

    def chain(n: int) -> None:
        seen.append(queue.now)
        if n:
            queue.schedule(queue.now + 10, chain, n - 1)

    queue.schedule(0, chain, 5)
    queue.run_until(25)
    assert seen == [0, 10, 20]
    assert queue.peek() == 30


def test_scheduling_in_the_past_is_an_error() -> None:
    queue = EventQueue()
    queue.schedule(10, lambda _: queue.schedule(5, print))
    with pytest.raises(SimulationError, match="before the current time"):
        queue.run()
