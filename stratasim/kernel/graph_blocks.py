"""Execution graphs with blocks (``GraphBlock``, run by ``BLOCK_NODE``s): reading every node, and unrolling.

A model-built graph names a repeated sub-graph once, as a block, and runs it from one node per use; a graph is
then as big as its distinct passes, not as its micro-batches times layers. Whoever needs the plain node list (a
Chakra export, a check of every node) reads it through here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import workload_pb2

__all__ = ["every_node", "check_blocks", "unrolled", "foreign", "node_named", "unpriced", "MAX_UNROLLED_NODES"]

MAX_UNROLLED_NODES = 10_000_000
"""The most nodes :func:`unrolled` writes: a few bytes of graph can name a block a million times."""


def every_node(graph: workload_pb2.ExecutionGraph) -> Iterator[workload_pb2.Node]:
    """The graph's own nodes, then each block's once (not once per use)."""
    yield from graph.nodes
    for block in graph.blocks:
        yield from block.nodes


def check_blocks(graph: workload_pb2.ExecutionGraph, npu: int) -> None:
    """Every BLOCK_NODE names a block of the graph and carries no memory or milestone of its own (its block's
    nodes do), and no block holds one: an error naming the node otherwise."""
    count = len(graph.blocks)
    for node in graph.nodes:
        if node.type != workload_pb2.BLOCK_NODE:
            continue
        if node.block >= count:
            raise WorkloadError(
                f"NPU {npu} node {node.id}{node_named(node, graph.foreign_names)}: runs block {node.block}, but the graph has {count} blocks"
            )
        if node.memory_bytes or node.milestone:
            raise WorkloadError(
                f"NPU {npu} node {node.id}{node_named(node, graph.foreign_names)}: a BLOCK_NODE allocates no memory and is no milestone; "
                "set memory_bytes and milestone on its block's nodes"
            )
    for index, block in enumerate(graph.blocks):
        for node in block.nodes:
            if node.type == workload_pb2.BLOCK_NODE:
                raise WorkloadError(
                    f"NPU {npu} block {index} node {node.id}{node_named(node, graph.foreign_names)}: a block cannot run a block"
                )


def foreign(graphs: Sequence[workload_pb2.ExecutionGraph]) -> list[workload_pb2.ExecutionGraph]:
    """``graphs`` marked as holding names from a file the study does not own (``foreign_names``): what a workload
    replaying a trace hands the engine, so that no message quotes the trace's text."""
    for graph in graphs:
        graph.foreign_names = True
    return list(graphs)


def node_named(node: workload_pb2.Node, foreign_names: bool) -> str:
    """What follows a node's id in a message: `` ('its name')`` for a node of a graph StrataSim built, nothing for
    one whose names came from a trace (its graph's ``foreign_names``): a trace's text is not echoed."""
    return f" ({node.name!r})" if node.name and not foreign_names else ""


def unpriced(node: workload_pb2.Node, foreign_names: bool) -> WorkloadError:
    """The error for an operator node (``op`` set) in a study without a compute section to price it."""
    return WorkloadError(
        f"node {node.id}{node_named(node, foreign_names)} is an operator to price, but the study has no compute section"
    )


def unrolled(graph: workload_pb2.ExecutionGraph) -> workload_pb2.ExecutionGraph:
    """``graph`` with every BLOCK_NODE replaced by a copy of its block's nodes (named ``"<block node> <node>"``,
    numbered after the graph's own ids): the plain graph the blocks stand for, node for node."""
    if not graph.blocks:
        return graph
    check_blocks(graph, graph.npu)
    sizes = [len(block.nodes) for block in graph.blocks]
    total = sum(sizes[node.block] if node.type == workload_pb2.BLOCK_NODE else 1 for node in graph.nodes)
    if total > MAX_UNROLLED_NODES:
        raise WorkloadError(
            f"NPU {graph.npu}: its graph's blocks unroll to {total:,} nodes, more than the {MAX_UNROLLED_NODES:,} "
            "an unrolled graph may hold"
        )
    flat = workload_pb2.ExecutionGraph(
        npu=graph.npu,
        resident_bytes=graph.resident_bytes,
        foreign_names=graph.foreign_names,
        job=graph.job,
        start_ps=graph.start_ps,
    )
    next_id = max((node.id for node in graph.nodes), default=-1) + 1
    sinks: dict[int, list[int]] = {}  # a BLOCK_NODE's id -> the new ids of its block's last nodes
    for node in graph.nodes:
        deps = [d for dep in node.data_deps for d in sinks.get(dep, (dep,))]
        ctrl = [d for dep in node.ctrl_deps for d in sinks.get(dep, (dep,))]
        if node.type != workload_pb2.BLOCK_NODE:
            copy = flat.nodes.add()
            copy.CopyFrom(node)
            copy.ClearField("data_deps")
            copy.ClearField("ctrl_deps")
            copy.data_deps.extend(deps)
            copy.ctrl_deps.extend(ctrl)
            continue
        block = graph.blocks[node.block]
        renumbered = {inner.id: next_id + i for i, inner in enumerate(block.nodes)}
        next_id += len(block.nodes)
        depended: set[int] = set()
        for inner in block.nodes:
            copy = flat.nodes.add()
            copy.CopyFrom(inner)
            copy.id = renumbered[inner.id]
            copy.name = f"{node.name} {inner.name}" if node.name and inner.name else node.name or inner.name
            copy.ClearField("data_deps")
            copy.ClearField("ctrl_deps")
            try:
                copy.data_deps.extend(renumbered[d] for d in inner.data_deps)
                copy.ctrl_deps.extend(renumbered[d] for d in inner.ctrl_deps)
            except KeyError as missing:
                raise WorkloadError(
                    f"NPU {graph.npu} block {node.block} node {inner.id}: depends on node {missing}, "
                    "which is not in the block"
                ) from None
            depended.update(inner.data_deps, inner.ctrl_deps)
            if not inner.data_deps and not inner.ctrl_deps:
                copy.data_deps.extend(deps)
                copy.ctrl_deps.extend(ctrl)
        # An empty block is done as soon as it may start: what waits for it waits for what it waited for.
        sinks[node.id] = [renumbered[inner.id] for inner in block.nodes if inner.id not in depended] or [*deps, *ctrl]
    return flat
