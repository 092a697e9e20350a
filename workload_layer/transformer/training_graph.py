"""The emission of one NPU's execution graph for one transformer training iteration.

A pipeline stage holds one or more model chunks, each a run of blocks of steps
(:mod:`stratasim.workload_layer.transformer.steps`: GEMMs, pointwise operators, Megatron's tensor-parallel reductions
with or without sequence parallelism, expert-parallel all-to-alls and selectively recomputed steps);
:func:`build_graph` runs them forward and backward per (chunk, micro-batch) in the order
:func:`stratasim.workload_layer.transformer.pipeline_schedule.pipeline_order` gives, as one chain of dependencies
(the compute stream of an NPU is serial), with point-to-point transfers between neighbouring chunks and the
data-parallel gradient collectives (:mod:`stratasim.workload_layer.transformer.gradient_sync`: buckets reduced as
the last backward passes produce them, or ZeRO-3's per-block gathers and reduce-scatters, HSDP's all-reduces).
Blocks also say how much activation memory they hold, so the graph's nodes allocate and free it along the timeline
(``memory_bytes``). What the blocks hold (the model) is decided by :mod:`stratasim.workload_layer.transformer.workload`
and the NPU's groups by :class:`~stratasim.workload_layer.transformer.stage_plan.StagePlan`; this module knows only
how to run them.

The model's chunks are numbered along the model, ``g = chunk * stages + stage``: stage ``p`` holds chunks ``p``,
``p + pp``, ``p + 2 pp``... A forward pass of chunk ``g`` receives its input from chunk ``g - 1`` and sends its
output to ``g + 1`` (the last stage hands chunk ``c`` on to stage 0's chunk ``c + 1``); backward passes go the other
way.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from stratasim.kernel import operators
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.gradient_sync import GradientSync
from stratasim.workload_layer.transformer.optimizer import optimizer_step
from stratasim.workload_layer.transformer.pipeline_schedule import Pass, message_tag
from stratasim.workload_layer.transformer.ring_attention import RingEmitter, gathered_attention, ring_attention
from stratasim.workload_layer.transformer.schedule_passes import WEIGHT_PASSES, OverlappedPass
from stratasim.workload_layer.transformer.stage_plan import StagePlan
from stratasim.workload_layer.transformer.step_operators import Role, step_operator
from stratasim.workload_layer.transformer.steps import (
    AllToAll,
    Attention,
    Block,
    GatheredAttention,
    Gemm,
    Pointwise,
    Recompute,
    RingAttention,
    SequenceParallelSum,
)

__all__ = ["build_graph"]


def build_graph(plan: StagePlan) -> workload_pb2.ExecutionGraph:
    """The execution graph of ``plan.npu`` for one training iteration."""
    return _Emitter(plan).build()


class _Emitter:
    """Appends nodes in program order; ``_ready`` is what the next compute node must wait for. The gradient
    collectives are :class:`~stratasim.workload_layer.transformer.gradient_sync.GradientSync`'s."""

    def __init__(self, plan: StagePlan) -> None:
        self._plan = plan
        self._graph = workload_pb2.ExecutionGraph(npu=plan.npu, resident_bytes=plan.resident_bytes)
        self._nodes = self._graph.nodes  # where nodes go: the graph's own list, or the block being built
        self._blocks: dict[tuple[object, ...], int] = {}  # what a pass of a block runs -> its GraphBlock's index
        self._block_of: dict[tuple[object, ...], int] = {}  # the same by block object, spared hashing its steps
        self._runs_something: list[bool] = []  # per GraphBlock, whether it holds any node
        self._neighbours: dict[tuple[int, int], tuple[int, int] | None] = {}
        self._ready: list[int] = []
        self._input_grad: int | None = None
        self._last_backward = {step.chunk: step for step in plan.order if step.direction in WEIGHT_PASSES}
        self._weights_apart = False  # emitting an input pass: weight-gradient GEMMs wait for its weight pass
        self._sync = GradientSync(plan, self._add, self._side_compute)
        self._operators: dict[tuple[Gemm | Pointwise | Attention, str], bytes] = {}

    def build(self) -> workload_pb2.ExecutionGraph:
        previous_start = self._ready
        for step in self._plan.order:
            start, previous_end = self._ready, self._ready
            if isinstance(step, OverlappedPass):  # alongside the pass before: wait only for what that pass waited for
                self._ready = previous_start
            if step.direction == "forward":
                self._forward(step)
            elif step.direction == "weight":
                self._weight(step)
            else:
                self._backward(step)
            if isinstance(step, OverlappedPass):
                self._ready = [*previous_end, *(n for n in self._ready if n not in previous_end)]
            previous_start = start
        self._sync.reduce_gradients(self._ready)
        self._sync.mirror_gradients(self._ready)
        self._optimizer_step()
        return self._graph

    def _forward(self, step: Pass) -> None:
        gather = self._receive(step)
        for block in self._plan.chunks[step.chunk]:
            self._ready = self._sync.gather_parameters(block, f"mb{step.micro_batch} {block.name} fwd", self._ready)
            key = ("forward", block.steps, block.kept_bytes, gather)
            self._run_block(step, block, key, partial(self._emit_forward, block, gather))
            gather = False
        self._gather_received(gather, step)
        self._send(step)

    def _emit_forward(self, block: Block, gather: bool) -> None:
        """A forward pass of ``block`` (after gathering its input, if ``gather``), which holds its activations
        from its first node on."""
        self._gather_input(gather, "fwd recv tp all-gather")
        first = len(self._nodes)
        self._run_forward(block, "fwd")
        self._allocate(first, block.kept_bytes)

    def _backward(self, step: Pass) -> None:
        gather = self._receive(step)
        for block in reversed(self._plan.chunks[step.chunk]):
            self._ready = self._sync.gather_parameters(block, f"mb{step.micro_batch} {block.name} bwd", self._ready)
            key = (step.direction, block.steps, block.kept_bytes, block.recompute, block.recomputed_bytes, gather)
            self._run_block(step, block, key, partial(self._emit_backward, block, gather, step.direction == "input"))
            gather = False
            if step.direction == "backward":
                self._weights_done(step, block, "bwd")
        self._gather_received(gather, step)
        self._send(step)

    def _weights_done(self, step: Pass, block: Block, label: str) -> None:
        """``step`` has computed ``block``'s weight gradients: ZeRO-3 reduce-scatters them; after the chunk's last
        such pass they go to the DP bucket."""
        self._sync.scatter_gradients(block, f"mb{step.micro_batch} {block.name} {label}", self._ready)
        if step == self._last_backward[step.chunk]:
            self._sync.gradients_ready(block, self._ready)

    def _weight(self, step: Pass) -> None:
        """A weight pass (zero-bubble W): each block's weight-gradient GEMMs, in backward order; nothing is
        received or sent."""
        for block in reversed(self._plan.chunks[step.chunk]):
            self._run_block(step, block, ("weight", block.steps, block.weight_bytes), partial(self._emit_weight, block))
            self._weights_done(step, block, "wgt")

    def _emit_weight(self, block: Block) -> None:
        """``block``'s weight-gradient GEMMs, freeing at the last what its input pass left them."""
        for step in reversed(block.steps):
            inner = step.steps if isinstance(step, Recompute) else (step,)
            for gemm in reversed(inner):
                if isinstance(gemm, Gemm) and gemm.weights:
                    self._compute(f"wgt {gemm.name} wgrad", self._operator(gemm, "wgrad"), self._ready)
        if self._nodes:
            self._nodes[-1].memory_bytes -= block.weight_bytes

    def _emit_backward(self, block: Block, gather: bool, input_only: bool = False) -> None:
        """A backward pass of ``block`` (after gathering its output gradient, if ``gather``; its forward again
        first under full recomputation), freeing what the forward passes left it at its last node; with
        ``input_only``, its input-gradient half (zero-bubble B), which leaves ``weight_bytes`` to the weight pass."""
        self._weights_apart = input_only
        self._gather_input(gather, "bwd recv tp all-gather")
        held = block.kept_bytes
        if block.recompute:
            first = len(self._nodes)
            self._run_forward(block, "recompute")
            self._allocate(first, block.recomputed_bytes)
            held += block.recomputed_bytes
        self._run_backward(block, "bwd")
        self._nodes[-1].memory_bytes -= held - (block.weight_bytes if input_only else 0)
        self._weights_apart = False

    def _run_block(self, step: Pass, block: Block, key: tuple[object, ...], emit: Callable[[], None]) -> None:
        """Run ``step``'s pass of ``block`` as a BLOCK_NODE named ``mb<micro-batch> <block>``. ``emit`` writes the
        pass's nodes once per distinct ``key`` (what decides them: identical layers share it), into a GraphBlock
        that every later pass with that key runs again; node names there lack the prefix the block node carries."""
        by_identity = (id(block), key[0], key[-1])  # the block object, the pass and whether it gathers
        index = self._block_of.get(by_identity)
        if index is None:
            index = self._block_of[by_identity] = self._blocks.get(key, len(self._graph.blocks))
            if index == len(self._graph.blocks):
                self._new_block(step, block, key, emit)
        if self._runs_something[index]:  # a pass with nothing to run leaves no trace
            node_id = len(self._nodes)
            name = f"mb{step.micro_batch} {block.name}"
            self._nodes.add(id=node_id, name=name, type=workload_pb2.BLOCK_NODE, data_deps=self._ready, block=index)
            self._ready = [node_id]

    def _new_block(self, step: Pass, block: Block, key: tuple[object, ...], emit: Callable[[], None]) -> None:
        """Write the GraphBlock that passes with ``key`` run: ``emit``'s nodes, ``step``'s pass of ``block``."""
        self._blocks[key] = len(self._graph.blocks)
        graph_block = self._graph.blocks.add(name=f"{block.name} {step.direction}")
        outer_ready, self._ready = self._ready, []
        self._nodes, self._input_grad = graph_block.nodes, None
        emit()
        sinks = set(range(len(graph_block.nodes))) - {d for node in graph_block.nodes for d in node.data_deps}
        assert sinks == set(self._ready), "a pass must end in the nodes that nothing in it waits for"
        self._nodes, self._ready, self._input_grad = self._graph.nodes, outer_ready, None
        self._runs_something.append(bool(graph_block.nodes))

    def _allocate(self, first: int, size: int) -> None:
        """Make the node at index ``first`` of the list being built (a pass's first, when it emitted any)
        allocate ``size`` bytes."""
        if first < len(self._nodes):
            self._nodes[first].memory_bytes += size

    def _optimizer_step(self) -> None:
        """The optimizer step over this NPU's parameters, once compute is done and every gradient collective of
        the iteration has finished. The updated parameters' all-gather of ZeRO stages 1 and 2 stays issued after
        each bucket's reduce-scatter: it stands for Megatron-LM's overlap of that gather with the next
        iteration's forward pass."""
        if self._plan.optimizer_parameters:
            op = optimizer_step(self._plan.optimizer_parameters, self._plan.dtype).SerializeToString()
            self._compute("optimizer step", op, [*self._ready, *self._sync.reductions])

    def _run_forward(self, block: Block, prefix: str) -> None:
        for step in block.steps:
            if isinstance(step, (Gemm, Pointwise, Attention)):
                self._compute_forward(step, prefix)
            elif isinstance(step, Recompute):
                for inner in step.steps:
                    self._compute_forward(inner, prefix)
            elif isinstance(step, SequenceParallelSum):
                self._sequence_parallel(step, prefix, backward=False)
            elif isinstance(step, AllToAll):
                self._all_to_all(step, prefix)
            elif isinstance(step, RingAttention):
                self._ring_attention(step, prefix, backward=False)
            elif step.in_forward and len(self._plan.tensor_group) > 1:
                self._ready = [self._all_reduce(f"{prefix} tp all-reduce", self._ready)]

    def _run_backward(self, block: Block, prefix: str) -> None:
        for step in reversed(block.steps):
            if isinstance(step, (Gemm, Pointwise, Attention)):
                self._compute_backward(step, prefix)
            elif isinstance(step, Recompute):
                self._recompute(step, prefix)
            elif isinstance(step, SequenceParallelSum):
                self._sequence_parallel(step, prefix, backward=True)
            elif isinstance(step, AllToAll):
                self._all_to_all(step, prefix)
            elif isinstance(step, RingAttention):
                self._ring_attention(step, prefix, backward=True)
            elif not step.in_forward and len(self._plan.tensor_group) > 1:
                # The input gradient's all-reduce overlaps the weight-gradient GEMM, as in Megatron-LM.
                after = self._ready if self._input_grad is None else [self._input_grad]
                self._ready = [*self._ready, self._all_reduce(f"{prefix} tp all-reduce", after)]

    def _compute_forward(self, step: Gemm | Pointwise | Attention, prefix: str) -> None:
        """``step``'s forward operator, after whatever the compute stream waits for."""
        self._compute(f"{prefix} {step.name}", self._operator(step, "forward"), self._ready)

    def _compute_backward(self, step: Gemm | Pointwise | Attention, prefix: str) -> None:
        """``step``'s backward operators: a GEMM's input- then weight-gradient GEMMs (a GEMM with weights only its
        input gradient in an input pass), a pointwise operator once more reading the output gradient, a fused
        attention's backward kernel."""
        if isinstance(step, (Pointwise, Attention)):
            self._compute(f"{prefix} {step.name}", self._operator(step, "backward"), self._ready)
            return
        name = f"{prefix} {step.name}"
        self._input_grad = self._compute(f"{name} dgrad", self._operator(step, "dgrad"), self._ready)
        if not (self._weights_apart and step.weights):
            self._compute(f"{name} wgrad", self._operator(step, "wgrad"), [self._input_grad])

    def _operator(self, step: Gemm | Pointwise | Attention, role: Role) -> bytes:
        """The operator ``step`` runs in ``role`` (:func:`~stratasim.workload_layer.transformer.step_operators.step_operator`),
        described once and reused by every micro-batch: serialized, as parsing it into a node is cheaper than
        copying a message in."""
        known = self._operators.get((step, role))
        if known is None:
            desc = step_operator(step, role, self._plan.dtype, self._plan.gemm_dtype)
            known = self._operators[(step, role)] = desc.SerializeToString()
        return known

    def _recompute(self, step: Recompute, prefix: str) -> None:
        """Selective recomputation: ``step``'s forward operators again, then their backward operators; the
        recomputed activations are held from the first recomputed operator to the last backward one."""
        first = len(self._nodes)
        for inner in step.steps:
            self._compute_forward(inner, f"{prefix} recompute")
        self._allocate(first, step.held_bytes)
        for inner in reversed(step.steps):
            self._compute_backward(inner, prefix)
        self._nodes[-1].memory_bytes -= step.held_bytes

    def _sequence_parallel(self, step: SequenceParallelSum, prefix: str, backward: bool) -> None:
        """``step``'s reduce-scatter or all-gather over the TP group for the pass at hand. The compute stream waits
        for it, except for a backward reduce-scatter of an input gradient, which overlaps the weight-gradient GEMM
        as the TP all-reduce does."""
        group = self._plan.tensor_group
        if len(group) < 2:
            return
        reduce = step.scatter != backward
        kind = workload_pb2.REDUCE_SCATTER if reduce else workload_pb2.ALL_GATHER
        label = "reduce-scatter" if reduce else "all-gather"
        size = step.elements * operators.dtype_bytes(self._plan.dtype)
        input_grad = self._input_grad if backward and reduce else None
        after = self._ready if input_grad is None else [input_grad]
        node = self._add(
            f"{prefix} tp {label}",
            workload_pb2.COMM_COLL_NODE,
            after,
            comm_type=kind,
            comm_bytes=size,
            group=group,
            pg_name="tp",
        )
        self._ready = [node] if input_grad is None else [*self._ready, node]

    def _all_to_all(self, step: AllToAll, prefix: str) -> None:
        """``step``'s all-to-all over the expert-parallel or the context-parallel group; the compute stream waits
        for it."""
        group = self._plan.expert_group if step.group == "ep" else self._plan.ulysses_group
        if len(group) > 1:
            size = step.elements * operators.dtype_bytes(self._plan.dtype)
            self._ready = [
                self._add(
                    f"{prefix} {step.name} all-to-all",
                    workload_pb2.COMM_COLL_NODE,
                    self._ready,
                    comm_type=workload_pb2.ALL_TO_ALL,
                    comm_bytes=size,
                    group=group,
                    pg_name=step.group,
                )
            ]

    def _ring_attention(self, step: RingAttention, prefix: str, backward: bool) -> None:
        """``step``'s context-parallel attention over the CP group: ring attention
        (:func:`~stratasim.workload_layer.transformer.ring_attention.ring_attention`) or, for a
        :class:`GatheredAttention`, TE's all-gather variant; the compute stream waits for what its end needs."""
        emit = RingEmitter(self._plan.npu, self._plan.ring_group, self._plan.dtype, self._add, self._compute)
        if isinstance(step, GatheredAttention):
            self._ready = gathered_attention(emit, step, prefix, self._ready, backward)
        else:
            self._ready = ring_attention(emit, step, prefix, self._ready, backward)

    def _compute(self, name: str, op: bytes, deps: list[int]) -> int:
        """A compute node running the serialized operator ``op`` after ``deps``; the stream waits for it next."""
        self._ready = [self._side_compute(name, op, deps)]
        return self._ready[0]

    def _side_compute(self, name: str, op: bytes, deps: list[int]) -> int:
        """A compute node running the serialized operator ``op`` after ``deps``, off the chain the stream waits
        for: it takes the NPU's compute stream when ready, between the chain's nodes."""
        node = len(self._nodes)
        self._nodes.add(id=node, name=name, type=workload_pb2.COMP_NODE, data_deps=deps).op.MergeFromString(op)
        return node

    def _all_reduce(self, name: str, deps: list[int]) -> int:
        return self._add(
            name,
            workload_pb2.COMM_COLL_NODE,
            deps,
            comm_type=workload_pb2.ALL_REDUCE,
            comm_bytes=self._plan.tensor_bytes,
            group=self._plan.tensor_group,
            pg_name="tp",
        )

    def _receive(self, step: Pass) -> bool:
        """Wait for ``step``'s input: the previous chunk's activation (forward) or the next one's gradient; say
        whether the pass's first block must all-gather it over the TP group first (Megatron-LM's scatter/gather:
        inside the block, which then runs whole; before ZeRO-3's parameter gathers, outside)."""
        neighbour = self._neighbour(step.chunk, -1 if step.direction == "forward" else 1)
        if neighbour is None:
            return False
        peer, sender_chunk = neighbour
        tag = message_tag(step.direction, sender_chunk, step.micro_batch, len(self._plan.chunks))
        name = f"mb{step.micro_batch} chunk{step.chunk} recv {step.direction}"
        self._ready = [self._point_to_point(name, workload_pb2.COMM_RECV_NODE, peer, tag)]
        gather = self._plan.gather_boundary and len(self._plan.tensor_group) > 1
        if gather and self._plan.zero == 3:
            self._gather_input(True, f"{name} tp all-gather")
            return False
        return gather

    def _gather_received(self, gather: bool, step: Pass) -> None:
        """:meth:`_gather_input` of ``step``'s received boundary tensor, if ``gather`` (named after the receive)."""
        if gather:
            self._gather_input(True, f"mb{step.micro_batch} chunk{step.chunk} recv {step.direction} tp all-gather")

    def _gather_input(self, gather: bool, name: str) -> None:
        """All-gather a received boundary tensor over the TP group, if ``gather``; the stream waits for it."""
        if gather:
            self._ready = [
                self._add(
                    name,
                    workload_pb2.COMM_COLL_NODE,
                    self._ready,
                    comm_type=workload_pb2.ALL_GATHER,
                    comm_bytes=self._plan.tensor_bytes,
                    group=self._plan.tensor_group,
                    pg_name="pp",
                )
            ]

    def _neighbour(self, chunk: int, offset: int) -> tuple[int, int] | None:
        """:meth:`StagePlan.neighbour`, worked out once per chunk and direction."""
        key = (chunk, offset)
        if key not in self._neighbours:
            self._neighbours[key] = self._plan.neighbour(chunk, offset)
        return self._neighbours[key]

    def _send(self, step: Pass) -> None:
        """Pass ``step``'s output on; sends are asynchronous: the compute stream goes on while it travels."""
        neighbour = self._neighbour(step.chunk, 1 if step.direction == "forward" else -1)
        if neighbour is not None:
            tag = message_tag(step.direction, step.chunk, step.micro_batch, len(self._plan.chunks))
            name = f"mb{step.micro_batch} chunk{step.chunk} send {step.direction}"
            self._point_to_point(name, workload_pb2.COMM_SEND_NODE, neighbour[0], tag)

    def _point_to_point(self, name: str, kind: workload_pb2.NodeType.ValueType, peer: int, tag: int) -> int:
        """A pipeline send or receive of a boundary tensor, after whatever the compute stream waits for: one per
        pass, so written without :meth:`_add`'s keyword bag."""
        node_id = len(self._nodes)
        self._nodes.add(
            id=node_id,
            name=name,
            type=kind,
            data_deps=self._ready,
            peer=peer,
            tag=tag,
            comm_bytes=self._plan.boundary_bytes,
            pg_name="pp",
        )
        return node_id

    def _add(self, name: str, kind: workload_pb2.NodeType.ValueType, deps: list[int], **fields: object) -> int:
        node_id = len(self._nodes)
        self._nodes.add(id=node_id, name=name, type=kind, data_deps=deps, **fields)
        return node_id
