"""Collectives that share an NPU's network dimensions, run through its scheduling queues in closed form.

With one chunk per collective (``splits: 1``) and one chunk at a time per dimension (``active_chunks: 1``, one
queue per dimension), each phase of a collective waits in its dimension's queue, first come first served, until the
phase before it there has ended (:mod:`stratasim.system_layer.scheduler.chunk_scheduler`). Every member of the
groups runs alike, so one NPU's queues give every member's times.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Queued", "queued_ends"]


@dataclass(frozen=True)
class Queued:
    """A collective: its ``phases`` as (dimension, ps), issued at ``issue_ps`` or, if ``after`` is set, when the
    collective at that index ends."""

    phases: Sequence[tuple[int, int]]
    issue_ps: int = 0
    after: int | None = None


def queued_ends(collectives: Sequence[Queued]) -> list[int]:
    """When each of ``collectives`` (in issue order) ends, its phases queued on their dimensions in the order
    they ask for them (ties in issue order)."""
    ends = [0] * len(collectives)
    free: dict[int, int] = {}
    waiting: list[tuple[int, int, int, int]] = []  # (asked at, order, collective, phase)
    order = 0
    for index, queued in enumerate(collectives):
        if queued.after is None:
            heapq.heappush(waiting, (queued.issue_ps, order, index, 0))
            order += 1
    while waiting:
        asked, _, index, phase = heapq.heappop(waiting)
        phases = collectives[index].phases
        if phase == len(phases):
            ends[index] = asked
            for other, queued in enumerate(collectives):
                if queued.after == index:
                    heapq.heappush(waiting, (asked, order, other, 0))
                    order += 1
            continue
        dim, duration = phases[phase]
        end = max(asked, free.get(dim, 0)) + duration
        free[dim] = end
        heapq.heappush(waiting, (end, order, index, phase + 1))
        order += 1
    return ends
