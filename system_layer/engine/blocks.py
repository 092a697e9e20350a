"""Running a graph's blocks: a BLOCK_NODE's block inlined in its place, node for node.

A model-built graph holds each distinct pass once, as a block, and runs it from one BLOCK_NODE per micro-batch
and layer (``GraphBlock`` in the workload IR). Inlining a plan's block nodes gives exactly the plan of the
unrolled graph (:func:`stratasim.kernel.graph_blocks.unrolled`), at the cost of an index shift per node rather
than a protobuf message per node; the block nodes :mod:`stratasim.system_layer.engine.macros` runs whole are kept.
"""

from __future__ import annotations

from collections.abc import Collection

from stratasim.kernel.errors import WorkloadError
from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.v1 import workload_pb2

__all__ = ["inline_blocks", "sinks", "MAX_INLINED_NODES"]

MAX_INLINED_NODES = 10_000_000
"""The most nodes one NPU's plan may hold once its blocks are inlined: a few bytes of graph can name a block
a million times, and each inlined node costs the engine some hundred bytes."""


def sinks(plan: GraphPlan) -> tuple[int, ...]:
    """The positions of the nodes nothing in ``plan`` waits for: a block is done when they are."""
    return tuple(index for index, dependents in enumerate(plan.dependents) if not dependents)


def inline_blocks(plan: GraphPlan, keep: Collection[int] = (), npu: int = 0) -> GraphPlan:
    """``plan`` (of NPU ``npu``) with every block node but those at the positions in ``keep`` replaced by its
    block's nodes: a block's first nodes wait for what the block node waited for, and what waited for the block
    node waits for the block's last nodes. A plan that would grow past :data:`MAX_INLINED_NODES` is an error."""
    if not plan.blocks:
        return plan
    block_type = workload_pb2.BLOCK_NODE
    inlined = [kind == block_type and index not in keep for index, kind in enumerate(plan.kinds)]
    if not any(inlined):
        return plan
    size = len(plan.nodes) + sum(
        len(plan.blocks[node.block].nodes) - 1 for node, inline in zip(plan.nodes, inlined) if inline
    )
    if size > MAX_INLINED_NODES:
        raise WorkloadError(
            f"NPU {npu}: its graph's blocks unroll to {size:,} nodes, more than the {MAX_INLINED_NODES:,} one NPU may "
            "simulate node by node (blocks run whole only when nothing else can touch them: see docs/reference/system-layer.md)"
        )
    base, nodes, scopes = _unrolled_nodes(plan, inlined)
    dependencies, order = _unrolled_dependencies(plan, inlined, base, len(nodes))
    dependents: list[list[int]] = [[] for _ in nodes]
    for index in range(len(nodes)):  # in position order, as planning the unrolled graph lists them
        for dep in dependencies[index]:
            dependents[dep].append(index)
    allocations, releases, milestones = _annotations(plan, inlined, base)
    return GraphPlan(
        nodes=tuple(nodes),
        dependents=tuple(map(tuple, dependents)),
        indegree=tuple(map(len, dependencies)),
        allocations=allocations,
        releases=releases,
        milestones=frozenset(milestones),
        resident=plan.resident,
        dependencies=tuple(dependencies),
        order=tuple(order),
        foreign_names=plan.foreign_names,
        blocks=plan.blocks if keep else (),
        scopes=tuple(scopes),
    )


def _unrolled_nodes(plan: GraphPlan, inlined: list[bool]) -> tuple[list[int], list[workload_pb2.Node], list[str]]:
    """Each node's first position in the unrolled plan, the unrolled plan's nodes and their scopes (an inlined
    block's nodes are in the scope of the block node)."""
    base: list[int] = []
    nodes: list[workload_pb2.Node] = []
    scopes: list[str] = []
    for index, node in enumerate(plan.nodes):
        base.append(len(nodes))
        if inlined[index]:
            block = plan.blocks[node.block]
            nodes.extend(block.nodes)
            scopes.extend([node.name] * len(block.nodes))
        else:
            nodes.append(node)
            scopes.append(plan.scopes[index] if plan.scopes else "")
    return base, nodes, scopes


def _unrolled_dependencies(
    plan: GraphPlan, inlined: list[bool], base: list[int], size: int
) -> tuple[list[tuple[int, ...]], list[int]]:
    """Each unrolled node's dependencies and the unrolled plan's order: a block's first nodes wait for what its
    block node waited for, and what waited for the block node waits for the block's last nodes."""
    block_sinks = [sinks(block) for block in plan.blocks]
    exits: list[tuple[int, ...]] = [()] * len(plan.nodes)  # what waiting for a node means in the new plan
    dependencies: list[tuple[int, ...]] = [()] * size
    order: list[int] = []
    for index in plan.order:
        entry = tuple(at for dep in plan.dependencies[index] for at in exits[dep])
        start = base[index]
        if not inlined[index]:
            dependencies[start] = entry
            exits[index] = (start,)
            order.append(start)
            continue
        block = plan.blocks[plan.nodes[index].block]
        for inner in block.order:
            deps = block.dependencies[inner]
            dependencies[start + inner] = tuple(start + d for d in deps) if deps else entry
            order.append(start + inner)
        exits[index] = tuple(start + s for s in block_sinks[plan.nodes[index].block]) if block.nodes else entry
    return dependencies, order


def _annotations(
    plan: GraphPlan, inlined: list[bool], base: list[int]
) -> tuple[dict[int, int], dict[int, int], list[int]]:
    """The plan's and its inlined blocks' allocations, releases and milestones at their new positions."""
    allocations = {base[i]: size for i, size in plan.allocations.items()}
    releases = {base[i]: size for i, size in plan.releases.items()}
    milestones = [base[i] for i in plan.milestones]
    for index, node in enumerate(plan.nodes):
        if inlined[index]:
            block, start = plan.blocks[node.block], base[index]
            allocations.update((start + i, size) for i, size in block.allocations.items())
            releases.update((start + i, size) for i, size in block.releases.items())
            milestones.extend(start + i for i in block.milestones)
    return allocations, releases, milestones
