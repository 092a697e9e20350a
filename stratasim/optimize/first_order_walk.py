"""The pipeline of a split schedule (ZB-H1, ZB-V, DualPipe, DualPipeV), walked pass by pass in the schedule's own order.

Where no closed form holds for every pass time, each stage runs its passes in
:func:`~stratasim.workload_layer.transformer.pipeline_schedule.pipeline_order`'s order, each as soon as the stage is
free and its input is in: a forward pass when the forward pass of the model chunk before it (same micro-batch) has
ended and, from another stage, its activation has crossed (and been gathered over TP under scatter/gather); an
input-gradient (or whole backward) pass likewise after the chunk after it; a weight pass at once (its B is before it
in the order; a whole backward pass is B and W together). A chunk next along the model on the same stage (the bottom
of the V) hands over locally. That is the engine's order on one compute chain per stage, with the transfers in
flight while the stages compute; DualPipeV's overlapped pairs run one after the other, as the engine runs them when
no communication sits inside the passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.workload_layer.transformer.pipeline_schedule import Placement, neighbour_chunk, pipeline_order

__all__ = ["stage_ends"]

_GROUP = {"forward": 0, "backward": 1, "input": 1, "weight": 2}
"""The index of a pass's duration in a chunk's ``(forward, backward or input, weight)`` times."""


def stage_ends(
    schedule: str,
    micro_batches: int,
    durations: Sequence[Sequence[tuple[int, int, int]]],
    sends: Sequence[int],
    placement: Placement = "loop",
    gather: int = 0,
) -> tuple[int, ...]:
    """When each stage's last pass ends, in ps: ``durations[s][c]`` is stage ``s``'s local chunk ``c``'s (forward,
    backward or input-gradient, weight) pass over one micro-batch, ``sends[s]`` the transfer between stages ``s``
    and ``s + 1`` (either way), ``gather`` the TP all-gather of a tensor received from another stage."""
    stages, chunks = len(durations), len(durations[0])
    orders = [pipeline_order(schedule, s, stages, micro_batches, chunks) for s in range(stages)]
    ended: dict[tuple[int, int, int, int], int] = {}  # (forward 0 or backward 1, stage, chunk, micro-batch) -> end
    free, at = [0] * stages, [0] * stages
    moved = True
    while moved:
        moved = False
        for s in range(stages):
            while at[s] < len(orders[s]):
                step = orders[s][at[s]]
                group = _GROUP[step.direction]
                arrival, extra = 0, 0
                found = (
                    neighbour_chunk(placement, s, step.chunk, stages, chunks, 1 if group else -1) if group < 2 else None
                )
                if found is not None:
                    end = ended.get((group, *found, step.micro_batch))
                    if end is None:
                        break  # its input is still on the way: go on with the other stages
                    if found[0] != s:
                        arrival, extra = end + sends[min(s, found[0])], gather
                passes = durations[s][step.chunk]
                duration = passes[1] + passes[2] if step.direction == "backward" else passes[group]
                free[s] = max(free[s], arrival) + duration + extra
                if group < 2:
                    ended[(group, s, step.chunk, step.micro_batch)] = free[s]
                at[s] += 1
                moved = True
    if any(at[s] < len(orders[s]) for s in range(stages)):
        raise ValueError(f"the {schedule} order deadlocks")
    return tuple(free)
