"""Zero-bubble pipeline schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): the backward pass
split into B (input gradients) and W (weight gradients), W postponed into what would be bubbles.

- ZB-H1 (their section 3.1, figure 3 top): 1F1B's warm-up of ``stages - stage - 1`` forward passes, then F and B
  alternately, each stage's W passes lagging its B passes by ``stage`` (in B's order), the rest at the end. Every
  stage then holds at most ``stages`` micro-batches between their F and W (1F1B's peak on stage 0), and with
  stage times ``T_F``, ``T_B``, ``T_W`` (``T_W <= T_F + T_B``) the bubble is ``(stages - 1)(T_F + T_B - T_W)``
  against 1F1B's ``(stages - 1)(T_F + T_B + T_W)``.
- ZB-H2 (their section 3.1, figure 3 bottom) and ZB-V (their section 4, figure 5) are built by one greedy list
  schedule over all stages in unit time slots (``T_F = T_B = T_W``, free transfers), the paper's setting for its
  figures: in each slot a stage runs a ready B (earliest micro-batch first), else a ready F while it holds fewer
  forward passes (not yet through their W) than the memory limit, else its oldest pending W. It is our
  construction under the paper's rules, not the paper's search; the engine then times it with the real operators.
- ZB-H2: one chunk per stage, limit ``2 stages - 1`` micro-batches (the paper's ``(2p - 1) M_B``). Stage ``p`` then
  runs ``2 (stages - p) - 1`` forward passes before its first B (the extra warm-up), the last stage F and B
  alternately with its W passes at the end: the paper's parallelogram, every stage computing without a gap from
  its first pass to its last in unit slots.
- ZB-V: two model chunks per stage placed in a V (stage ``p`` holds the model's chunks ``p`` and ``2 stages - 1 -
  p``), so the first and last chunks sit on stage 0; limit ``2 stages`` chunk activations (1F1B's peak, the
  paper's memory limit for ZB-V).
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache
from typing import NamedTuple, TypeAlias

from stratasim.workload_layer.transformer.schedule_passes import Pass

__all__ = ["PassTimes", "zb_h1_order", "zb_h2_order", "zb_v_order", "v_stage"]

PassTimes: TypeAlias = tuple[tuple[int, int, int], ...]
"""Per model chunk (in model order), how long its F, B and W passes take, in any unit; empty: all equal."""


def zb_h1_order(stage: int, stages: int, micro_batches: int) -> tuple[Pass, ...]:
    """ZB-H1's order for ``stage`` of ``stages`` over ``micro_batches``; see the module docstring."""
    warmup = min(stages - stage - 1, micro_batches)
    order = [Pass("forward", 0, k) for k in range(warmup)]
    weights = 0
    for k in range(micro_batches):
        if warmup + k < micro_batches:
            order.append(Pass("forward", 0, warmup + k))
        order.append(Pass("input", 0, k))
        if k >= stage:
            order.append(Pass("weight", 0, weights))
            weights += 1
    return (*order, *(Pass("weight", 0, k) for k in range(weights, micro_batches)))


def zb_h2_order(stage: int, stages: int, micro_batches: int, times: PassTimes = ()) -> tuple[Pass, ...]:
    """ZB-H2's order for ``stage`` of ``stages`` over ``micro_batches``; see the module docstring."""
    return _greedy_orders(stages, micro_batches, 1, times)[stage]


def v_stage(position: int, stages: int) -> tuple[int, int]:
    """The stage and local chunk holding the model's chunk ``position`` (of ``2 stages``) in ZB-V's V."""
    return (position, 0) if position < stages else (2 * stages - 1 - position, 1)


def zb_v_order(stage: int, stages: int, micro_batches: int, times: PassTimes = ()) -> tuple[Pass, ...]:
    """ZB-V's order for ``stage`` of ``stages`` over ``micro_batches``; see the module docstring."""
    return _greedy_orders(stages, micro_batches, 2, times)[stage]


def _place(position: int, stages: int, chunks: int) -> tuple[int, int]:
    """The stage and local chunk of the model's chunk ``position``: one chunk a stage in order, or ZB-V's V."""
    return (position, 0) if chunks == 1 else v_stage(position, stages)


@lru_cache(maxsize=64)
def _greedy_orders(stages: int, micro_batches: int, chunks: int, times: PassTimes) -> tuple[tuple[Pass, ...], ...]:
    """Every stage's ZB-H2 (``chunks == 1``) or ZB-V (``chunks == 2``) order, from the greedy schedule of the module
    docstring: in unit slots, or with each model chunk's passes taking ``times[position]`` slots."""
    positions = chunks * stages
    durations = dict(zip("FBW", zip(*times))) if times else {kind: (1,) * positions for kind in "FBW"}
    done: dict[tuple[str, int, int], int] = {}  # (kind, model chunk, micro-batch) -> slot it ends at
    busy = [0] * stages  # the slot each stage is free from
    next_forward = [0] * positions
    next_input = [0] * positions
    held = [0] * stages
    pending: list[deque[tuple[int, int]]] = [deque() for _ in range(stages)]
    orders: list[list[Pass]] = [[] for _ in range(stages)]
    slot = 0
    while any(len(order) < 3 * chunks * micro_batches for order in orders):
        ran: list[tuple[str, int, int]] = []
        state = _Slot(stages, chunks, micro_batches, slot, done)
        for s in range(stages):
            choice = None if busy[s] > slot else _greedy_choice(s, state, next_forward, next_input, held[s], pending[s])
            if choice is None:
                continue
            kind, position, micro_batch = choice
            busy[s] = slot + durations[kind][position]
            chunk = _place(position, stages, chunks)[1]
            orders[s].append(Pass({"F": "forward", "B": "input", "W": "weight"}[kind], chunk, micro_batch))  # type: ignore[arg-type]
            held[s] += {"F": 1, "B": 0, "W": -1}[kind]
            if kind == "F":
                next_forward[position] += 1
            elif kind == "B":
                next_input[position] += 1
                pending[s].append((position, micro_batch))
            ran.append(choice)
        done.update({choice: slot + durations[choice[0]][choice[1]] for choice in ran})
        later = [end for end in busy if end > slot]
        if not later and any(len(order) < 3 * chunks * micro_batches for order in orders):
            raise AssertionError("the zero-bubble greedy schedule made no progress")
        slot = min(later, default=slot)
    return tuple(tuple(order) for order in orders)


class _Slot(NamedTuple):
    """What every stage's choice in one slot reads: the pipeline's shape and the slot each pass ran in."""

    stages: int
    chunks: int
    micro_batches: int
    slot: int
    done: dict[tuple[str, int, int], int]

    def finished(self, key: tuple[str, int, int]) -> bool:
        return self.done.get(key, self.slot + 1) <= self.slot

    @property
    def limit(self) -> int:
        """Forward passes a stage may hold before their W: ``2 stages`` chunks under ZB-V (1F1B's peak),
        ``2 stages - 1`` micro-batches under ZB-H2 (the paper's)."""
        return 2 * self.stages - (self.chunks == 1)


def _greedy_choice(
    stage: int,
    state: _Slot,
    next_forward: list[int],
    next_input: list[int],
    held: int,
    pending: deque[tuple[int, int]],
) -> tuple[str, int, int] | None:
    """What ``stage`` runs in ``state.slot``: a ready B, else a ready F within the memory limit, else its oldest
    W."""
    last, m = state.chunks * state.stages - 1, state.micro_batches
    positions = (stage,) if state.chunks == 1 else (stage, last - stage)
    ready_inputs = [
        ("B", g, next_input[g])
        for g in positions
        if next_input[g] < m
        and state.finished(("F", g, next_input[g]))
        and (g == last or state.finished(("B", g + 1, next_input[g])))
    ]
    if ready_inputs:
        return min(ready_inputs, key=lambda c: (c[2], -c[1]))
    ready_forwards = [
        ("F", g, next_forward[g])
        for g in positions
        if next_forward[g] < m and (g == 0 or state.finished(("F", g - 1, next_forward[g])))
    ]
    if ready_forwards and held < state.limit:
        return max(ready_forwards, key=lambda c: (c[1], -c[2]))
    if pending:
        position, micro_batch = pending.popleft()
        return ("W", position, micro_batch)
    return None
