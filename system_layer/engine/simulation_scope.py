"""What one simulation covers: which NPUs are simulated (all, or the stand-ins symmetry finds), their plan runs,
and which of the engine's fast paths the run takes (a network asked directly, blocks run whole, the trace's detail).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from stratasim.kernel.contracts import DirectNetwork, LineNetwork, NetworkBackend
from stratasim.kernel.grid import Grid
from stratasim.system_layer.engine.perturbation import Perturbation
from stratasim.system_layer.engine.plan_runs import (
    PlanRun,
    mark_blocks_run_whole,
    physical_grid,
    plan_runs,
    unrolled_size,
)
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.symmetry.stand_ins import DEVICES_DIFFER, SLOWDOWNS_DIFFER, stand_ins
from stratasim.system_layer.trace import AUTO_NODE_LIMIT, TraceDetail, TraceSelection
from stratasim.v1 import network_pb2, workload_pb2

__all__ = ["Scope", "scope_of", "jobs_of"]


@dataclass
class Scope:
    """What one simulation covers and which of the engine's fast paths it takes.

    ``direct``: the network prices messages on the spot (stateless), so the coordinator asks it directly, phases
    replay and blocks may run whole; ``stand_in``: the NPU simulated in each NPU's place (None: every NPU is
    simulated); ``selection`` and ``traced``: the trace asked for and the simulated NPUs it shows; ``perturbation``
    the sample's slow-downs and variability (None: none), which turn off the paths simulating one block or line of
    NPUs for many (and the stand-ins, unless every NPU is slowed as its stand-in), and ``notes`` what the report should say about it (also when NPU groups on different devices turn
    the symmetry shortcut off); ``jobs``: the job each NPU runs when some NPU runs a job other than 0 (None: one
    job), read once from each simulated NPU's graph; ``node_times``: whether each NPU's time is charged to its nodes.
    """

    network: NetworkBackend
    info: network_pb2.NetworkInfo
    options: SystemOptions
    npus: int
    simulated: list[int]
    stand_in: tuple[int, ...] | None
    direct: DirectNetwork | None
    selection: TraceSelection | None
    traced: list[int]
    traced_nodes: int = 0
    perturbation: Perturbation | None = None
    notes: tuple[str, ...] = ()
    jobs: tuple[int, ...] | None = None
    node_times: bool = False
    lines: LineNetwork | None = None


def scope_of(
    graphs: Sequence[workload_pb2.ExecutionGraph],
    network: NetworkBackend,
    info: network_pb2.NetworkInfo,
    topology: network_pb2.Topology,
    options: SystemOptions,
    representatives: Sequence[int] | None,
    selection: TraceSelection | None,
    perturbation: Perturbation | None,
    device_of: Mapping[int, str],
) -> tuple[Scope, dict[int, PlanRun], Grid]:
    """Which NPUs to simulate (all, or the stand-ins symmetry finds), their plan runs (by graph and device) and the
    collectives' grid, and the fast paths the run takes (:func:`_direct`, blocks run whole, the trace's detail)."""
    npus = len(graphs)
    physical = physical_grid(topology, npus)
    stand_in, why = stand_ins(graphs, info, options, physical, representatives, device_of)
    notes: tuple[str, ...] = ()
    if why == DEVICES_DIFFER:
        notes = (f"symmetry shortcut off: {why}, so every NPU is simulated",)
    if why == SLOWDOWNS_DIFFER:
        notes = (
            f"{why}, so the symmetry shortcut is off: all {npus} NPUs were simulated one by one (exact, but slower)",
        )
    if options.failures and stand_in is not None:
        stand_in = None
        notes = (
            f"system.failures stops some NPUs, so the symmetry shortcut is off: all {npus} NPUs were simulated one "
            "by one (exact, but slower)",
        )
    simulated = sorted(set(stand_in)) if stand_in is not None else list(range(npus))
    runs, grid = plan_runs({npu: graphs[npu] for npu in simulated}, npus, physical, options, device_of)
    reduces = options.uses_nccl and any(dim.in_network_reduction for dim in topology.dimensions)
    direct = _direct(network, info, reduces)
    traced = [] if selection is None else _traced(simulated, stand_in, selection)
    scope = Scope(network, info, options, npus, simulated, stand_in, direct, selection, traced, 0, perturbation, notes)
    if direct is not None and perturbation is None and not options.failures:  # a block run once for all NPUs
        mark_blocks_run_whole(runs, stand_in, npus)
    scope.traced_nodes = sum(unrolled_size(runs[npu].plan) for npu in traced)
    scope.selection = _trace_detail(scope, runs)
    return scope, runs, grid


def jobs_of(graphs: Sequence[workload_pb2.ExecutionGraph], scope: Scope) -> tuple[int, ...] | None:
    """The job of each NPU, its own graph's or (with stand-ins) its stand-in's; None when every NPU runs job 0, so
    a single-job run sends its messages untagged."""
    if scope.direct is not None:  # a network that prices messages on the spot models no links to count jobs on
        return None
    job = {npu: graphs[npu].job for npu in scope.simulated}
    if not any(job.values()):
        return None
    stand_in = scope.stand_in or range(scope.npus)
    return tuple(job[stand_in[npu]] for npu in range(scope.npus))


def _direct(network: NetworkBackend, info: network_pb2.NetworkInfo, reduces: bool) -> DirectNetwork | None:
    """The network, when it prices each message on the spot (stateless) and may be asked directly: a switch's
    reductions too when some switch may reduce (``reduces``), else it runs by windows (a network served elsewhere)."""
    if not info.stateless or not isinstance(network, DirectNetwork):
        return None
    return network if not reduces or hasattr(network, "reduction_arrivals_ps") else None


def _trace_detail(scope: Scope, runs: dict[int, PlanRun]) -> TraceSelection | None:
    """The selection with an automatic detail decided: blocks when traced NPUs run blocks whole and would show
    more than :data:`AUTO_NODE_LIMIT` nodes, nodes otherwise."""
    selection = scope.selection
    if selection is None or selection.detail is not TraceDetail.AUTO:
        return selection
    blocks_whole = any(runs[npu].whole for npu in scope.traced)
    many = blocks_whole and scope.traced_nodes > AUTO_NODE_LIMIT
    return replace(selection, detail=TraceDetail.BLOCKS if many else TraceDetail.NODES)


def _traced(simulated: list[int], stand_in: tuple[int, ...] | None, selection: TraceSelection) -> list[int]:
    """The simulated NPUs whose timelines the selection shows: selected, or standing for a selected NPU."""
    if selection.npus is None:
        return simulated
    if stand_in is None:
        return [npu for npu in simulated if npu in selection.npus]
    return sorted({stand_in[npu] for npu in selection.npus if npu < len(stand_in)})
