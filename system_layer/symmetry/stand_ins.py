"""Simulating NPUs that are equivalent by symmetry once for all (as PALM's virtual tile aggregation does).

When every NPU runs the same graph, every collective spans all NPUs, the topology's dimensions are
translation-symmetric (rings, fully connected, switches all are), the algorithms treat every position alike
and message delays do not depend on other traffic, then every NPU lives the same timeline. The engine then
simulates NPU 0 alone: a message it sends to a peer is also, by symmetry, the message it receives from its
mirror peer at the same time, so it is delivered back to NPU 0 — after the network priced the real route.
Results are identical to simulating every NPU (the tests check this), at a fraction of the cost.

The same holds class by class. A workload whose NPU ``x`` runs the graph of a representative ``r`` moved by
the grid translation from ``r`` to ``x`` (the TP and DP ranks of a pipeline stage, say) declares its
representatives; the engine simulates those alone. A collective message goes back to its sender, as above,
which is exact when every member of the group stands in for the sender, the group runs one phase per
dimension (no flat phase, whose member order translations need not respect) and the translations to its
members carry the group onto itself (a whole line, or evenly spaced positions of a ring). Point-to-point
messages go between representatives as they are.

Along a dimension the network prices as every pair alike (``NetworkInfo.permutable_dimensions``: a switch, a
fully-connected dimension; not a ring) every permutation of positions is a symmetry, so more groups qualify. The
dimension is cut into the nested blocks the mirrored groups need (:func:`stratasim.kernel.grid.block_grid`: a TP
group of 2 in a node of 8 is a block of 2, the DP group through it the same offset in each of 4 blocks), each
group one level of blocks, and the translations are those of blocks and offsets, (q, r) -> (q + dq, r + dr),
which rotate each group as a ring or halving-doubling expects. When the groups cannot cut a dimension so, it
stays whole, with its plain translations. The workload declares its representatives against the same cuts
(:mod:`stratasim.workload_layer.rank_symmetry`).

NPUs running different devices or slowed differently live different timelines. A per-NPU property constant on the
stand-in classes keeps the stand-ins exact (:func:`constant_on_classes`: the classes are orbits of a symmetry group,
so such a property is invariant under it): every NPU runs its stand-in's device (the device groups follow the
symmetry classes, as a pipeline stage per pod does) and has its stand-in's fixed ``system.slowdown`` (factor and
``from`` times: a whole stage slowed, say). Otherwise every NPU is simulated and :data:`DEVICES_DIFFER` or
:data:`SLOWDOWNS_DIFFER` says why; ``system.variability`` draws differ per NPU (and per message), so it always does.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from stratasim.kernel.graph_blocks import every_node
from stratasim.kernel.grid import BlockGrid, Grid, block_grid
from stratasim.system_layer.collectives.groups import FLAT, phases_of
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.variability import slowdown_profiles
from stratasim.v1 import network_pb2, workload_pb2

__all__ = [
    "DEVICES_DIFFER",
    "SLOWDOWNS_DIFFER",
    "SYMMETRIC_ALGORITHMS",
    "aggregation_blocker",
    "constant_on_classes",
    "may_aggregate",
    "slowdowns_agree",
    "stand_ins",
]

# Algorithms whose every position sends and waits alike, with peers at the same distances.
SYMMETRIC_ALGORITHMS = frozenset({"ring", "ring_bidirectional", "direct", "halving_doubling"})

DEVICES_DIFFER = "NPU groups run different devices"
"""Why stand-ins were given up when an NPU runs another device than the NPU that would stand in for it."""

SLOWDOWNS_DIFFER = "system.slowdown/variability make the NPUs differ"
"""Why stand-ins were given up when an NPU is slowed otherwise than the NPU that would stand in for it, or varied."""


def aggregation_blocker(
    graphs: Sequence[workload_pb2.ExecutionGraph], info: network_pb2.NetworkInfo, options: SystemOptions
) -> str | None:
    """Why the NPUs cannot be simulated as one representative, or None when they can."""
    if not options.aggregate:
        return "aggregation is switched off"
    if not info.stateless:
        return f"the {info.backend or 'network'} backend's delays depend on traffic"
    if len(graphs) != info.npus:
        return "the workload does not use every NPU of the topology"
    if options.logical_topology is not None:
        return "collectives run on a logical topology whose symmetries the physical one may not share"
    first = graphs[0]
    signature = first.SerializeToString(deterministic=True)
    seen = {id(first)}
    for graph in graphs:
        if id(graph) not in seen:
            seen.add(id(graph))
            if graph.SerializeToString(deterministic=True) != signature:
                return "NPUs run different graphs"
    for node in every_node(first):
        if node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
            return f"node {node.id} is a point-to-point transfer"
        if node.type != workload_pb2.COMM_COLL_NODE:
            continue
        if node.group and len(set(node.group)) != len(graphs):
            return f"collective node {node.id} runs on a sub-group"
        if node.comm_type in (workload_pb2.BROADCAST, workload_pb2.REDUCE):
            return f"collective node {node.id} has a root, which sets NPUs apart"
    unusual = sorted({name for names in options.algorithm.values() for name in names} - SYMMETRIC_ALGORITHMS)
    if unusual:
        return f"algorithm {unusual[0]} treats positions differently"
    return None


def stand_ins(
    graphs: Sequence[workload_pb2.ExecutionGraph],
    info: network_pb2.NetworkInfo,
    options: SystemOptions,
    grid: Grid,
    representatives: Sequence[int] | None = None,
    device_of: Mapping[int, str] | None = None,
) -> tuple[tuple[int, ...] | None, str | None]:
    """For each NPU, the NPU simulated in its place, or None with the reason when every NPU must be simulated.

    Without declared ``representatives`` NPU 0 stands in for all when :func:`aggregation_blocker` allows;
    with them, only the representatives' graphs are read, and the checks in the module docstring apply.
    ``device_of``: the device of each NPU running another than the simulation's; ``options``' slow-downs must
    agree with the stand-ins too (:func:`slowdowns_agree`).
    """
    npus = len(graphs)
    grid = Grid(grid.sizes, frozenset(info.permutable_dimensions))  # the network says which ones price pairs alike
    if representatives is None:
        blocker = aggregation_blocker(graphs, info, options)
        stand_in = (0,) * npus
    else:
        stand_in = tuple(representatives)
        blocker = _common_blocker(npus, info, options) or _representative_blocker(graphs, stand_in, grid)
    if blocker is None and not constant_on_classes(stand_in, device_of or {}):
        blocker = DEVICES_DIFFER
    if blocker is None and not slowdowns_agree(stand_in, options):
        blocker = SLOWDOWNS_DIFFER
    return (stand_in, None) if blocker is None else (None, blocker)


def constant_on_classes(stand_in: Sequence[int], value_of: Mapping[int, Hashable]) -> bool:
    """Whether a per-NPU property is constant on the stand-in classes: every NPU has the value of the NPU standing
    in for it (``value_of``: the value of each NPU off the default, e.g. its device when not the simulation's)."""
    return not value_of or all(value_of.get(npu) == value_of.get(r) for npu, r in enumerate(stand_in))


def slowdowns_agree(stand_in: Sequence[int], options: SystemOptions) -> bool:
    """Whether every NPU is slowed as the NPU standing in for it (``system.slowdown``'s factors and ``from`` times),
    with no ``system.variability``, whose draws differ per NPU."""
    profiles = slowdown_profiles(options.slowdown, len(stand_in))
    return options.variability is None and constant_on_classes(stand_in, profiles)


def may_aggregate(options: SystemOptions, stateless: bool) -> bool:
    """Whether ``options`` and a network whose delays do (``stateless`` False) or do not depend on traffic let the
    engine simulate NPUs equivalent by symmetry once, as far as can be told before any graph is built."""
    return _common_blocker(0, network_pb2.NetworkInfo(stateless=stateless), options) is None


def _common_blocker(npus: int, info: network_pb2.NetworkInfo, options: SystemOptions) -> str | None:
    if not options.aggregate:
        return "aggregation is switched off"
    if not info.stateless:
        return f"the {info.backend or 'network'} backend's delays depend on traffic"
    if npus != info.npus:
        return "the workload does not use every NPU of the topology"
    if options.logical_topology is not None:
        return "collectives run on a logical topology whose symmetries the physical one may not share"
    unusual = sorted({name for names in options.algorithm.values() for name in names} - SYMMETRIC_ALGORITHMS)
    if unusual:
        return f"algorithm {unusual[0]} treats positions differently"
    return None


def _representative_blocker(
    graphs: Sequence[workload_pb2.ExecutionGraph], stand_in: tuple[int, ...], grid: Grid
) -> str | None:
    if len(stand_in) != len(graphs) or any(not 0 <= r < len(graphs) or stand_in[r] != r for r in stand_in):
        return "the declared representatives are not a mapping of NPUs onto NPUs that stand for themselves"
    issued: dict[tuple[int, ...], tuple[int, int]] = {}  # each group, by the first representative and node issuing it
    point_to_point, collective = (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE), workload_pb2.COMM_COLL_NODE
    for npu in sorted(set(stand_in)):
        for node in every_node(graphs[npu]):
            kind = node.type
            if kind in point_to_point:
                peer = node.peer
                if stand_in[peer] != peer:
                    return f"NPU {npu} node {node.id} talks to NPU {peer}, which is not a representative"
            elif kind == collective:
                if node.comm_type in (workload_pb2.BROADCAST, workload_pb2.REDUCE):
                    return f"NPU {npu} collective node {node.id} has a root, which sets NPUs apart"
                group = tuple(sorted(node.group)) if node.group else tuple(range(len(graphs)))
                issued.setdefault(group, (npu, node.id))
    blocks = block_grid(grid, (group for group in issued if any(stand_in[m] != m for m in group)))
    for group, (npu, node_id) in issued.items():
        problem = _group_problem(group, npu, stand_in, grid, blocks)
        if problem:
            return f"NPU {npu} collective node {node_id}: {problem}"
    return None


def _group_problem(
    group: tuple[int, ...], npu: int, stand_in: tuple[int, ...], grid: Grid, blocks: BlockGrid
) -> str | None:
    """Why the mirror trick would be inexact on ``group`` issued by representative ``npu``, or None (also when
    every member is simulated in person)."""
    if all(stand_in[member] == member for member in group):
        return None
    if any(stand_in[member] != npu for member in group):
        return "its group holds NPUs that another representative stands in for"
    if any(lines.dim == FLAT for lines in phases_of(group, grid)):
        return "its group is not laid out along the topology's dimensions"
    cut = blocks.grid
    members = set(group)
    origin = cut.coords(npu)
    for member in group:
        shift = [c - o for c, o in zip(cut.coords(member), origin)]
        moved = {cut.npu_at([(c + d) % size for c, d, size in zip(cut.coords(q), shift, cut.sizes)]) for q in group}
        if moved != members:
            whole = [
                f"; dimension {dim} is not cut into blocks: {why}"
                for dim, why in sorted(blocks.whole.items())
                if len({grid.coordinate(m, dim) for m in group}) > 1
            ]
            return "the translations between its members do not carry it onto itself" + "".join(whole)
    return None
