"""The layers of a Chakra trace converted from PyTorch found in its operator sequence, so that ``stratasim trace
reshard --pp`` can deal them out to a new number of stages (:mod:`.pipeline_cut` does the dealing).

Such a trace names its nodes by ATen operator (``aten::linear``, ``aten::native_layer_norm``, ...) and says nothing
of layers or micro-batches. What this module reads, on each rank's recorded sequence (PP 1 only) with its DP
collectives (the gradient all-reduces, wherever they run) set aside:

- **Forward layer blocks**: the shortest block of nodes that begins at a layer norm (:data:`.torch_operators.NORMS`)
  and repeats back to back at least twice, compared by node type, name and collective type. Each place it repeats
  is one micro-batch's forward pass through the layers, and every such run must repeat as often (the layers).
- **Backward layer blocks**: after each forward run, the shortest block that ends at a norm's backward (a node whose
  name holds ``norm`` and ``backward``) and repeats back to back, read from the end: as many repeats as layers,
  the first one run being the last layer's.
- **The rest**, which cannot be told by shapes and is placed by these assumptions: what precedes a micro-batch's
  first forward block is its embedding (first stage); what lies between its forward and backward runs is the head
  (last stage), its forward up to the first node whose name holds ``backward``; what follows its backward run up to
  the last node named ``backward`` is the embedding's backward (first stage); after the last micro-batch, the rest
  is the optimizer step, run by every stage for its share of the weights (its durations scaled by it).
- **The boundary activation** (each transfer between stages) is the largest output tensor of a layer block's last
  compute node (``outputs.shapes`` at its dtype).
- **Weights** (a stage's share of the DP all-reduce and of the optimizer) are counted from the first micro-batch's
  forward GEMMs against a matrix (``aten::linear``'s weight, a 2-D product's second operand), the embedding table
  as large as the head's GEMMs.

Everything else is refused, naming the file and node: a trace recorded at PP > 1, a
collective inside a block over other than the TP group, no repeating block, a backward run that does not repeat
as often as the forward one, a forward-only trace of several micro-batches (where one's head ends and the next
one's embedding begins cannot be told), and ZB-H1 (weight-gradient GEMMs are not told from input-gradient ones).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from stratasim.chakra.et_def_pb2 import Node
from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.chakra import read_trace
from stratasim.workload_layer.traces.pipeline_cut import GatheredModel, Key
from stratasim.workload_layer.traces.rescale import Plan
from stratasim.workload_layer.traces.torch_operators import NORMS, output_bytes, weight_bytes

__all__ = ["ASSUMPTIONS", "converted_from_pytorch", "gather_torch"]

ASSUMPTIONS = (
    "the layers were read from the repeating blocks of the PyTorch operator sequence; assumed, as it cannot be "
    "inferred: the nodes before a micro-batch's first layer are its embedding (first stage), those between its "
    "forward and backward layers its head (last stage), what follows the last micro-batch's backward its optimizer "
    "step (every stage, scaled by its share of the weights); the DP gradient all-reduces are one per stage, at the end"
)
"""What the re-cut of a PyTorch trace assumed, for the command's output."""

_BUILDER_PASS = re.compile(r"mb\d+ (embedding|layer\d+|head) (fwd|bwd|wgt) ")
_ANCHORS_TRIED = 8
"""Layer-norm positions tried as a block's start before giving up: the first layer begins at one of the first."""

Signature = tuple[int, str, int]


def converted_from_pytorch(graph: workload_pb2.ExecutionGraph) -> bool:
    """Whether ``graph`` names its nodes by ATen operator rather than by the transformer builder's passes."""
    names = [node.name for node in graph.nodes]
    return any(name.startswith("aten::") for name in names) and not any(_BUILDER_PASS.match(n) for n in names)


def _signature(node: workload_pb2.Node) -> Signature:
    return node.type, node.name, node.comm_type if node.type == workload_pb2.COMM_COLL_NODE else 0


def _repeats(sigs: Sequence[Signature], start: int, block: Sequence[Signature]) -> int:
    """How many times ``block`` repeats back to back in ``sigs`` from ``start``."""
    count, period = 0, len(block)
    while sigs[start + count * period : start + (count + 1) * period] == block:
        count += 1
    return count


def _block(sigs: Sequence[Signature], anchor: Callable[[str], bool]) -> tuple[int, int, int] | None:
    """The first (start, period, repeats) of the shortest block beginning at an ``anchor`` node that repeats back to
    back at least twice (the starts tried: the first few anchors); None when there is none."""
    anchors = [i for i, sig in enumerate(sigs) if anchor(sig[1])]
    for start in anchors[:_ANCHORS_TRIED]:
        for end in anchors:
            repeats = _repeats(sigs, start, sigs[start:end]) if end > start and sigs[end] == sigs[start] else 0
            if repeats >= 2:
                return start, end - start, repeats
    return None


def _runs(sigs: Sequence[Signature], block: Sequence[Signature]) -> list[tuple[int, int]]:
    """Every (start, repeats) where ``block`` repeats back to back in ``sigs``."""
    found, i, period = [], 0, len(block)
    while i < len(sigs):
        count = _repeats(sigs, i, block) if sigs[i] == block[0] else 0
        if count:
            found.append((i, count))
        i += max(count * period, 1)
    return found


def _backward_run(nodes: Sequence[workload_pb2.Node], layers: int, where: str) -> tuple[int, int] | None:
    """The (start, period) of the backward layer blocks in ``nodes`` (a micro-batch's nodes after its forward
    run), read from the end; None when it holds no norm backward."""
    sigs = [_signature(node) for node in reversed(nodes)]
    found = _block(sigs, lambda name: "norm" in name and "backward" in name)
    if found is None and not any("backward" in node.name for node in nodes):
        return None
    if found is None or found[2] != layers:
        raise WorkloadError(
            f"{where}: the backward pass does not repeat a block ending at a norm's backward {layers} times, as the "
            f"forward pass repeats its layer block{'' if found is None else f' (it repeats {found[2]} times)'}, so "
            "its layers cannot be found"
        )
    start, period, _ = found
    return len(nodes) - start - layers * period, period


def _split_at_backward(nodes: Sequence[workload_pb2.Node], last: bool) -> int:
    """Where ``nodes`` change from one pass to the next: after the last node named ``backward`` (``last``), or at
    the first (otherwise); 0 or the end when none is."""
    marked = [i for i, node in enumerate(nodes) if "backward" in node.name]
    if not marked:
        return 0 if last else len(nodes)
    return marked[-1] + 1 if last else marked[0]


def _layer_nodes(graph: workload_pb2.ExecutionGraph, plan: Plan, source: str) -> tuple[list[workload_pb2.Node], int]:
    """``graph``'s nodes without its DP gradient all-reduces, and their bytes; a collective over neither the TP nor
    the DP group is refused (a transfer was, by :func:`.rescale.regroup`: at PP 1 it crosses TP ranks or replicas)."""
    tp_group, dp_group = plan.layout.group(graph.npu, "tp"), plan.layout.group(graph.npu, "dp")
    everyone = tuple(range(plan.npus))
    kept, dp_bytes = [], 0
    for node in graph.nodes:
        group = tuple(sorted(node.group)) or everyone
        where = f"{source}: node {node.id} ({node.name})"
        if node.type == workload_pb2.COMM_COLL_NODE and group == dp_group and len(dp_group) > 1:
            if node.comm_type != workload_pb2.ALL_REDUCE:
                raise WorkloadError(f"{where}: a DP collective other than a gradient all-reduce cannot be placed")
            dp_bytes += node.comm_bytes
        elif node.type == workload_pb2.COMM_COLL_NODE and group != tp_group:
            raise WorkloadError(f"{where}: a collective over neither the TP nor the DP group cannot be placed")
        else:
            kept.append(node)
    return kept, dp_bytes


def _forward_runs(nodes: Sequence[workload_pb2.Node], where: str) -> tuple[list[int], int, int]:
    """The starts of the forward layer runs in ``nodes`` (one per micro-batch), the block's length and the layers."""
    sigs = [_signature(node) for node in nodes]
    found = _block(sigs, lambda name: name in NORMS)
    if found is None:
        raise WorkloadError(
            f"{where}: no block of nodes beginning at a layer norm ({', '.join(sorted(NORMS))}) repeats back to back, "
            "so the trace's layers cannot be found"
        )
    start, period, layers = found
    runs = _runs(sigs, sigs[start : start + period])
    if {count for _, count in runs} != {layers}:
        raise WorkloadError(
            f"{where}: the layer block found ({period} nodes from node {nodes[start].id}) repeats "
            f"{sorted({count for _, count in runs})} times in different places, so the micro-batches' layers "
            "cannot be told apart"
        )
    return [run_start for run_start, _ in runs], period, layers


def _segment(model: GatheredModel, nodes: Sequence[workload_pb2.Node], where: str) -> tuple[int, int]:
    """Fill ``model.passes`` and ``model.tail`` from ``nodes`` (the module's rules); the forward run's first start
    and the block's length."""
    starts, period, layers = _forward_runs(nodes, where)

    def add(key: Key, part: Sequence[workload_pb2.Node]) -> None:
        if part:
            model.passes.setdefault(key, []).extend(part)

    add((0, "embedding", "fwd"), nodes[: starts[0]])
    for mb, start in enumerate(starts):
        end = start + layers * period
        for j in range(layers):
            add((mb, f"layer{j}", "fwd"), nodes[start + j * period : start + (j + 1) * period])
        after = nodes[end : starts[mb + 1] if mb + 1 < len(starts) else len(nodes)]
        backward = _backward_run(after, layers, where)
        if backward is None and len(starts) > 1:
            raise WorkloadError(
                f"{where}: {len(starts)} micro-batches' forward passes and no backward pass: where one's head ends "
                "and the next one's embedding begins cannot be told"
            )
        b_start, b_period = backward or (len(after), 0)
        head = after[:b_start]
        split = _split_at_backward(head, last=False)
        add((mb, "head", "fwd"), head[:split])
        add((mb, "head", "bwd"), head[split:])
        for j in range(layers if backward else 0):
            add((mb, f"layer{layers - 1 - j}", "bwd"), after[b_start + j * b_period : b_start + (j + 1) * b_period])
        rest = after[b_start + layers * b_period :] if backward else []
        cut = _split_at_backward(rest, last=True)
        add((mb, "embedding", "bwd"), rest[:cut])
        if mb + 1 < len(starts):
            add((mb + 1, "embedding", "fwd"), rest[cut:])
        else:
            model.tail.extend(rest[cut:])
    return starts[0], period


def gather_torch(graphs: Sequence[workload_pb2.ExecutionGraph], plan: Plan, sources: Sequence[str]) -> GatheredModel:
    """One TP rank's and replica's passes read from its PyTorch trace (the module's rules); ``graphs`` must be the
    one stage of a trace recorded at PP 1."""
    if len(graphs) != 1:
        raise WorkloadError(
            f"--pp: the trace ({sources[0]}) converted from PyTorch was recorded at pp {len(graphs)}: only a trace "
            "recorded at PP 1 is re-cut (the stages' transfers would have to be matched to the layers they carry)"
        )
    nodes, dp_bytes = _layer_nodes(graphs[0], plan, sources[0])
    model = GatheredModel(dp_bytes=dp_bytes, element_bytes=1)
    start, period = _segment(model, nodes, sources[0])
    recorded: dict[int, Node] = {node.id: node for node in read_trace(sources[0])[1]}
    for (mb, block, direction), part in model.passes.items():
        if mb == 0 and direction == "fwd":
            found = sum(weight_bytes(recorded[node.id]) for node in part if node.type == workload_pb2.COMP_NODE)
            model.weights[block] = model.weights.get(block, 0) + found
    last = next(node for node in reversed(nodes[start : start + period]) if node.type == workload_pb2.COMP_NODE)
    model.boundary = output_bytes(recorded[last.id])
    if not model.boundary:
        raise WorkloadError(
            f"{sources[0]}: node {last.id} ({last.name}): the last operator of a layer records no output shape "
            "(outputs.shapes), which gives the size of the activation passed between stages"
        )
    return model
