"""DualPipe (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, section 3.2.1; deepseek-ai/DualPipe): a
bidirectional pipeline. Each of the ``stages`` ranks (an even number) holds two model chunks, model stage ``p`` for
the micro-batches fed at rank 0 (local chunk 0) and model stage ``stages - 1 - p`` for those fed at the last rank
(local chunk 1), so the parameters are held twice. Half the ``m`` micro-batches enter at each end (chunk 0 runs
micro-batches ``0 .. m/2 - 1``, chunk 1 ``m/2 .. m - 1``).

The order is DualPipe's ``step`` in its eight phases (``nF0``, ``nF0F1``, ``nB1W1F1``, the main ``nF0B1F1B0``,
``nB1F1B0``, ``nB1B0``, ``nWB0``, ``nW``), its phases numbered as there (phase 0 is the rank's local chunk 0 on the
first half of the ranks, chunk 1 on the second half). A backward chunk run with its ``enable_zb`` is an ``input``
pass whose weight pass waits in a FIFO for a later ``weight`` pass; the others are whole ``backward`` passes. An
overlapped forward-backward chunk is the forward pass then the backward pass as an ``OverlappedPass``: both wait only for
what came before, so the expert-parallel all-to-alls of one run under the other's compute. DualPipe needs
``m >= 2 stages`` and ``m`` even; its README gives the bubble ``(stages/2 - 1)(F&B + B - 3W)``.

DualPipeV (the same repository's ``dualpipev.py``, Sea AI Lab's "cut-in-half" DualPipe) keeps one copy of the model
on half the ranks: ``2 stages`` chunks in a V, rank ``p`` holding chunks ``p`` (local chunk 0) and ``2 stages - 1 -
p`` (local chunk 1), as ZB-V places them, every micro-batch entering at rank 0 and going through both. Its ``step``
has the same eight phases without the flip (the last rank, not the middle ones, runs its first pair apart) and
needs ``m >= 2 stages``; its bubble is ``(stages - 1)(F&B + B - 3W)``.
"""

from __future__ import annotations

from collections import deque

from stratasim.workload_layer.transformer.schedule_passes import OverlappedPass, Pass

__all__ = ["dualpipe_order", "dualpipev_order"]


class _Rank:
    """Builds one rank's order, counting each chunk's forward and backward passes as DualPipe's step does."""

    def __init__(self, flip: int, half: int) -> None:
        self.flip = flip  # 1: phase 0 is local chunk 1 (DualPipe's second half of the ranks)
        self.half = half  # local chunk 1's first micro-batch (DualPipe: m / 2; DualPipeV: 0, both see them all)
        self.forwards = [0, 0]
        self.backwards = [0, 0]
        self.weights: deque[Pass] = deque()
        self.order: list[Pass] = []

    def forward(self, phase: int) -> None:
        chunk = phase ^ self.flip
        self.order.append(Pass("forward", chunk, chunk * self.half + self.forwards[chunk]))
        self.forwards[chunk] += 1

    def backward(self, phase: int, zero_bubble: bool = False, overlap: bool = False) -> None:
        chunk = phase ^ self.flip
        micro_batch = chunk * self.half + self.backwards[chunk]
        self.backwards[chunk] += 1
        kind = OverlappedPass if overlap else Pass
        self.order.append(kind("input" if zero_bubble else "backward", chunk, micro_batch))
        if zero_bubble:
            self.weights.append(Pass("weight", chunk, micro_batch))

    def weight(self) -> None:
        self.order.append(self.weights.popleft())

    def forward_backward(self, forward_phase: int, backward_phase: int) -> None:
        self.forward(forward_phase)
        self.backward(backward_phase, overlap=True)


def dualpipe_order(stage: int, stages: int, micro_batches: int) -> tuple[Pass, ...]:
    """DualPipe's order for rank ``stage`` of ``stages`` over ``micro_batches``; see the module docstring."""
    if stages % 2 or micro_batches % 2 or micro_batches < 2 * stages:
        raise ValueError(
            f"DualPipe needs an even number of stages ({stages}) and at least twice as many micro-batches, an even number ({micro_batches})"
        )
    rank = _Rank(int(stage >= stages // 2), micro_batches // 2)
    return _phases(rank, micro_batches // 2, stages // 2, min(stage, stages - 1 - stage))


def dualpipev_order(stage: int, stages: int, micro_batches: int) -> tuple[Pass, ...]:
    """DualPipeV's order for rank ``stage`` of ``stages`` over ``micro_batches``; see the module docstring."""
    if micro_batches < 2 * stages:
        raise ValueError(f"DualPipeV needs at least twice as many micro-batches ({micro_batches}) as stages ({stages})")
    return _phases(_Rank(0, 0), micro_batches, stages, stage)


def _phases(rank: _Rank, per_chunk: int, half_ranks: int, half_rank: int) -> tuple[Pass, ...]:
    """The eight phases of ``step`` on ``rank``: ``per_chunk`` micro-batches through each local chunk, the rank
    ``half_rank`` of ``half_ranks`` counted from its end of the pipeline (DualPipe's half of the ranks; DualPipeV's
    ranks from the V's top)."""
    for _ in range((half_ranks - half_rank - 1) * 2):
        rank.forward(0)
    for _ in range(half_rank + 1):
        rank.forward(0)
        rank.forward(1)
    for _ in range(half_ranks - half_rank - 1):
        rank.backward(1, zero_bubble=True)
        rank.weight()
        rank.forward(1)
    _main_phase(rank, per_chunk - 2 * half_ranks + half_rank + 1, half_rank == half_ranks - 1)
    for _ in range(half_ranks - half_rank - 1):
        rank.backward(1)
        rank.forward_backward(1, 0)
    _drain(rank, half_ranks, half_rank)
    return tuple(rank.order)


def _main_phase(rank: _Rank, steps: int, middle: bool) -> None:
    """DualPipe's main phase, ``nF0B1F1B0``: overlapped pairs; on the ``middle`` ranks (DualPipeV: the last) the
    first pair not overlapped."""
    for i in range(steps):
        if i == 0 and middle:
            rank.forward(0)
            rank.backward(1)
        else:
            rank.forward_backward(0, 1)
        rank.forward_backward(1, 0)


def _drain(rank: _Rank, half_ranks: int, half_rank: int) -> None:
    """DualPipe's last phases: ``nB1B0`` (the second half with zero bubble), ``nWB0`` and ``nW``."""
    steps = half_rank + 1
    zero_bubble = False
    for i in range(steps):
        if i == steps // 2 and half_rank % 2 == 1:
            zero_bubble = True
        rank.backward(1, zero_bubble)
        if i == steps // 2 and half_rank % 2 == 0:
            zero_bubble = True
        rank.backward(0, zero_bubble)
    for _ in range(half_ranks - half_rank - 1):
        rank.weight()
        rank.backward(0, zero_bubble=True)
    while rank.weights:
        rank.weight()
