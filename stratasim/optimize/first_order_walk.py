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
from stratasim.workload_layer.transformer.schedule_passes import OverlappedPass

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
    computes: Sequence[Sequence[tuple[int, int, int]]] | None = None,
) -> tuple[int, ...]:
    """When each stage's last pass ends, in ps: ``durations[s][c]`` is stage ``s``'s local chunk ``c``'s (forward,
    backward or input-gradient, weight) pass over one micro-batch, ``sends[s]`` the transfer between stages ``s``
    and ``s + 1`` (either way), ``gather`` the TP all-gather of a tensor received from another stage;
    ``computes`` the same passes' compute alone, for DualPipe's overlapped pairs (:func:`_paired_end`)."""
    stages, chunks = len(durations), len(durations[0])
    orders = [pipeline_order(schedule, s, stages, micro_batches, chunks) for s in range(stages)]
    ended: dict[tuple[int, int, int, int], int] = {}  # (forward 0 or backward 1, stage, chunk, micro-batch) -> end
    free, at = [0] * stages, [0] * stages
    last = [(0, 0, 0)] * stages  # each stage's previous pass: (start, duration, compute)
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
                duration = _duration(durations[s][step.chunk], step.direction) + extra
                compute = duration if computes is None else _duration(computes[s][step.chunk], step.direction)
                start = max(free[s], arrival)
                if computes is not None and isinstance(step, OverlappedPass):
                    free[s] = max(free[s], _paired_end(last[s], arrival, duration, compute))
                else:
                    free[s] = start + duration
                last[s] = (start, duration, compute)
                if group < 2:
                    ended[(group, s, step.chunk, step.micro_batch)] = free[s]
                at[s] += 1
                moved = True
    if any(at[s] < len(orders[s]) for s in range(stages)):
        raise ValueError(f"the {schedule} order deadlocks")
    return tuple(free)


def _duration(passes: tuple[int, int, int], direction: str) -> int:
    """A pass's time from its chunk's (forward, backward or input-gradient, weight) times: a whole backward pass
    is B and W together."""
    return passes[1] + passes[2] if direction == "backward" else passes[_GROUP[direction]]


def _paired_end(before: tuple[int, int, int], arrival: int, duration: int, compute: int) -> int:
    """When a pass overlapped with the pass ``before`` (its start, duration and compute) ends, begun with it (or
    when its input arrives), the two chains sharing the compute stream. The engine interleaves them operator by
    operator: the pair takes at least ``max(both computes, either pass)`` (each one's communication hidden under the
    other's compute) and at most ``max(one pass and the other's compute)`` (only one's hidden) on the plans
    tested; the model takes the middle of the two. That rule was chosen on plans with TP or CP, missed 5 % on
    held-out ones and is no longer asked for them (:func:`~stratasim.optimize.first_order_plan.unsupported`
    declines them); it prices the expert all-to-alls (EP), within 1.7 % on held-out plans. Without communication
    both are the two passes back to back."""
    begun, first, busy = before
    hidden = max(busy + compute, first, duration)
    one = max(first + compute, busy + duration)
    return max(begun + (hidden + one) // 2, arrival + duration)
