"""Checked, indexed execution graphs: the static part of running a workload, shared by symmetric NPUs."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import workload_pb2

__all__ = ["GraphPlan", "plan_graph", "SUPPORTED_NODE_TYPES"]

SUPPORTED_NODE_TYPES = (
    workload_pb2.COMP_NODE, workload_pb2.COMM_COLL_NODE, workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE,
    workload_pb2.MEM_LOAD_NODE, workload_pb2.MEM_STORE_NODE, workload_pb2.METADATA_NODE,
)  # fmt: skip


@dataclass(frozen=True)
class GraphPlan:
    """A graph's nodes by position, with each node's dependents and number of dependencies.

    The memory and milestone annotations are kept sparse, by position, so the engine's hot path pays a
    dictionary look-up only: ``allocations`` (bytes a node takes when it starts), ``releases`` (bytes it gives
    back when it finishes), ``milestones`` (nodes whose finish time is recorded) and ``resident`` (memory held
    throughout, by kind); ``dependencies`` are each node's by position and ``order`` a topological order of
    the positions.
    """

    nodes: tuple[workload_pb2.Node, ...]
    dependents: tuple[tuple[int, ...], ...]
    indegree: tuple[int, ...]
    allocations: dict[int, int] = field(default_factory=dict)
    releases: dict[int, int] = field(default_factory=dict)
    milestones: frozenset[int] = frozenset()
    resident: tuple[tuple[str, int], ...] = ()
    dependencies: tuple[tuple[int, ...], ...] = ()
    order: tuple[int, ...] = ()


def _label(npu: int, node: workload_pb2.Node) -> str:
    name = f" ({node.name!r})" if node.name else ""
    return f"NPU {npu} node {node.id}{name}"


def plan_graph(graph: workload_pb2.ExecutionGraph, npu: int, npus: int) -> GraphPlan:
    """Index ``graph`` and check it: unique ids, known dependencies, supported types, groups, no cycle.

    This reads every node of every simulated graph once (a million for a large model), so the loop keeps to
    one look-up per field and treats the common case, a node with one dependency, on its own.
    """
    nodes = tuple(graph.nodes)
    position = _positions(nodes, npu)
    dependents: list[list[int]] = [[] for _ in nodes]
    dependencies: list[tuple[int, ...]] = []
    allocations: dict[int, int] = {}
    releases: dict[int, int] = {}
    milestones: list[int] = []
    compute = workload_pb2.COMP_NODE
    for index, node in enumerate(nodes):
        if node.type != compute or node.duration_ps < 0:
            _check_node(node, npu, npus)
        ctrl = node.ctrl_deps
        deps = node.data_deps
        if len(deps) == 1 and not ctrl:
            found = position.get(deps[0])
            if found is None:
                raise WorkloadError(f"{_label(npu, node)}: depends on node {deps[0]}, which is not in the graph")
            dependents[found].append(index)
            dependencies.append((found,))
        elif deps or ctrl:
            dependencies.append(_link({*deps, *ctrl}, index, node, npu, position, dependents))
        else:
            dependencies.append(())
        memory = node.memory_bytes
        if memory:
            if memory > 0:
                allocations[index] = memory
            else:
                releases[index] = -memory
        if node.milestone:
            milestones.append(index)
    indegree = list(map(len, dependencies))
    order = _topological_order(graph, npu, dependents, indegree)
    return GraphPlan(
        nodes,
        tuple(map(tuple, dependents)),
        tuple(indegree),
        allocations=allocations,
        releases=releases,
        milestones=frozenset(milestones),
        resident=tuple(sorted(graph.resident_bytes.items())),
        dependencies=tuple(dependencies),
        order=order,
    )


def _link(
    deps: set[int], index: int, node: workload_pb2.Node, npu: int, position: dict[int, int],
    dependents: list[list[int]],
) -> tuple[int, ...]:
    """The positions of node ``index``'s dependencies ``deps`` (ids), recording it as each one's dependent."""
    positions = []
    for dep in deps:
        found = position.get(dep)
        if found is None:
            raise WorkloadError(f"{_label(npu, node)}: depends on node {dep}, which is not in the graph")
        dependents[found].append(index)
        positions.append(found)
    return tuple(positions)


def _positions(nodes: tuple[workload_pb2.Node, ...], npu: int) -> dict[int, int]:
    """Each node's position by id; an id used twice is an error naming the second node that uses it."""
    position = {node.id: index for index, node in enumerate(nodes)}
    if len(position) != len(nodes):
        seen: set[int] = set()
        for node in nodes:
            if node.id in seen:
                raise WorkloadError(f"{_label(npu, node)}: the id {node.id} is used twice")
            seen.add(node.id)
    return position


def _check_node(node: workload_pb2.Node, npu: int, npus: int) -> None:
    if node.type not in SUPPORTED_NODE_TYPES:
        kind = workload_pb2.NodeType.Name(node.type) if node.type in workload_pb2.NodeType.values() else node.type
        raise WorkloadError(
            f"{_label(npu, node)}: node type {kind} is not supported (COMP, COMM_COLL, COMM_SEND, COMM_RECV, MEM_LOAD, MEM_STORE, METADATA)"
        )
    if node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE) and (
        node.peer >= npus or node.peer == npu
    ):
        raise WorkloadError(f"{_label(npu, node)}: peer NPU {node.peer} must be another of the {npus} NPUs")
    if node.type == workload_pb2.COMM_COLL_NODE and node.group:
        if max(node.group) >= npus:
            outside = [member for member in node.group if member >= npus]
            raise WorkloadError(f"{_label(npu, node)}: group names NPU {outside[0]}, but there are only {npus} NPUs")
        if npu not in node.group:
            raise WorkloadError(f"{_label(npu, node)}: NPU {npu} is not a member of its own collective's group")
    if node.type == workload_pb2.COMP_NODE and node.duration_ps < 0:
        raise WorkloadError(f"{_label(npu, node)}: negative duration {node.duration_ps} ps")


def _topological_order(
    graph: workload_pb2.ExecutionGraph, npu: int, dependents: list[list[int]], indegree: list[int]
) -> tuple[int, ...]:
    """The positions in an order where every node comes after its dependencies; a cycle is an error naming it."""
    remaining = list(indegree)
    ready = deque(i for i, count in enumerate(remaining) if count == 0)
    order: list[int] = []
    while ready:
        index = ready.popleft()
        order.append(index)
        for dependent in dependents[index]:
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                ready.append(dependent)
    if len(order) != len(remaining):
        cycle = _cycle(graph, remaining)
        names = " -> ".join(f"{node.id}" + (f" ({node.name!r})" if node.name else "") for node in cycle)
        raise WorkloadError(
            f"{_label(npu, cycle[0])}: is part of a dependency cycle: {names} -> {cycle[0].id}"
        )
    return tuple(order)


def _cycle(graph: workload_pb2.ExecutionGraph, remaining: list[int]) -> list[workload_pb2.Node]:
    """The nodes of one dependency cycle, each depending on the next: walk back from an unfinished node through
    unfinished dependencies until a node repeats; the walk from its first visit on is the cycle."""
    position = {node.id: index for index, node in enumerate(graph.nodes)}
    index = next(i for i, count in enumerate(remaining) if count > 0)
    walk: list[int] = []
    seen: dict[int, int] = {}
    while index not in seen:
        seen[index] = len(walk)
        walk.append(index)
        node = graph.nodes[index]
        index = next(position[d] for d in (*node.data_deps, *node.ctrl_deps) if remaining[position[d]] > 0)
    return [graph.nodes[i] for i in walk[seen[index]:]]
