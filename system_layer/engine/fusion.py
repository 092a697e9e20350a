"""Fusing runs of compute nodes that can only ever run back to back, so the engine handles one event per run.

On an NPU whose compute nodes are totally ordered by their dependencies (one stream of work, as a training
step's graph is), the compute queue never holds two nodes; then a compute node ``b`` whose only dependency is
compute node ``a``, which nothing else waits for, starts the instant ``a`` ends. Running ``a`` and ``b`` as one
node of their summed duration changes no time the simulation reports. Memory stays exact: a run allocates what
its first node allocates when it starts and frees what its last node frees when it ends, so a node that
allocates only starts a run and one that frees (or is a milestone) only ends one.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.v1 import workload_pb2

__all__ = ["fuse_compute_runs", "compute_is_one_chain"]


def fuse_compute_runs(
    plan: GraphPlan, durations: tuple[int, ...], members: bool = False
) -> tuple[GraphPlan, tuple[int, ...]]:
    """``plan`` with every fusible run of compute nodes made one node (the run's last node stands for it) and
    the durations by the new positions; ``plan`` itself when its compute nodes are not one chain. With
    ``members`` the fused plan keeps each run's members' names and durations (``GraphPlan.fused``), which the
    per-node times need and nothing else does."""
    nodes = plan.nodes
    kind = workload_pb2.COMP_NODE
    if kind not in plan.kinds:  # nothing to fuse (a graph of block nodes, sends and receives): spare the walks
        return plan, durations
    compute = [each == kind for each in plan.kinds]
    dependencies = plan.dependencies
    if not compute_is_one_chain(plan.order, compute, dependencies):
        return plan, durations
    head = list(range(len(nodes)))  # the first node of the run each node belongs to
    last = list(range(len(nodes)))  # per run head, the run's last node so far
    for index in plan.order:
        deps = dependencies[index]
        if not compute[index] or len(deps) != 1 or index in plan.allocations:
            continue
        previous = deps[0]
        if (
            compute[previous]
            and len(plan.dependents[previous]) == 1
            and previous not in plan.releases
            and previous not in plan.milestones
        ):
            head[index] = head[previous]
            last[head[index]] = index
    if all(h == i for i, h in enumerate(head)):
        return plan, durations
    return _rebuild(plan, durations, head, last, members)


def compute_is_one_chain(order: Sequence[int], compute: Sequence[bool], dependencies: Sequence[Sequence[int]]) -> bool:
    """Whether, in the topological ``order``, every compute node depends (directly or not) on the compute node
    before it: then no two compute nodes are ever ready at once."""
    rank = [-1] * len(order)  # per node, the order rank of its latest compute ancestor (itself if compute)
    previous = -1
    for at, index in enumerate(order):
        deps = dependencies[index]
        if not deps:
            ancestor = -1
        elif len(deps) == 1:
            ancestor = rank[deps[0]]
        else:
            ancestor = max(rank[d] for d in deps)
        if compute[index]:
            if ancestor != previous:
                return False
            ancestor = previous = at
        rank[index] = ancestor
    return True


def _rebuild(
    plan: GraphPlan, durations: tuple[int, ...], head: list[int], last: list[int], members: bool
) -> tuple[GraphPlan, tuple[int, ...]]:
    """The plan with each run folded into one node: durations summed, the first node's allocation and the last
    node's dependents, release and milestone; with ``members``, the run's members kept by name
    (``GraphPlan.fused``)."""
    kept = [i for i, h in enumerate(head) if h == i]
    position = {old: new for new, old in enumerate(kept)}
    total = [0] * len(kept)
    for index, h in enumerate(head):
        total[position[h]] += durations[index]
    dependents = tuple(tuple(position[head[d]] for d in plan.dependents[last[old]]) for old in kept)
    indegree = [0] * len(kept)
    dependencies: list[list[int]] = [[] for _ in kept]
    for source, targets in enumerate(dependents):
        for target in targets:
            indegree[target] += 1
            dependencies[target].append(source)
    fused = GraphPlan(
        nodes=tuple(plan.nodes[last[old]] for old in kept),
        dependents=dependents,
        indegree=tuple(indegree),
        allocations={position[i]: size for i, size in plan.allocations.items()},
        releases={position[head[i]]: size for i, size in plan.releases.items()},
        milestones=frozenset(position[head[i]] for i in plan.milestones),
        resident=plan.resident,
        dependencies=tuple(map(tuple, dependencies)),
        blocks=plan.blocks,
        scopes=tuple(plan.scopes[last[old]] for old in kept) if plan.scopes else (),
        fused=_members(plan, durations, head, last, position) if members else {},
        foreign_names=plan.foreign_names,
    )
    return fused, tuple(total)


def _members(
    plan: GraphPlan, durations: tuple[int, ...], head: list[int], last: list[int], position: dict[int, int]
) -> dict[int, tuple[tuple[str, int], ...]]:
    """Each run of several nodes by its new position: its members' full names and durations, in order."""
    members: dict[int, list[tuple[str, int]]] = {}
    for index, h in enumerate(head):
        if last[h] != h:
            members.setdefault(position[h], []).append((plan.name(index), durations[index]))
    return {at: tuple(run) for at, run in members.items()}
