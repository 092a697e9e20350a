"""The forward and backward passes of a transformer's blocks on one TP rank, timed as the engine runs them.

A pass is the chain of nodes :mod:`stratasim.workload_layer.transformer.training_graph` emits for one block and
micro-batch: its operators, priced through the same :class:`~stratasim.system_layer.operators.OperatorPricer` the
engine prices them with, one after the other on the compute stream, and its tensor-parallel collectives, timed by
:mod:`stratasim.system_layer.collectives.first_order`. As in the emitter, a forward all-reduce (Megatron's *g*) and
the sequence-parallel gathers and scatters hold the stream, while the backward all-reduce of an input gradient
(*f*), or its reduce-scatter with sequence parallelism, starts when the input-gradient GEMM ends and overlaps the
weight-gradient GEMM: the stream waits for whichever ends last. Full recomputation runs the block's forward chain
again before its backward chain; selective recomputation runs the recomputed steps' forward operators inside it.

TP ranks run the same graph, so a TP collective starts on every member at once and its time is its closed form:
each pass's time is exact given those closed forms and the operators' prices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stratasim.kernel import operators
from stratasim.system_layer.operators import OperatorPricer
from stratasim.workload_layer.transformer.step_operators import Role, step_operator
from stratasim.workload_layer.transformer.steps import (
    AllToAll,
    Attention,
    Gemm,
    Pointwise,
    Recompute,
    RingAttention,
    SequenceParallelSum,
    Step,
)

__all__ = ["PassTime", "BlockTimes", "TensorCollective", "ZeroThree", "block_times", "with_zero3"]

TensorCollective = Callable[[str, int], int]
"""The picoseconds of a collective (``all_reduce``, ``reduce_scatter``, ``all_gather``) of so many bytes over the
TP group; 0 for a group of one."""


@dataclass(frozen=True)
class PassTime:
    """One pass of a block over one micro-batch, in ps: ``compute`` (operators, recomputation excluded),
    ``recompute`` (operators re-run for recomputation), ``comm`` (TP communication the stream waits for) and
    ``data_parallel`` (ZeRO-3's parameter gathers and gradient scatters the stream waits for, with their casts)."""

    compute: int = 0
    recompute: int = 0
    comm: int = 0
    data_parallel: int = 0

    @property
    def total(self) -> int:
        """The pass's time on the compute stream."""
        return self.compute + self.recompute + self.comm + self.data_parallel


@dataclass(frozen=True)
class BlockTimes:
    """A block's forward and backward passes (the backward one with its recomputation, if any)."""

    forward: PassTime
    backward: PassTime


class _Chain:
    """The compute stream of one pass: ``ready`` is when the next node may start, ``input_grad`` when the last
    input-gradient GEMM ended (the backward TP reduction's start)."""

    def __init__(self, pricer: OperatorPricer, dtype: operators.DType, gemm_dtype: operators.DType | None) -> None:
        self._pricer, self._dtype, self._gemm_dtype = pricer, dtype, gemm_dtype
        self.element = operators.dtype_bytes(dtype)
        self.ready = 0
        self.input_grad: int | None = None
        self.compute = 0
        self.recompute = 0

    def run(self, step: Gemm | Pointwise | Attention, role: Role, recomputing: bool) -> int:
        """Run ``step``'s operator in ``role`` next on the stream; return when it ends."""
        (duration,) = self._pricer.durations_ps([step_operator(step, role, self._dtype, self._gemm_dtype)])
        self.ready += duration
        if recomputing:
            self.recompute += duration
        else:
            self.compute += duration
        return self.ready

    def wait(self, duration: int) -> None:
        """A collective the stream waits for, started now."""
        self.ready += duration

    def overlap(self, duration: int) -> None:
        """A collective started when the input gradient was ready, which the next node waits for too."""
        start = self.ready if self.input_grad is None else self.input_grad
        self.ready = max(self.ready, start + duration)

    def time(self) -> PassTime:
        return PassTime(self.compute, self.recompute, self.ready - self.compute - self.recompute)


def _forward(chain: _Chain, steps: Sequence[Step], tensor_bytes: int, tp: TensorCollective, again: bool) -> None:
    """The forward chain of ``steps`` (again, for full recomputation, when ``again``)."""
    for step in steps:
        if isinstance(step, (Gemm, Pointwise, Attention)):
            chain.run(step, "forward", again)
        elif isinstance(step, Recompute):
            for inner in step.steps:
                chain.run(inner, "forward", again)
        elif isinstance(step, SequenceParallelSum):
            chain.wait(tp("reduce_scatter" if step.scatter else "all_gather", step.elements * chain.element))
        elif isinstance(step, AllToAll):
            raise ValueError("mixtures of experts are not modelled")
        elif isinstance(step, RingAttention):
            raise ValueError("context parallelism is not modelled")
        elif step.in_forward:
            chain.wait(tp("all_reduce", tensor_bytes))


def _backward(chain: _Chain, steps: Sequence[Step], tensor_bytes: int, tp: TensorCollective) -> None:
    """The backward chain of ``steps``, in reverse, as the emitter writes it."""
    for step in reversed(steps):
        if isinstance(step, Gemm):
            chain.input_grad = chain.run(step, "dgrad", False)
            chain.run(step, "wgrad", False)
        elif isinstance(step, (Pointwise, Attention)):
            chain.run(step, "backward", False)
        elif isinstance(step, Recompute):
            for inner in step.steps:
                chain.run(inner, "forward", True)
            _backward(chain, step.steps, tensor_bytes, tp)
        elif isinstance(step, SequenceParallelSum):
            size = step.elements * chain.element
            if step.scatter:  # all-gather of the output gradient: the stream waits
                chain.wait(tp("all_gather", size))
            else:  # reduce-scatter of the input gradient, overlapping the weight-gradient GEMM
                chain.overlap(tp("reduce_scatter", size))
        elif isinstance(step, AllToAll):
            raise ValueError("mixtures of experts are not modelled")
        elif isinstance(step, RingAttention):
            raise ValueError("context parallelism is not modelled")
        elif not step.in_forward:
            chain.overlap(tp("all_reduce", tensor_bytes))


def block_times(
    steps: Sequence[Step],
    recompute: bool,
    pricer: OperatorPricer,
    dtype: operators.DType,
    gemm_dtype: operators.DType | None,
    tensor_bytes: int,
    tp: TensorCollective,
) -> BlockTimes:
    """The forward and backward passes of a block of ``steps`` (re-running its forward first, if ``recompute``);
    ``tensor_bytes`` is a TP all-reduce's buffer."""
    forward = _Chain(pricer, dtype, gemm_dtype)
    _forward(forward, steps, tensor_bytes, tp, again=False)
    backward = _Chain(pricer, dtype, gemm_dtype)
    if recompute:
        _forward(backward, steps, tensor_bytes, tp, again=True)
        backward.input_grad = None
    _backward(backward, steps, tensor_bytes, tp)
    return BlockTimes(forward.time(), backward.time())


@dataclass(frozen=True)
class ZeroThree:
    """ZeRO-3's work around one block's passes, in ps: the all-gather of its parameters and the reduce-scatter of
    its gradients over the DP group, the cast of the rank's parameter shard before each gather and the
    accumulation of its gradient shard after each scatter (0 without shard casts)."""

    gather: int
    scatter: int
    cast: int = 0
    accumulate: int = 0


def with_zero3(times: BlockTimes, zero: ZeroThree) -> BlockTimes:
    """``times`` with ZeRO-3's per-block work as the emitter orders it. Forward, a block's gather is issued as the
    block before it starts, so it hides behind that block (taken as long as this one): the stream waits for the
    cast and ``max(0, gather - pass)``. Backward, collectives on the DP communicator run in program order, and a
    block's reduce-scatter is issued when its pass ends, before the next block's gather: that gather waits for it,
    so the stream waits for the cast, the gather, the scatter and the accumulation of every block."""
    forward, backward = times.forward, times.backward
    waited_forward = zero.cast + max(0, zero.gather - forward.total)
    waited_backward = zero.cast + zero.gather + zero.scatter + zero.accumulate
    return BlockTimes(
        PassTime(forward.compute, forward.recompute, forward.comm, forward.data_parallel + waited_forward),
        PassTime(backward.compute, backward.recompute, backward.comm, backward.data_parallel + waited_backward),
    )
