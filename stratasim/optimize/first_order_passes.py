"""The forward and backward passes of a transformer's blocks on one TP rank, timed as the engine runs them.

A pass is the chain of nodes :mod:`stratasim.workload_layer.transformer.training_graph` emits for one block and
micro-batch: its operators, priced through the same :class:`~stratasim.system_layer.operators.OperatorPricer` the
engine prices them with, one after the other on the compute stream, and its tensor-parallel collectives, timed by
:mod:`stratasim.system_layer.collectives.first_order`. As in the emitter, a forward all-reduce (Megatron's *g*) and
the sequence-parallel gathers and scatters hold the stream, while the backward all-reduce of an input gradient
(*f*), or its reduce-scatter with sequence parallelism, starts when the input-gradient GEMM ends and overlaps the
weight-gradient GEMM: the stream waits for whichever ends last. Full recomputation runs the block's forward chain
again before its backward chain; selective recomputation runs the recomputed steps' forward operators inside it.

With context parallelism, the Ulysses core's all-to-alls (two each way) hold the stream around its full-sequence
kernel; ring attention's ``cp`` kernels run while the key-value blocks go round (:func:`ring_core_ps`); the
all-gather variant's gather (and backward scatter) of the keys and values hold it around its two kernels. A mixture
of experts' dispatch and combine all-to-alls over the EP group hold the stream too (both passes), as the emitter
issues them after everything the stream waits for.

TP ranks run the same graph, so a TP collective starts on every member at once and its time is its closed form:
each pass's time is exact given those closed forms and the operators' prices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stratasim.kernel import operators
from stratasim.system_layer.operators import OperatorPricer
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.transformer.step_operators import (
    Role,
    gathered_operators,
    ring_merges,
    ring_operators,
    step_operator,
)
from stratasim.workload_layer.transformer.steps import (
    AllToAll,
    Attention,
    GatheredAttention,
    Gemm,
    Pointwise,
    Recompute,
    RingAttention,
    SequenceParallelSum,
    Step,
)

__all__ = [
    "PassTime",
    "BlockTimes",
    "ContextParallel",
    "Communication",
    "TensorCollective",
    "ZeroThree",
    "block_times",
    "ring_core_ps",
    "with_zero3",
]

TensorCollective = Callable[[str, int], int]
"""The picoseconds of a collective (``all_reduce``, ``reduce_scatter``, ``all_gather``) of so many bytes over the
TP group; 0 for a group of one."""


@dataclass(frozen=True)
class ContextParallel:
    """The CP group's communication of so many bytes, in ps: ``transfers`` a ring-attention key-value block (or its
    gradients) into each member from the one before it in the ring, ``collective`` a collective over the group
    (a Ulysses all-to-all, the all-gather CP's gather and scatter)."""

    transfers: Callable[[int], tuple[int, ...]]
    collective: TensorCollective


@dataclass(frozen=True)
class Communication:
    """What a block's passes communicate over, in ps: ``tp`` the TP group's collectives, ``context`` the CP group's
    (None: no CP), ``experts`` an all-to-all of so many bytes over the EP group (None: no EP, or a group of one)."""

    tp: TensorCollective
    context: ContextParallel | None = None
    experts: Callable[[int], int] | None = None


def ring_core_ps(local: int, ring: int, links: Sequence[int], backward: bool) -> int:
    """Ring attention's core as :mod:`~stratasim.workload_layer.transformer.ring_attention` emits it, from its
    start on every member to what the slowest member's stream waits for next; ``links[r]`` is a transfer into
    member ``r`` from member ``r - 1`` (a send ends when it is delivered).

    Kernel 0 (``local``) runs at once and key-value block 0 leaves; block ``i`` leaves a member when block ``i - 1``
    has arrived there. Kernel ``i`` (``ring``) starts when kernel ``i - 1`` has ended and block ``i - 1`` has both
    left the member and arrived at it; backward also when the key-value gradients kernel ``i - 1`` sent on (from
    ``i = 2``) have left and arrived, and the last kernel's gradients are waited for at the end."""
    ranks = len(links)
    after = [links[(r + 1) % ranks] for r in range(ranks)]  # a send out of member r, to r + 1
    end = [local] * ranks
    left = [0] * ranks  # when block i - 1 left each member
    grads: list[int] | None = None  # when kernel i - 1's gradients left each member
    for _ in range(1, ranks):
        arrived = [left[r - 1] + links[r] for r in range(ranks)]
        start = [max(end[r], arrived[r], left[r] + after[r]) for r in range(ranks)]
        if grads is not None:
            start = [max(start[r], grads[r - 1] + links[r], grads[r] + after[r]) for r in range(ranks)]
        left = arrived
        end = [time + ring for time in start]
        grads = end if backward else None
    if grads is not None:
        end = [max(end[r], grads[r - 1] + links[r], grads[r] + after[r]) for r in range(ranks)]
    return max(end)


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

    def __add__(self, other: PassTime) -> PassTime:
        return PassTime(
            self.compute + other.compute,
            self.recompute + other.recompute,
            self.comm + other.comm,
            self.data_parallel + other.data_parallel,
        )


@dataclass(frozen=True)
class BlockTimes:
    """A block's forward and backward passes (the backward one with its recomputation, if any); under a split
    schedule the backward pass is the input-gradient half (B) and ``weight`` the weight-gradient GEMMs (W)."""

    forward: PassTime
    backward: PassTime
    weight: PassTime = PassTime()

    def __add__(self, other: BlockTimes) -> BlockTimes:
        """Two blocks run one after the other (each pass of one, then the same pass of the other)."""
        return BlockTimes(self.forward + other.forward, self.backward + other.backward, self.weight + other.weight)


class _Chain:
    """The compute stream of one pass: ``ready`` is when the next node may start, ``input_grad`` when the last
    input-gradient GEMM ended (the backward TP reduction's start)."""

    def __init__(
        self,
        pricer: OperatorPricer,
        dtype: operators.DType,
        gemm_dtype: operators.DType | None,
        weights: _Chain | None = None,
    ) -> None:
        self._pricer, self._dtype, self._gemm_dtype = pricer, dtype, gemm_dtype
        self.weights = weights  # the weight pass weighted GEMMs' weight gradients go to, if split off
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

    def ring(self, step: RingAttention, backward: bool, recomputing: bool, context: ContextParallel) -> None:
        """Ring attention's core next on the stream (:func:`ring_core_ps`); its kernels and the merges after each
        (:func:`~stratasim.workload_layer.transformer.step_operators.ring_merges`, the last kernel's final output
        corrections included) count as compute."""
        local, ring = self._pricer.durations_ps(list(ring_operators(step, backward, self._dtype)))
        merges = ring_merges(step, backward, self._dtype)
        local += self._total(merges.after[0])
        ring += self._total(merges.after[1]) if step.ranks > 1 else 0
        final = self._total(merges.final)
        kernels = local + (step.ranks - 1) * ring + final
        if recomputing:
            self.recompute += kernels
        else:
            self.compute += kernels
        links = context.transfers(step.kv_elements * self.element)
        self.ready += ring_core_ps(local, ring, links, backward) + final

    def gathered(self, step: GatheredAttention, backward: bool, recomputing: bool, context: ContextParallel) -> None:
        """Transformer Engine's all-gather CP next on the stream: the keys and values all-gathered over the CP
        group, its two kernels, and backward the key-value gradients reduce-scattered, each waited for
        (:func:`~stratasim.workload_layer.transformer.ring_attention.gathered_attention`)."""
        size = step.ranks * step.kv_elements * self.element
        kernels = self._total(gathered_operators(step, backward, self._dtype))
        if recomputing:
            self.recompute += kernels
        else:
            self.compute += kernels
        exchanged = context.collective("all_gather", size)
        exchanged += context.collective("reduce_scatter", size) if backward else 0
        self.ready += exchanged + kernels

    def _total(self, ops: Sequence[compute_pb2.OperatorDesc]) -> int:
        """The summed time of ``ops``, run one after another."""
        return sum(self._pricer.durations_ps(list(ops))) if ops else 0

    def wait(self, duration: int) -> None:
        """A collective the stream waits for, started now."""
        self.ready += duration

    def overlap(self, duration: int) -> None:
        """A collective started when the input gradient was ready, which the next node waits for too."""
        start = self.ready if self.input_grad is None else self.input_grad
        self.ready = max(self.ready, start + duration)

    def time(self) -> PassTime:
        return PassTime(self.compute, self.recompute, self.ready - self.compute - self.recompute)


def _forward(chain: _Chain, steps: Sequence[Step], tensor_bytes: int, comm: Communication, again: bool) -> None:
    """The forward chain of ``steps`` (again, for full recomputation, when ``again``)."""
    for step in steps:
        if isinstance(step, (Gemm, Pointwise, Attention)):
            chain.run(step, "forward", again)
        elif isinstance(step, Recompute):
            for inner in step.steps:
                chain.run(inner, "forward", again)
        elif isinstance(step, SequenceParallelSum):
            chain.wait(comm.tp("reduce_scatter" if step.scatter else "all_gather", step.elements * chain.element))
        elif isinstance(step, (AllToAll, RingAttention)):
            _exchange(chain, step, False, again, comm)
        elif step.in_forward:
            chain.wait(comm.tp("all_reduce", tensor_bytes))


def _backward(chain: _Chain, steps: Sequence[Step], tensor_bytes: int, comm: Communication) -> None:
    """The backward chain of ``steps``, in reverse, as the emitter writes it."""
    for step in reversed(steps):
        if isinstance(step, Gemm):
            chain.input_grad = chain.run(step, "dgrad", False)
            (chain.weights if step.weights and chain.weights is not None else chain).run(step, "wgrad", False)
        elif isinstance(step, (Pointwise, Attention)):
            chain.run(step, "backward", False)
        elif isinstance(step, Recompute):
            for inner in step.steps:
                chain.run(inner, "forward", True)
            _backward(chain, step.steps, tensor_bytes, comm)
        elif isinstance(step, SequenceParallelSum):
            size = step.elements * chain.element
            if step.scatter:  # all-gather of the output gradient: the stream waits
                chain.wait(comm.tp("all_gather", size))
            else:  # reduce-scatter of the input gradient, overlapping the weight-gradient GEMM
                chain.overlap(comm.tp("reduce_scatter", size))
        elif isinstance(step, (AllToAll, RingAttention)):
            _exchange(chain, step, True, False, comm)
        elif not step.in_forward:
            chain.overlap(comm.tp("all_reduce", tensor_bytes))


def _exchange(chain: _Chain, step: AllToAll | RingAttention, backward: bool, again: bool, comm: Communication) -> None:
    """An all-to-all the stream waits for (a mixture of experts' over the EP group, or Ulysses' over the CP group),
    or ring attention's core."""
    if isinstance(step, AllToAll) and step.group == "ep":
        if comm.experts is not None:
            chain.wait(comm.experts(step.elements * chain.element))
        return
    context = comm.context
    if context is None:
        return  # a CP group of one: the emitter adds no all-to-all
    if isinstance(step, GatheredAttention):
        chain.gathered(step, backward, again, context)
    elif isinstance(step, RingAttention):
        chain.ring(step, backward, again, context)
    else:
        chain.wait(context.collective("all_to_all", step.elements * chain.element))


def block_times(
    steps: Sequence[Step],
    recompute: bool,
    pricer: OperatorPricer,
    dtype: operators.DType,
    gemm_dtype: operators.DType | None,
    tensor_bytes: int,
    comm: Communication,
    split: bool = False,
) -> BlockTimes:
    """The forward and backward passes of a block of ``steps`` (re-running its forward first, if ``recompute``);
    ``tensor_bytes`` is a TP all-reduce's buffer, ``comm`` the groups' communication. With ``split``, the weighted
    GEMMs' weight gradients run apart, in a weight pass (zero-bubble W)."""
    forward = _Chain(pricer, dtype, gemm_dtype)
    _forward(forward, steps, tensor_bytes, comm, False)
    weights = _Chain(pricer, dtype, gemm_dtype) if split else None
    backward = _Chain(pricer, dtype, gemm_dtype, weights)
    if recompute:
        _forward(backward, steps, tensor_bytes, comm, True)
        backward.input_grad = None
    _backward(backward, steps, tensor_bytes, comm)
    return BlockTimes(forward.time(), backward.time(), PassTime() if weights is None else weights.time())


@dataclass(frozen=True)
class ZeroThree:
    """ZeRO-3's work around one block's passes, in ps: the all-gather of its parameters and the reduce-scatter of
    its gradients over the DP group, the cast of the rank's parameter shard before each gather and the
    accumulation of its gradient shard after each scatter (0 without shard casts); with HSDP, ``replica`` the
    all-reduce of the gradient shard across the replicas where it queues before the next gather (it shares a
    network dimension with the shard group, whose collectives the NPU runs one at a time), else 0."""

    gather: int
    scatter: int
    cast: int = 0
    accumulate: int = 0
    replica: int = 0


def with_zero3(times: BlockTimes, zero: ZeroThree) -> BlockTimes:
    """``times`` with ZeRO-3's per-block work as the emitter orders it. Forward, a block's gather is issued as the
    block before it starts, so it hides behind that block (taken as long as this one): the stream waits for the
    cast and ``max(0, gather - pass)``. Backward, collectives on the DP communicator run in program order, and a
    block's reduce-scatter is issued when its pass ends, before the next block's gather: that gather waits for it,
    so the stream waits for the cast, the gather, the scatter, the accumulation and any queued HSDP all-reduce of
    every block."""
    forward, backward = times.forward, times.backward
    waited_forward = zero.cast + max(0, zero.gather - forward.total)
    waited_backward = zero.cast + zero.gather + zero.scatter + zero.accumulate + zero.replica
    return BlockTimes(
        PassTime(forward.compute, forward.recompute, forward.comm, forward.data_parallel + waited_forward),
        PassTime(backward.compute, backward.recompute, backward.comm, backward.data_parallel + waited_backward),
        times.weight,
    )
