"""The pipeline of a split schedule (ZB-H1), walked pass by pass in the schedule's own order.

Where no closed form holds for every pass time, each stage runs its passes in
:func:`~stratasim.workload_layer.transformer.pipeline_schedule.pipeline_order`'s order, each as soon as the stage is
free and its input has arrived: a forward pass when the previous stage's forward pass of that micro-batch has ended
and its activation crossed, an input-gradient (or whole backward) pass when the next stage's has ended and its
gradient crossed back, a weight pass at once (the stage's own B before it, by the order). That is the engine's
order on one compute chain per stage, with the transfers in flight while the stages compute.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.workload_layer.transformer.pipeline_schedule import pipeline_order

__all__ = ["stage_ends"]

_GROUP = {"forward": 0, "backward": 1, "input": 1, "weight": 2}
"""The index of a pass's duration in a stage's ``(forward, backward or input, weight)`` times."""


def stage_ends(
    schedule: str, micro_batches: int, durations: Sequence[tuple[int, int, int]], sends: Sequence[int]
) -> tuple[int, ...]:
    """When each stage's last pass ends, in ps: ``durations[s]`` is stage ``s``'s (forward, backward or
    input-gradient, weight) pass over one micro-batch, ``sends[s]`` the transfer between stages ``s`` and ``s + 1``
    (either way)."""
    stages = len(durations)
    orders = [pipeline_order(schedule, s, stages, micro_batches) for s in range(stages)]
    ended: dict[tuple[int, int, int], int] = {}  # (forward 0 or backward 1, stage, micro-batch) -> end
    free, at = [0] * stages, [0] * stages
    moved = True
    while moved:
        moved = False
        for s in range(stages):
            while at[s] < len(orders[s]):
                step = orders[s][at[s]]
                group = _GROUP[step.direction]
                arrival = 0
                if group < 2:
                    peer = s - 1 if group == 0 else s + 1
                    if 0 <= peer < stages:
                        end = ended.get((group, peer, step.micro_batch))
                        if end is None:
                            break  # its input is still on the way: go on with the other stages
                        arrival = end + sends[min(s, peer)]
                free[s] = max(free[s], arrival) + durations[s][group]
                if group < 2:
                    ended[(group, s, step.micro_batch)] = free[s]
                at[s] += 1
                moved = True
    if any(at[s] < len(orders[s]) for s in range(stages)):
        raise ValueError(f"the {schedule} order deadlocks")
    return tuple(free)
