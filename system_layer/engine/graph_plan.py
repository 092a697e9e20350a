"""Checked, indexed execution graphs: the static part of running a workload, shared by symmetric NPUs."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.graph_blocks import node_named
from stratasim.v1 import workload_pb2

__all__ = ["GraphPlan", "plan_graph", "SUPPORTED_NODE_TYPES"]

SUPPORTED_NODE_TYPES = (
    workload_pb2.COMP_NODE,
    workload_pb2.COMM_COLL_NODE,
    workload_pb2.COMM_SEND_NODE,
    workload_pb2.COMM_RECV_NODE,
    workload_pb2.MEM_LOAD_NODE,
    workload_pb2.MEM_STORE_NODE,
    workload_pb2.METADATA_NODE,
    workload_pb2.BLOCK_NODE,
    workload_pb2.WAIT_NODE,
)


@dataclass(frozen=True, eq=False)
class GraphPlan:
    """A graph's nodes by position, with each node's dependents and number of dependencies.

    A plan is equal only to itself, and hashes so: the engine keys per-plan tables (durations, groups, counts) by
    the plan object.

    The memory and milestone annotations are kept sparse, by position, so the engine's hot path pays a
    dictionary look-up only: ``allocations`` (bytes a node takes when it starts), ``releases`` (bytes it gives
    back when it finishes), ``milestones`` (nodes whose finish time is recorded) and ``resident`` (memory held
    throughout, by kind); ``dependencies`` are each node's by position and ``order`` a topological order of
    the positions. ``blocks`` are the plans of the graph's blocks (:mod:`stratasim.system_layer.engine.blocks`
    runs them); ``scopes``, when set, the name of the block node each node runs for ("" for none), which
    prefixes its own name in traces and milestones.
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
    blocks: tuple[GraphPlan, ...] = ()
    scopes: tuple[str, ...] = ()
    fused: dict[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """The nodes that stand for runs of compute nodes fused into one
    (:mod:`stratasim.system_layer.engine.fusion`): each run's members' full names and durations, in ps."""
    foreign_names: bool = False
    """Whether the node names came from a file the study does not own (a trace): messages then name nodes by id
    only."""
    kinds: tuple[int, ...] = ()
    """Each node's type (``workload_pb2.NodeType``) by position: the engine's passes over a plan read these
    rather than each node's protobuf message. Read from the nodes when not given (planning gives it, having read
    every node's type to check it)."""
    block_runs: dict[int, int] = field(default_factory=dict)
    """The block each BLOCK_NODE runs (its ``block``), by the node's position, for the passes that look at every
    block node (macros, pricing, counting). Read from the nodes when not given."""

    def __post_init__(self) -> None:
        if self.nodes and not self.kinds:
            object.__setattr__(self, "kinds", tuple(node.type for node in self.nodes))
        if not self.block_runs and workload_pb2.BLOCK_NODE in self.kinds:
            nodes, block = self.nodes, workload_pb2.BLOCK_NODE
            runs = {index: nodes[index].block for index, kind in enumerate(self.kinds) if kind == block}
            object.__setattr__(self, "block_runs", runs)

    def name(self, index: int) -> str:
        """Node ``index``'s full name: its block node's name, if any, then its own (else its id)."""
        node = self.nodes[index]
        own = node.name or f"node {node.id}"
        scope = self.scopes[index] if self.scopes else ""
        return f"{scope} {own}" if scope else own


@dataclass(frozen=True)
class _At:
    """Where the nodes being planned are, for errors: the NPU, the block (`` block 2``, "" for the graph itself)
    and whether their names came from a trace (not quoted, :func:`node_named`)."""

    npu: int
    where: str = ""
    foreign_names: bool = False


def _label(at: _At, node: workload_pb2.Node) -> str:
    return f"NPU {at.npu}{at.where} node {node.id}{node_named(node, at.foreign_names)}"


def plan_graph(graph: workload_pb2.ExecutionGraph, npu: int, npus: int) -> GraphPlan:
    """Index ``graph`` and its blocks and check them: unique ids, known dependencies, supported types, groups,
    blocks that exist and hold no block, no cycle, a start time that is not negative."""
    if graph.start_ps < 0:
        raise WorkloadError(f"NPU {npu}: its graph starts at {graph.start_ps} ps (start_ps), before the study")
    resident = tuple(sorted(graph.resident_bytes.items()))
    foreign = graph.foreign_names
    plan = _plan_nodes(tuple(graph.nodes), _At(npu, "", foreign), npus, blocks=len(graph.blocks), resident=resident)
    if not graph.blocks:
        return plan
    blocks = tuple(
        _plan_nodes(tuple(block.nodes), _At(npu, f" block {index}", foreign), npus)
        for index, block in enumerate(graph.blocks)
    )
    return replace(plan, blocks=blocks)


def _plan_nodes(
    nodes: tuple[workload_pb2.Node, ...],
    at: _At,
    npus: int,
    *,
    blocks: int = -1,
    resident: tuple[tuple[str, int], ...] = (),
) -> GraphPlan:
    """Index and check one list of nodes (a graph's, whose BLOCK_NODEs may run its ``blocks`` blocks, or a block's,
    ``at`` placing them in errors).

    This reads every node of every simulated graph once (a million for a large model), so the loop keeps to
    one look-up per field and treats the common case, a node with one dependency, on its own.
    """
    position = _positions(nodes, at)
    dependents: list[list[int]] = [[] for _ in nodes]
    dependencies: list[tuple[int, ...]] = []
    allocations: dict[int, int] = {}
    releases: dict[int, int] = {}
    milestones: list[int] = []
    kinds: list[int] = []
    block_runs: dict[int, int] = {}
    compute, block = workload_pb2.COMP_NODE, workload_pb2.BLOCK_NODE
    point_to_point = (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE)
    for index, node in enumerate(nodes):
        kind = node.type
        kinds.append(kind)
        # The common nodes' checks inline (a whole model's graphs are block nodes, sends and receives):
        # :func:`_check_node` only when one fails, to say why, or for the other kinds.
        if kind == block:
            runs = block_runs[index] = node.block
            if runs >= blocks or node.memory_bytes or node.milestone:
                _check_node(node, at, npus, blocks)
        elif kind in point_to_point:
            peer = node.peer
            if peer >= npus or peer == at.npu:
                _check_node(node, at, npus, blocks)
        elif kind != compute or node.duration_ps < 0:
            _check_node(node, at, npus, blocks)
        deps, ctrl = node.data_deps, node.ctrl_deps
        if len(deps) == 1 and not ctrl:
            found = position.get(deps[0])
            if found is None:
                raise _unknown_dependency(at, node, deps[0])
            dependents[found].append(index)
            dependencies.append((found,))
        elif deps or ctrl:
            dependencies.append(_link({*deps, *ctrl}, index, node, at, position, dependents))
        else:
            dependencies.append(())
        if kind == block:  # checked: no memory, no milestone
            continue
        memory = node.memory_bytes
        if memory > 0:
            allocations[index] = memory
        elif memory:
            releases[index] = -memory
        if node.milestone:
            milestones.append(index)
    indegree = list(map(len, dependencies))
    order = _topological_order(nodes, at, dependents, indegree)
    return GraphPlan(
        nodes,
        tuple(map(tuple, dependents)),
        tuple(indegree),
        allocations=allocations,
        releases=releases,
        milestones=frozenset(milestones),
        resident=resident,
        dependencies=tuple(dependencies),
        order=order,
        foreign_names=at.foreign_names,
        kinds=tuple(kinds),
        block_runs=block_runs,
    )


def _unknown_dependency(at: _At, node: workload_pb2.Node, dependency: int) -> WorkloadError:
    return WorkloadError(
        f"{_label(at, node)}: depends on node {dependency}, which is not in the {_container(at.where)}"
    )


def _container(where: str) -> str:
    return "block" if where else "graph"


def _link(
    deps: set[int],
    index: int,
    node: workload_pb2.Node,
    at: _At,
    position: dict[int, int],
    dependents: list[list[int]],
) -> tuple[int, ...]:
    """The positions of node ``index``'s dependencies ``deps`` (ids), recording it as each one's dependent."""
    positions = []
    for dep in deps:
        found = position.get(dep)
        if found is None:
            raise WorkloadError(
                f"{_label(at, node)}: depends on node {dep}, which is not in the {_container(at.where)}"
            )
        dependents[found].append(index)
        positions.append(found)
    return tuple(positions)


def _positions(nodes: tuple[workload_pb2.Node, ...], at: _At) -> dict[int, int]:
    """Each node's position by id; an id used twice is an error naming the second node that uses it."""
    position = {node.id: index for index, node in enumerate(nodes)}
    if len(position) != len(nodes):
        seen: set[int] = set()
        for node in nodes:
            if node.id in seen:
                raise WorkloadError(f"{_label(at, node)}: the id {node.id} is used twice")
            seen.add(node.id)
    return position


def _check_node(node: workload_pb2.Node, at: _At, npus: int, blocks: int) -> None:
    """A node's own fields: a supported type, peers and groups among the ``npus`` NPUs, a block among the graph's
    ``blocks`` (-1: inside a block, which runs none)."""
    kind = node.type
    npu = at.npu
    if kind == workload_pb2.BLOCK_NODE:
        if blocks < 0:
            raise WorkloadError(f"{_label(at, node)}: a block cannot run a block")
        if node.block >= blocks:
            raise WorkloadError(f"{_label(at, node)}: runs block {node.block}, but the graph has {blocks} blocks")
        if node.memory_bytes or node.milestone:
            raise WorkloadError(
                f"{_label(at, node)}: a BLOCK_NODE allocates no memory and is no milestone; set memory_bytes "
                "and milestone on its block's nodes"
            )
    elif kind == workload_pb2.COMM_SEND_NODE or kind == workload_pb2.COMM_RECV_NODE:
        peer = node.peer
        if peer >= npus or peer == npu:
            raise WorkloadError(f"{_label(at, node)}: peer NPU {peer} must be another of the {npus} NPUs")
    elif kind == workload_pb2.COMM_COLL_NODE:
        group = node.group
        if group and max(group) >= npus:
            outside = [member for member in group if member >= npus]
            raise WorkloadError(f"{_label(at, node)}: group names NPU {outside[0]}, but there are only {npus} NPUs")
        if group and npu not in group:
            raise WorkloadError(f"{_label(at, node)}: NPU {npu} is not a member of its own collective's group")
    elif kind in (workload_pb2.COMP_NODE, workload_pb2.MEM_LOAD_NODE, workload_pb2.MEM_STORE_NODE):
        if node.duration_ps < 0:
            raise WorkloadError(f"{_label(at, node)}: negative duration {node.duration_ps} ps")
    elif kind == workload_pb2.WAIT_NODE:
        _check_wait(node, at)
    elif kind not in SUPPORTED_NODE_TYPES:
        name = workload_pb2.NodeType.Name(kind) if kind in workload_pb2.NodeType.values() else kind
        raise WorkloadError(
            f"{_label(at, node)}: node type {name} is not supported (COMP, COMM_COLL, COMM_SEND, COMM_RECV, "
            "MEM_LOAD, MEM_STORE, METADATA, BLOCK, WAIT)"
        )


def _check_wait(node: workload_pb2.Node, at: _At) -> None:
    """A wait node waits a time it states (``duration_ps``, not negative), and prices no operator."""
    if node.duration_ps < 0:
        raise WorkloadError(
            f"{_label(at, node)}: a WAIT_NODE waits duration_ps, which must not be negative (it is "
            f"{node.duration_ps} ps)"
        )
    if node.HasField("op"):
        raise WorkloadError(
            f"{_label(at, node)}: a WAIT_NODE waits a fixed duration_ps and prices no operator; make it a COMP_NODE "
            "to run the operator"
        )


def _topological_order(
    nodes: tuple[workload_pb2.Node, ...], at: _At, dependents: list[list[int]], indegree: list[int]
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
        cycle = _cycle(nodes, remaining)
        names = " -> ".join(f"{node.id}{node_named(node, at.foreign_names)}" for node in cycle)
        raise WorkloadError(f"{_label(at, cycle[0])}: is part of a dependency cycle: {names} -> {cycle[0].id}")
    return tuple(order)


def _cycle(nodes: tuple[workload_pb2.Node, ...], remaining: list[int]) -> list[workload_pb2.Node]:
    """The nodes of one dependency cycle, each depending on the next: walk back from an unfinished node through
    unfinished dependencies until a node repeats; the walk from its first visit on is the cycle."""
    position = {node.id: index for index, node in enumerate(nodes)}
    index = next(i for i, count in enumerate(remaining) if count > 0)
    walk: list[int] = []
    seen: dict[int, int] = {}
    while index not in seen:
        seen[index] = len(walk)
        walk.append(index)
        node = nodes[index]
        index = next(position[d] for d in (*node.data_deps, *node.ctrl_deps) if remaining[position[d]] > 0)
    return [nodes[i] for i in walk[seen[index] :]]
