"""A transformer trace's pipeline cut moved: each data-parallel replica's and TP rank's passes gathered from the
stages they were recorded on, layer by layer, and dealt out again to a new number of stages or a new schedule, by
``stratasim trace reshard --pp`` and ``--schedule``.

What it reads from the trace: the transformer builder's node names, ``mb<i> <block> fwd|bwd|wgt <step>`` with
``<block>`` ``embedding``, ``layer<j>`` or ``head``: one micro-batch's pass through one block (``wgt``: the weight
pass a zero-bubble schedule ran apart), its nodes and their dependencies kept as recorded. The recorded
point-to-point transfers are dropped; every collective inside a block must run over the TP group (it is
regrouped); outside the blocks only the DP gradient all-reduces and the optimizer step may stand.

What it writes, per new stage of ``pp`` holding ``chunks`` model chunks (the interleaved schedule's virtual
stages; one otherwise): the model cut into ``pp * chunks`` chunks of ``layers / (pp * chunks)`` whole layers (they
must divide evenly: the builder's ``stage_layers: even``), the embedding in the first, the head in the last, stage
``p``'s chunk ``c`` the model's chunk ``c pp + p``; the passes in the order of the schedule (1F1B, GPipe,
interleaved or ZB-H1: :func:`~stratasim.workload_layer.transformer.pipeline_schedule.pipeline_order`, as the
transformer builder runs them), a receive before each pass that needs one and a send after each pass that feeds a
neighbour, of the boundary activation (the size of the layers' residual add: tokens x hidden, split over TP under
sequence parallelism). ZB-H1's input pass is the recorded backward pass without the weight-gradient GEMMs (a
dependency on one passes to what it waited for), its weight pass those GEMMs, one after another.

Then one DP gradient all-reduce and the optimizer step, both scaled to the stage's share of the weights. That
share is counted from the weight-gradient GEMMs of its blocks at their bytes per element, the embedding table
counted as large as the LM head (a copy of a tied table on the last stage, as Megatron-LM keeps one), and what
those GEMMs do not count (positions, norms) spread in proportion: an approximation of the DP payload and the
optimizer step, not of any other compute). Gradient buckets overlapping the backward passes become one all-reduce
at the end (ZeRO, whose collectives are per layer, and expert parallelism are refused).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.operators import dtype_bytes
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.traces.rescale import Plan
from stratasim.workload_layer.transformer.pipeline_schedule import (
    Pass,
    chunk_positions,
    message_tag,
    neighbour_chunk,
    pipeline_order,
)

__all__ = ["Gather", "GatheredModel", "Key", "Schedule", "recut"]

_PASS = re.compile(r"mb(\d+) (embedding|layer(\d+)|head) (fwd|bwd|wgt) ")
_SHARED_MEMORY = ("weights", "gradients", "optimizer")

Key = tuple[int, str, str]
"""A pass of one micro-batch through one block: (micro-batch, block, ``fwd``, ``bwd`` or ``wgt``)."""


@dataclass
class GatheredModel:
    """One TP rank's and replica's passes, gathered from every recorded stage: the nodes of each pass by key, the
    weights of each block (elements) at ``element_bytes`` each, the DP gradient bytes, the optimizer step, resident
    memory and the boundary activation's bytes."""

    passes: dict[Key, list[workload_pb2.Node]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    dp_bytes: int = 0
    element_bytes: int = 0
    optimizer: compute_pb2.OperatorDesc | None = None
    resident: dict[str, int] = field(default_factory=dict)
    boundary: int = 0
    tail: list[workload_pb2.Node] = field(default_factory=list)
    """Work after the last pass that every stage runs its share of (a PyTorch trace's optimizer step)."""


Gather = Callable[[Sequence[workload_pb2.ExecutionGraph], Plan, Sequence[str]], "GatheredModel"]
"""Reads one TP rank's and replica's passes from its recorded stage graphs (their files named by the sources)."""


def _gather(graphs: Sequence[workload_pb2.ExecutionGraph], plan: Plan, sources: Sequence[str]) -> GatheredModel:
    """The passes, weights, DP payload and optimizer of the stage graphs ``graphs`` (one per recorded stage)."""
    model = GatheredModel()
    for graph, source in zip(graphs, sources, strict=True):
        tp_group, dp_group = plan.layout.group(graph.npu, "tp"), plan.layout.group(graph.npu, "dp")
        for kind, size in graph.resident_bytes.items():
            model.resident[kind] = model.resident.get(kind, 0) + size if kind in _SHARED_MEMORY else size
        for node in graph.nodes:
            where = f"{source}: node {node.id}"
            group = tuple(sorted(node.group)) or tuple(range(plan.npus))
            found = _PASS.match(node.name)
            if node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
                continue
            if found is not None and (node.type != workload_pb2.COMM_COLL_NODE or group == tp_group):
                key = (int(found[1]), found[2], found[4])
                model.passes.setdefault(key, []).append(node)
                _count(model, key, node)
            elif (
                node.type == workload_pb2.COMM_COLL_NODE
                and group == dp_group
                and node.comm_type == workload_pb2.ALL_REDUCE
            ):
                model.dp_bytes += node.comm_bytes
            elif node.HasField("op") and node.op.elementwise.function == compute_pb2.OPTIMIZER:
                model.optimizer = _merged(model.optimizer, node.op)
            else:
                raise WorkloadError(
                    f"{where}: not a pass of a micro-batch through a layer (mb<i> layer<j> fwd|bwd ...) with its TP "
                    "collectives, a DP gradient all-reduce or the optimizer step, so the pipeline cannot be re-cut"
                )
    return model


def _count(model: GatheredModel, key: Key, node: workload_pb2.Node) -> None:
    """Add ``node``'s weights (a weight-gradient GEMM's [K, M] x [M, N]: K x N), their bytes per element and the
    boundary size to ``model``."""
    op = node.op
    if key[0] == 0 and node.name.endswith(" wgrad") and op.WhichOneof("shape") == "gemm":
        gemm, batch = op.gemm, op.gemm.batch or 1
        model.weights[key[1]] = model.weights.get(key[1], 0) + gemm.m * gemm.n * batch
        model.element_bytes = model.element_bytes or op.bytes // (
            batch * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n)
        )
    if not model.boundary and key[1].startswith("layer") and op.name == "residual" and op.HasField("elementwise"):
        model.boundary = op.elementwise.elements * dtype_bytes(op.dtype)


def _share(model: GatheredModel, blocks: Sequence[str]) -> Fraction:
    """The fraction of the model's gradient bytes ``blocks`` hold: their weights (the embedding table counted as
    large as the LM head, whether tied or not) at the GEMMs' bytes per element, plus their share of what the
    weight-gradient GEMMs do not account for (positions, norms, biases) when the recorded total exceeds them."""
    weights = {**model.weights, "embedding": model.weights.get("head", 0)}
    counted = sum(weights.values())
    total = model.resident.get("gradients") or model.dp_bytes
    if not counted or not total:
        return Fraction(0)
    mine = sum(weights.get(block, 0) for block in blocks)
    rest = max(total - model.element_bytes * counted, 0)
    return Fraction(model.element_bytes * mine, total) + Fraction(rest * mine, total * counted)


def _portion(op: compute_pb2.OperatorDesc, share: Fraction) -> compute_pb2.OperatorDesc:
    """The element-wise ``op`` (the optimizer step) over ``share`` of its elements (one at least)."""
    out = compute_pb2.OperatorDesc()
    out.CopyFrom(op)
    elements = max(int(op.elementwise.elements * share), 1)
    out.elementwise.elements = elements
    out.flops = op.flops // op.elementwise.elements * elements
    out.bytes = op.bytes // op.elementwise.elements * elements
    return out


def _weight_fraction(model: GatheredModel, blocks: Sequence[str]) -> Fraction:
    """The fraction of the model's counted weights ``blocks`` hold (the embedding table counted as large as the LM
    head)."""
    weights = {**model.weights, "embedding": model.weights.get("head", 0)}
    counted = sum(weights.values())
    return Fraction(sum(weights.get(block, 0) for block in blocks), counted) if counted else Fraction(0)


def _merged(total: compute_pb2.OperatorDesc | None, op: compute_pb2.OperatorDesc) -> compute_pb2.OperatorDesc:
    """The optimizer step over the parameters of ``total`` and ``op`` both."""
    if total is None:
        merged = compute_pb2.OperatorDesc()
        merged.CopyFrom(op)
        return merged
    for name in ("flops", "bytes"):
        setattr(total, name, getattr(total, name) + getattr(op, name))
    total.elementwise.elements += op.elementwise.elements
    return total


@dataclass(frozen=True)
class Schedule:
    """The new pipeline's schedule: ``name`` (``1f1b``, ``gpipe``, ``interleaved`` or ``zb_h1``) and the model
    chunks each stage holds (``chunks``, above 1 under ``interleaved`` only)."""

    name: str = "1f1b"
    chunks: int = 1


@dataclass(frozen=True)
class _Cut:
    """Where the blocks go under a schedule and in what order a stage runs its passes."""

    schedule: Schedule
    stages: int
    layers: int
    micro_batches: int

    def order(self, stage: int) -> tuple[Pass, ...]:
        """``stage``'s passes (:func:`pipeline_order`)."""
        return pipeline_order(self.schedule.name, stage, self.stages, self.micro_batches, self.schedule.chunks)

    def blocks(self, stage: int) -> list[list[str]]:
        """The blocks of each model chunk ``stage`` holds, in model order."""
        total = self.stages * self.schedule.chunks
        per = self.layers // total
        out = []
        for position in chunk_positions("loop", stage, self.stages, self.schedule.chunks):
            blocks = [f"layer{j}" for j in range(position * per, (position + 1) * per)]
            out.append(["embedding"] * (position == 0) + blocks + ["head"] * (position == total - 1))
        return out


@dataclass
class _Emitter:
    """Writes one new stage's graph: nodes renumbered in order, each pass chained after the previous one."""

    graph: workload_pb2.ExecutionGraph
    ready: list[int] = field(default_factory=list)

    def add(self, node: workload_pb2.Node, after: Sequence[int] | None = None) -> int:
        node.id = len(self.graph.nodes)
        node.ClearField("data_deps")
        node.data_deps.extend(self.ready if after is None else after)
        self.graph.nodes.append(node)
        return node.id

    def run_pass(self, nodes: Sequence[workload_pb2.Node], tp_group: Sequence[int]) -> None:
        """Copy one block's pass: dependencies inside it kept, those outside it (or none) on the ready nodes."""
        ids: dict[int, int] = {}
        depended: set[int] = set()
        for node in nodes:
            copy = workload_pb2.Node()
            copy.CopyFrom(node)
            inside = [ids[dep] for dep in node.data_deps if dep in ids]
            ctrl = [ids[dep] for dep in node.ctrl_deps if dep in ids]
            copy.ClearField("ctrl_deps")
            copy.ctrl_deps.extend(ctrl)
            if copy.type == workload_pb2.COMM_COLL_NODE:
                copy.ClearField("group")
                copy.group.extend(tp_group)
                copy.pg_name = ""
            ids[node.id] = self.add(copy, inside if inside or ctrl else None)
            depended.update(inside + ctrl)
        self.ready = [new for new in ids.values() if new not in depended]


def _transfer(
    kind: workload_pb2.NodeType.ValueType, npu: int, new: Plan, step: Pass, chunks: int, size: int
) -> workload_pb2.Node | None:
    """The send or receive of ``size`` bytes around ``step`` on ``npu`` to or from the neighbouring model chunk
    (None at either end of the model, or when the neighbour sits on the same stage)."""
    receive = kind == workload_pb2.COMM_RECV_NODE
    offset = (-1 if step.direction == "forward" else 1) * (1 if receive else -1)
    stage = new.layout.rank(npu, "pp")
    neighbour = neighbour_chunk("loop", stage, step.chunk, new.pp, chunks, offset)
    if neighbour is None or neighbour[0] == stage:
        return None
    peer = new.layout.npu({**{axis: new.layout.rank(npu, axis) for axis in new.order}, "pp": neighbour[0]})
    tag = message_tag(step.direction, neighbour[1] if receive else step.chunk, step.micro_batch, chunks)
    name = f"mb{step.micro_batch} chunk{step.chunk} {'recv' if receive else 'send'} {step.direction}"
    return workload_pb2.Node(name=name, type=kind, peer=peer, tag=tag, comm_bytes=size, pg_name="pp")


def _weight_gradient(node: workload_pb2.Node) -> bool:
    """Whether ``node`` computes a weight's gradient (a ``wgrad`` GEMM other than attention's, which has none)."""
    return node.name.endswith(" wgrad") and node.op.name not in ("attention scores", "attention context")


def _halves(nodes: Sequence[workload_pb2.Node]) -> tuple[list[workload_pb2.Node], list[workload_pb2.Node]]:
    """A recorded backward pass split into an input pass (a node that waited for a weight-gradient GEMM waits
    for what that GEMM waited for) and a weight pass (those GEMMs renamed ``wgt``, one after another)."""
    waits: dict[int, list[int]] = {}
    inputs: list[workload_pb2.Node] = []
    weights: list[workload_pb2.Node] = []
    for node in nodes:
        deps = list(dict.fromkeys(dep for old in node.data_deps for dep in waits.get(old, [old])))
        copy = workload_pb2.Node()
        copy.CopyFrom(node)
        copy.ClearField("data_deps")
        if _weight_gradient(node):
            waits[node.id] = deps
            copy.name = node.name.replace(" bwd ", " wgt ", 1)
            copy.data_deps.extend([weights[-1].id] if weights else [])
            weights.append(copy)
        else:
            copy.data_deps.extend(deps)
            inputs.append(copy)
    return inputs, weights


def _step_passes(model: GatheredModel, step: Pass, blocks: Sequence[str]) -> list[list[workload_pb2.Node]]:
    """The recorded node lists ``step`` runs over ``blocks`` (its model chunk), one after another: a recorded
    weight pass after its backward pass, or ZB-H1's halves of the backward pass."""
    out: list[list[workload_pb2.Node]] = []
    if step.direction == "forward":
        out = [model.passes.get((step.micro_batch, block, "fwd"), []) for block in blocks]
    else:
        for block in reversed(blocks):
            recorded = model.passes.get((step.micro_batch, block, "bwd"), [])
            later = model.passes.get((step.micro_batch, block, "wgt"), [])
            if step.direction == "backward":
                out += [recorded, later]
            else:
                inputs, weights = _halves(recorded)
                out += [inputs] if step.direction == "input" else [weights, later]
    return [nodes for nodes in out if nodes]


def _stage_graph(model: GatheredModel, npu: int, new: Plan, cut: _Cut) -> workload_pb2.ExecutionGraph:
    """New stage ``new.layout.rank(npu, 'pp')``'s graph for NPU ``npu``."""
    stage, chunks = new.layout.rank(npu, "pp"), cut.schedule.chunks
    blocks = cut.blocks(stage)
    emitter = _Emitter(workload_pb2.ExecutionGraph(npu=npu))
    tp_group = new.layout.group(npu, "tp")
    for step in cut.order(stage):
        receive = _transfer(workload_pb2.COMM_RECV_NODE, npu, new, step, chunks, model.boundary)
        if receive is not None and step.direction != "weight":
            emitter.ready = [emitter.add(receive)]
        for nodes in _step_passes(model, step, blocks[step.chunk]):
            emitter.run_pass(nodes, tp_group)
        send = _transfer(workload_pb2.COMM_SEND_NODE, npu, new, step, chunks, model.boundary)
        if send is not None and step.direction != "weight":
            emitter.add(send)
    _finish(emitter, model, [block for chunk in blocks for block in chunk], new)
    return emitter.graph


def _finish(emitter: _Emitter, model: GatheredModel, blocks: Sequence[str], new: Plan) -> None:
    """The stage's DP gradient all-reduce and optimizer step, and its resident memory: the share of the model's
    that its ``blocks`` hold; the model's tail nodes, their durations scaled by the blocks' share of the weights."""
    share = _share(model, blocks)
    npu = emitter.graph.npu
    group = new.layout.group(npu, "dp")
    done = list(emitter.ready)
    if len(group) > 1 and model.dp_bytes:
        reduce = workload_pb2.Node(name="dp gradient all-reduce", type=workload_pb2.COMM_COLL_NODE)
        reduce.comm_type, reduce.comm_bytes = workload_pb2.ALL_REDUCE, int(model.dp_bytes * share)
        reduce.group.extend(group)
        done.append(emitter.add(reduce))
    if model.optimizer is not None:
        step = workload_pb2.Node(name="optimizer step", type=workload_pb2.COMP_NODE)
        step.op.CopyFrom(_portion(model.optimizer, share))
        emitter.add(step, done)
    fraction = _weight_fraction(model, blocks)
    for node in model.tail:
        copy = workload_pb2.Node()
        copy.CopyFrom(node)
        copy.duration_ps = int(node.duration_ps * fraction)
        if node.HasField("op") and node.op.HasField("elementwise"):  # priced later: its work scaled instead
            copy.op.CopyFrom(_portion(node.op, fraction))
        done = [emitter.add(copy, done)]
    for kind, size in model.resident.items():
        emitter.graph.resident_bytes[kind] = int(size * share) if kind in _SHARED_MEMORY else size


def recut(
    graphs: Sequence[workload_pb2.ExecutionGraph],
    old: Plan,
    new: Plan,
    sources: Sequence[str],
    schedule: Schedule,
    gather: Gather | None = None,
) -> list[workload_pb2.ExecutionGraph]:
    """The graphs of ``new`` (``old`` with another PP) from ``graphs``, those of ``old`` by NPU (``sources`` name
    their files), run in ``schedule``'s order; compute nodes keep their durations, the optimizer steps are left to
    be priced (duration 0). ``gather`` reads each pipeline's passes (the transformer builder's node names by
    default)."""
    if old.zero or old.ep > 1:
        what = f"ZeRO stage {old.zero}" if old.zero else f"ep {old.ep}"
        raise WorkloadError(
            f"--pp {new.pp}: the trace ({sources[0]}) was recorded with {what}, whose per-layer collectives a new "
            "pipeline cut cannot place: export the study again with the new plan"
        )
    out = []
    for npu in range(new.npus):
        ranks = {axis: new.layout.rank(npu, axis) for axis in new.order}
        stages = [old.layout.npu({**ranks, "pp": s}) for s in range(old.pp)]
        model = (gather or _gather)([graphs[s] for s in stages], old, [sources[s] for s in stages])
        cut = _checked_cut(model, new, schedule, sources[0])
        out.append(_stage_graph(model, npu, new, cut))
        out[-1].foreign_names = graphs[stages[0]].foreign_names
    return out


def _checked_cut(model: GatheredModel, new: Plan, schedule: Schedule, source: str) -> _Cut:
    """The cut of ``model``'s layers into ``new.pp`` stages under ``schedule``; raises :class:`WorkloadError`
    naming the option when the layers, the micro-batches or the boundary activation do not allow it."""
    layers = 1 + max((int(b.removeprefix("layer")) for _, b, _ in model.passes if b.startswith("layer")), default=-1)
    chunks = new.pp * schedule.chunks
    if layers < chunks or layers % chunks:
        raise WorkloadError(
            f"--pp {new.pp}: the trace ({source}) holds {layers} layers, which {new.pp} stages cannot share evenly "
            "(each stage a whole, equal number of layers)"
            if schedule.chunks == 1
            else f"--pp {new.pp} --virtual-stages {schedule.chunks}: the trace ({source}) holds {layers} layers, "
            f"which {chunks} model chunks cannot share evenly (each a whole, equal number of layers)"
        )
    if new.pp > 1 and not model.boundary:
        raise WorkloadError(
            f"--pp {new.pp}: the trace ({source}) has no layer residual add (an element-wise operator named "
            "residual) whose size gives the activation passed between stages"
        )
    cut = _Cut(schedule, new.pp, layers, 1 + max(mb for mb, _, _ in model.passes))
    try:
        cut.order(0)
    except ValueError as error:
        raise WorkloadError(f"--schedule {schedule.name}: {error} (the trace's micro-batches per replica)") from None
    return cut
