"""Pipeline schedules and the emission of one NPU's execution graph for one transformer training iteration.

A pipeline stage is described as :class:`Block` s of :class:`Step` s (GEMMs, pointwise operators and
Megatron's tensor-parallel reductions); :func:`build_graph` runs them forward and backward per micro-batch in the
order :func:`pipeline_order` gives, as one chain of dependencies (the compute stream of an NPU is serial), with
point-to-point transfers between neighbouring stages and a data-parallel gradient all-reduce at the end.
What the blocks hold (the model) is decided by :mod:`workload_layer.transformer`; this module knows only how to
run them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from stratasim import operators
from stratasim.v1 import compute_pb2, workload_pb2

__all__ = [
    "Gemm",
    "Pointwise",
    "TensorParallelSum",
    "Step",
    "Block",
    "Direction",
    "StagePlan",
    "pipeline_order",
    "message_tag",
    "build_graph",
]


@dataclass(frozen=True)
class Gemm:
    """A (batched) GEMM ``[batch, m, k] x [batch, k, n]`` of the forward pass.

    Its backward pass is two GEMMs of the transposed shapes with the same FLOPs: the input gradient
    ``[m, n] x [n, k]`` and the weight (or second operand) gradient ``[k, m] x [m, n]``.
    """

    name: str
    m: int
    k: int
    n: int
    batch: int = 1


@dataclass(frozen=True)
class Pointwise:
    """An element-wise operator over ``shape`` reading ``inputs`` tensors, ``flops_per_element`` each.

    Its backward pass is costed as the same operator reading one more tensor (the output gradient).
    """

    name: str
    shape: tuple[int, ...]
    flops_per_element: int
    inputs: int = 1


@dataclass(frozen=True)
class TensorParallelSum:
    """One of Megatron's conjugate tensor-parallel operators, an all-reduce over the TP group.

    ``in_forward=True`` is *g* (all-reduce in the forward pass, identity in the backward pass: after a
    row-parallel GEMM); ``in_forward=False`` is *f* (identity forward, all-reduce of the input gradient in the
    backward pass: before a column-parallel GEMM). Without tensor parallelism both are no-ops.
    """

    in_forward: bool


Step: TypeAlias = Gemm | Pointwise | TensorParallelSum
"""One operation of a block's forward pass."""


@dataclass(frozen=True)
class Block:
    """A named run of steps (a transformer layer, the embedding, the head); ``recompute`` re-runs its forward
    pass just before its backward pass (full activation recomputation)."""

    name: str
    steps: tuple[Step, ...]
    recompute: bool = False


Direction: TypeAlias = Literal["forward", "backward"]


@dataclass(frozen=True)
class StagePlan:
    """Everything one NPU's graph needs.

    ``previous_stage`` / ``next_stage`` are the NPUs (same TP rank, neighbouring pipeline stage) it receives
    activations from and sends them to (None at the ends of the pipeline); ``boundary_bytes`` is the size of one
    micro-batch's activation or gradient between stages, ``tensor_bytes`` of one TP all-reduce and
    ``gradient_bytes`` of the DP gradient all-reduce (all in bytes). Groups of one NPU emit no collective.
    """

    npu: int
    blocks: tuple[Block, ...]
    order: tuple[tuple[Direction, int], ...]
    previous_stage: int | None
    next_stage: int | None
    tensor_group: tuple[int, ...]
    data_group: tuple[int, ...]
    boundary_bytes: int
    tensor_bytes: int
    gradient_bytes: int
    dtype: operators.DType


def pipeline_order(schedule: str, stage: int, stages: int, micro_batches: int) -> tuple[tuple[Direction, int], ...]:
    """The order in which ``stage`` (of ``stages``) runs its micro-batches' forward and backward passes.

    ``gpipe``: every forward pass, then every backward pass. ``1f1b`` (PipeDream-Flush, Narayanan et al. 2021):
    ``stages - stage - 1`` warm-up forward passes, then one forward and one backward pass alternately, then the
    remaining backward passes, so at most ``stages - stage`` micro-batches' activations are live at a time.
    """
    forward: list[tuple[Direction, int]] = [("forward", i) for i in range(micro_batches)]
    backward: list[tuple[Direction, int]] = [("backward", i) for i in range(micro_batches)]
    if schedule == "gpipe":
        return (*forward, *backward)
    if schedule != "1f1b":
        raise ValueError(f"unknown pipeline schedule {schedule!r}; expected gpipe or 1f1b")
    warmup = min(stages - stage - 1, micro_batches)
    order = forward[:warmup]
    for i in range(micro_batches - warmup):
        order += [forward[warmup + i], backward[i]]
    return (*order, *backward[micro_batches - warmup :])


def message_tag(direction: Direction, micro_batch: int) -> int:
    """The tag of the point-to-point message carrying ``micro_batch``'s activation (forward) or gradient
    (backward); unique per (micro-batch, direction), and the sender's id tells the stage boundary apart."""
    return 2 * micro_batch + (direction == "backward")


def build_graph(plan: StagePlan) -> workload_pb2.ExecutionGraph:
    """The execution graph of ``plan.npu`` for one training iteration."""
    return _Emitter(plan).build()


class _Emitter:
    """Appends nodes in program order; ``_ready`` is what the next compute node must wait for."""

    def __init__(self, plan: StagePlan) -> None:
        self._plan = plan
        self._graph = workload_pb2.ExecutionGraph(npu=plan.npu)
        self._ready: list[int] = []
        self._input_grad: int | None = None

    def build(self) -> workload_pb2.ExecutionGraph:
        plan = self._plan
        for direction, micro_batch in plan.order:
            if direction == "forward":
                self._forward(micro_batch)
            else:
                self._backward(micro_batch)
        if len(plan.data_group) > 1:
            self._add(
                "dp gradient all-reduce", workload_pb2.COMM_COLL_NODE, self._ready, comm_type=workload_pb2.ALL_REDUCE,
                comm_bytes=plan.gradient_bytes, group=plan.data_group,
            )
        return self._graph

    def _forward(self, micro_batch: int) -> None:
        self._receive(self._plan.previous_stage, "forward", micro_batch)
        for block in self._plan.blocks:
            self._run_forward(block, f"mb{micro_batch} {block.name} fwd")
        self._send(self._plan.next_stage, "forward", micro_batch)

    def _backward(self, micro_batch: int) -> None:
        self._receive(self._plan.next_stage, "backward", micro_batch)
        for block in reversed(self._plan.blocks):
            if block.recompute:
                self._run_forward(block, f"mb{micro_batch} {block.name} recompute")
            self._run_backward(block, f"mb{micro_batch} {block.name} bwd")
        self._send(self._plan.previous_stage, "backward", micro_batch)

    def _run_forward(self, block: Block, prefix: str) -> None:
        dtype = self._plan.dtype
        for step in block.steps:
            if isinstance(step, Gemm):
                op = operators.gemm(step.m, step.k, step.n, dtype=dtype, batch=step.batch, name=step.name)
                self._compute(f"{prefix} {step.name}", op, self._ready)
            elif isinstance(step, Pointwise):
                self._compute(f"{prefix} {step.name}", self._pointwise(step, step.inputs), self._ready)
            elif step.in_forward and len(self._plan.tensor_group) > 1:
                self._ready = [self._all_reduce(f"{prefix} tp all-reduce", self._ready)]

    def _run_backward(self, block: Block, prefix: str) -> None:
        dtype = self._plan.dtype
        for step in reversed(block.steps):
            if isinstance(step, Gemm):
                name = f"{prefix} {step.name}"
                input_grad = operators.gemm(step.m, step.n, step.k, dtype=dtype, batch=step.batch, name=step.name)
                weight_grad = operators.gemm(step.k, step.m, step.n, dtype=dtype, batch=step.batch, name=step.name)
                self._input_grad = self._compute(f"{name} dgrad", input_grad, self._ready)
                self._compute(f"{name} wgrad", weight_grad, [self._input_grad])
            elif isinstance(step, Pointwise):
                self._compute(f"{prefix} {step.name}", self._pointwise(step, step.inputs + 1), self._ready)
            elif not step.in_forward and len(self._plan.tensor_group) > 1:
                # The input gradient's all-reduce overlaps the weight-gradient GEMM, as in Megatron-LM.
                after = self._ready if self._input_grad is None else [self._input_grad]
                self._ready = [*self._ready, self._all_reduce(f"{prefix} tp all-reduce", after)]

    def _pointwise(self, step: Pointwise, inputs: int) -> compute_pb2.OperatorDesc:
        return operators.elementwise(
            step.shape, dtype=self._plan.dtype, flops_per_element=step.flops_per_element, inputs=inputs, name=step.name
        )

    def _compute(self, name: str, op: compute_pb2.OperatorDesc, deps: list[int]) -> int:
        node = self._add(name, workload_pb2.COMP_NODE, deps, op=op)
        self._ready = [node]
        return node

    def _all_reduce(self, name: str, deps: list[int]) -> int:
        return self._add(
            name, workload_pb2.COMM_COLL_NODE, deps, comm_type=workload_pb2.ALL_REDUCE,
            comm_bytes=self._plan.tensor_bytes, group=self._plan.tensor_group,
        )

    def _receive(self, peer: int | None, direction: Direction, micro_batch: int) -> None:
        if peer is not None:
            self._ready = [
                self._add(
                    f"mb{micro_batch} recv {direction}", workload_pb2.COMM_RECV_NODE, self._ready, peer=peer,
                    tag=message_tag(direction, micro_batch), comm_bytes=self._plan.boundary_bytes,
                )
            ]

    def _send(self, peer: int | None, direction: Direction, micro_batch: int) -> None:
        # Sends are asynchronous: the compute stream goes on while the message travels.
        if peer is not None:
            self._add(
                f"mb{micro_batch} send {direction}", workload_pb2.COMM_SEND_NODE, self._ready, peer=peer,
                tag=message_tag(direction, micro_batch), comm_bytes=self._plan.boundary_bytes,
            )

    def _add(self, name: str, kind: workload_pb2.NodeType.ValueType, deps: list[int], **fields: object) -> int:
        node_id = len(self._graph.nodes)
        self._graph.nodes.add(id=node_id, name=name, type=kind, data_deps=deps, **fields)
        return node_id
