"""One simulation: wire the graphs, the scheduler and the network federate, run, and collect the results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from stratasim.kernel.contracts import ComputeBackend, DirectNetwork, NetworkBackend
from stratasim.kernel.errors import SimulationError, WorkloadError
from stratasim.kernel.events import Progress, RunStopped
from stratasim.kernel.grid import Grid
from stratasim.system_layer.engine.block_run import BlockRun
from stratasim.system_layer.engine.blocks import inline_blocks
from stratasim.system_layer.engine.collective_table import CollectiveTable
from stratasim.system_layer.engine.coordinator import Coordinator
from stratasim.system_layer.engine.executor import NpuExecutor
from stratasim.system_layer.engine.fusion import fuse_compute_runs
from stratasim.system_layer.engine.graph_plan import GraphPlan, plan_graph
from stratasim.system_layer.engine.line_batches import LineBatches, batchable
from stratasim.system_layer.engine.macros import BlockRecorder, runnable_whole
from stratasim.system_layer.engine.pricing import price_plans
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.result import (
    LinkBusy,
    LinkStats,
    NpuStats,
    PacketLatencyStats,
    SimulationResult,
)
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler, SchedulerContext
from stratasim.system_layer.scheduler.reduction import ReductionCost
from stratasim.system_layer.symmetry.stand_ins import stand_ins
from stratasim.system_layer.trace import AUTO_NODE_LIMIT, TraceDetail, TraceRecorder, TraceSelection
from stratasim.v1 import compute_pb2, network_pb2, workload_pb2

__all__ = ["simulate", "validate"]


def simulate(
    graphs: Sequence[workload_pb2.ExecutionGraph],
    network: NetworkBackend,
    topology: network_pb2.Topology,
    options: SystemOptions,
    *,
    compute: ComputeBackend | None = None,
    device: str = "",
    calibration: compute_pb2.Calibration | None = None,
    representatives: Sequence[int] | None = None,
    record_trace: bool | TraceSelection = False,
    progress: Progress | None = None,
) -> SimulationResult:
    """Run one execution graph per NPU (index = NPU id) on ``network`` and return what happened; ``compute``
    prices operators on ``device`` (with ``calibration``, when given); ``record_trace`` keeps the busy spans of
    nodes and links for a trace: all of them (True) or those a :class:`TraceSelection` selects; ``progress`` is
    told now and then how far the event loop got (simulated ps, events and messages processed).

    With ``representatives`` (see :class:`~stratasim.kernel.contracts.SymmetricWorkload`) only the representatives'
    graphs are read and simulated when :mod:`stratasim.system_layer.symmetry.stand_ins` finds that exact; otherwise every NPU is.
    """
    selection = TraceSelection() if record_trace is True else record_trace or None
    info = network.configure(_recording_links(topology) if selection else topology)
    npus = len(graphs)
    physical = _physical_grid(topology, npus)
    stand_in, _ = stand_ins(graphs, info, options, physical, representatives)
    simulated = sorted(set(stand_in)) if stand_in is not None else list(range(npus))
    plans, grid = _prepare({npu: graphs[npu] for npu in simulated}, npus, physical, options)
    direct = network if info.stateless and isinstance(network, DirectNetwork) else None
    traced = [] if selection is None else _traced(simulated, stand_in, selection)
    whole = _blocks_run_whole(plans, graphs, simulated, stand_in, direct is not None)
    traced_nodes = sum(_unrolled_size(plans[id(graphs[npu])]) for npu in traced)
    if selection is not None and selection.detail is TraceDetail.AUTO:
        blocks_whole = any(whole.get(id(graphs[npu])) for npu in traced)
        many = blocks_whole and traced_nodes > AUTO_NODE_LIMIT
        selection = replace(selection, detail=TraceDetail.BLOCKS if many else TraceDetail.NODES)
    owner = {id(graphs[npu]): npu for npu in simulated}
    for key, plan in list(plans.items()):
        plans[key] = inline_blocks(plan, keep=whole.get(key, ()), npu=owner[key])
    pricing = price_plans(list(plans.values()), compute, device, calibration)
    durations = dict(pricing.durations)
    energy_of = {npu: pricing.energies[id(plans[id(graphs[npu])])] for npu in simulated}
    plan_runs = Counter(id(plans[id(graphs[npu if stand_in is None else stand_in[npu]])]) for npu in range(npus))
    # Node spans need every node of the NPUs traced; fusing the others' compute runs gives the same times.
    by_node = selection is not None and selection.detail in (TraceDetail.NODES, TraceDetail.BLOCKS)
    unfused = {id(graphs[npu]) for npu in traced} if by_node else set()
    for key, plan in list(plans.items()):
        if key not in unfused:
            fused, fused_durations = fuse_compute_runs(plan, durations[id(plan)])
            plans[key] = fused
            durations[id(fused)] = fused_durations
    coordinator = Coordinator(network, info.lookahead_ps, options.endpoint_delay, direct=direct)
    reduction = ReductionCost(options, compute, device, calibration)
    recorder = None if selection is None else TraceRecorder(selection, traced)
    batches = direct is not None and stand_in is None and recorder is None and batchable(plans.values(), options)
    context = SchedulerContext(
        coordinator,
        options,
        reduction,
        stand_ins=stand_in,
        replay_phases=info.stateless,
        trace=recorder,
        line_batches=LineBatches(coordinator, direct, reduction) if direct is not None and batches else None,
    )
    table = CollectiveTable(grid, options, npus)
    blocks = (
        None
        if direct is None or not whole
        else BlockRecorder(
            network,
            direct,
            info.lookahead_ps,
            options,
            reduction,
            grid,
            npus,
            stand_in,
            selection.detail if selection else None,
        )
    )
    executors: dict[int, NpuExecutor] = {}
    for npu in simulated:
        context.schedulers[npu] = NpuScheduler(npu, context)
        plan = plans[id(graphs[npu])]
        executors[npu] = NpuExecutor(npu, plan, durations[id(plan)], context.schedulers[npu], table, context)
        if blocks is not None and id(graphs[npu]) in whole:
            executors[npu].runs = _block_runs(blocks, npu, plan, durations, npu in traced)
        coordinator.schedule(0, executors[npu].start)
    for executor in executors.values():
        executor.peers = executors
    stopped: RunStopped | None = None
    unfinished = 0
    try:
        coordinator.run(progress)
    except RunStopped as exc:
        stopped = exc
        for executor in executors.values():
            if not executor.done:
                executor.finish_ps = coordinator.now
        for collective in table.all:  # in flight when stopped: they ran until then
            if collective.start_ps is not None and not collective.end_ps:
                collective.end_ps = coordinator.now
                unfinished += 1
    stuck = [ex.npu for ex in executors.values() if not ex.done]
    if stuck and stopped is None:
        raise SimulationError(
            f"deadlock at {coordinator.now} ps: NPUs {stuck[:8]}{'...' if len(stuck) > 8 else ''} still have work "
            "but nothing can happen (a collective some group members never issue?)"
        )
    for executor in executors.values():
        executor.settle_blocks()
    reduction_energy = {npu: _reduction_energy(scheduler, reduction) for npu, scheduler in context.schedulers.items()}
    stats = {
        npu: _npu_stats(ex, context.schedulers[npu], energy_of[npu] + reduction_energy[npu])
        for npu, ex in executors.items()
    }
    if stand_in is None:
        per_npu = [stats[npu] for npu in range(npus)]
    else:  # every NPU lived its representative's timeline
        per_npu = [replace(stats[stand_in[npu]], npu=npu) for npu in range(npus)]
    milestones: dict[str, int] = {}
    for executor in executors.values():
        for name, time_ps in executor.milestones.items():
            milestones[name] = max(time_ps, milestones.get(name, time_ps))
    collectives = table.ordered()
    if recorder:
        recorder.name_collectives()
    _check_time_fits(coordinator.now)
    link_counters = network.counters()
    links = tuple(
        LinkStats(name, busy, size, messages)
        for name, busy, size, messages in zip(
            link_counters.link, link_counters.busy_ps, link_counters.bytes, link_counters.messages
        )
    )
    link_busy = _link_busy(link_counters, selection) if selection else ()
    latency = link_counters.packet_latency
    packet_latency = PacketLatencyStats(
        latency.packets, latency.total_ps, latency.min_ps, latency.p50_ps, latency.p99_ps, latency.max_ps
    )
    result = SimulationResult(
        total_time_ps=max((ex.finish_ps for ex in executors.values()), default=0),
        npus=npus,
        collectives=collectives,
        per_npu=tuple(per_npu),
        spans=recorder.spans.sort() if recorder else (),
        events_processed=coordinator.queue.processed + coordinator.messages,
        simulated_npus=len(simulated),
        links=links,
        milestones=milestones,
        counters=tuple(recorder.samples()) if recorder else (),
        link_busy=link_busy,
        packet_latency=packet_latency,
        operators=pricing.operator_stats(plan_runs, _reductions_run(context, reduction, stand_in)),
        stand_ins=stand_in or (),
        trace_detail=selection.detail.value if selection else "",
        traced_nodes=traced_nodes,
        stopped_at_ps=None if stopped is None else coordinator.now,
        stopped_because="" if stopped is None else stopped.reason,
        unfinished_collectives=unfinished,
    )
    _release(executors, context, table)
    return result


def _blocks_run_whole(
    plans: dict[int, GraphPlan],
    graphs: Sequence[workload_pb2.ExecutionGraph],
    simulated: list[int],
    stand_in: tuple[int, ...] | None,
    direct: bool,
) -> dict[int, frozenset[int]]:
    """By plan, the positions of the block nodes its NPU runs whole (:mod:`stratasim.system_layer.engine.macros`):
    on a network pricing messages on the spot, for a graph one simulated NPU runs."""
    if not direct:
        return {}
    owners = Counter(id(graphs[npu]) for npu in simulated)
    stands_in = (lambda member: member) if stand_in is None else stand_in.__getitem__
    whole = {}
    for npu in simulated:
        key = id(graphs[npu])
        if owners[key] == 1:
            positions = runnable_whole(plans[key], npu, stands_in, len(graphs))
            if positions:
                whole[key] = positions
    return whole


def _unrolled_size(plan: GraphPlan) -> int:
    """How many nodes ``plan`` runs, each block node counted as the nodes of its block."""
    sizes = [_unrolled_size(block) for block in plan.blocks]
    block = workload_pb2.BLOCK_NODE
    return sum(sizes[node.block] if node.type == block else 1 for node in plan.nodes)


def _block_runs(
    blocks: BlockRecorder, npu: int, plan: GraphPlan, durations: dict[int, tuple[int, ...]], traced: bool
) -> dict[int, BlockRun]:
    """What each block node left in ``plan`` does when run whole (and shows in the trace, if ``traced``),
    recorded once per block."""
    recorded: dict[int, BlockRun] = {}
    runs = {}
    for index, node in enumerate(plan.nodes):
        if node.type == workload_pb2.BLOCK_NODE:
            run = recorded.get(node.block)
            if run is None:
                block = plan.blocks[node.block]
                run = recorded[node.block] = blocks.record(npu, block, durations[id(block)], traced)
            runs[index] = run
    return runs


def _release(executors: dict[int, NpuExecutor], context: SchedulerContext, table: CollectiveTable) -> None:
    """Break the engine's reference cycles (executors know their peers, schedulers their context, chunk runs
    their collective) once the results are out, so reference counting frees a finished simulation at once
    rather than leaving millions of objects to a pass of the cyclic garbage collector."""
    for executor in executors.values():
        executor.peers = {}
    context.schedulers.clear()
    for collective in table.all:
        collective.release()


def _link_busy(counters: network_pb2.LinkCounters, selection: TraceSelection) -> tuple[LinkBusy, ...]:
    """When each link was transmitting, within the selection's window (links idle throughout left out)."""
    busy = (
        (link.link, [s for s in zip(link.start_ps, link.end_ps) if selection.overlaps(*s)]) for link in counters.busy
    )
    return tuple(LinkBusy(link, tuple(stretches)) for link, stretches in busy if stretches)


def _traced(simulated: list[int], stand_in: tuple[int, ...] | None, selection: TraceSelection) -> list[int]:
    """The simulated NPUs whose timelines the selection shows: selected, or standing for a selected NPU."""
    if selection.npus is None:
        return simulated
    if stand_in is None:
        return [npu for npu in simulated if npu in selection.npus]
    return sorted({stand_in[npu] for npu in selection.npus if npu < len(stand_in)})


def _recording_links(topology: network_pb2.Topology) -> network_pb2.Topology:
    """``topology`` asking a network that models links to record when each link is busy, for the trace."""
    recording = network_pb2.Topology()
    recording.CopyFrom(topology)
    recording.record_link_busy = True
    return recording


def _reduction_energy(scheduler: NpuScheduler, reduction: ReductionCost) -> float:
    """Picojoules of the priced reductions one NPU's collectives ran, summed by size in a fixed order."""
    return sum(
        (count * reduction.operator(size)[1].energy_pj for size, count in sorted(scheduler.reductions.items())), 0.0
    )


def _reductions_run(
    context: SchedulerContext, reduction: ReductionCost, stand_in: tuple[int, ...] | None
) -> list[tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorCost, int]]:
    """Each priced reduction size as an operator with its cost and how many times all NPUs ran it."""
    stands_for = Counter(stand_in if stand_in is not None else list(context.schedulers))
    runs: Counter[int] = Counter()
    for npu, scheduler in context.schedulers.items():
        for size, count in scheduler.reductions.items():
            runs[size] += count * stands_for[npu]
    return [(*reduction.operator(size), count) for size, count in sorted(runs.items())]


def _npu_stats(executor: NpuExecutor, scheduler: NpuScheduler, energy_pj: float) -> NpuStats:
    resident = executor.plan.resident
    return NpuStats(
        executor.npu,
        executor.finish_ps,
        executor.compute_ps,
        scheduler.comm_ps,
        executor.finish_ps - executor.compute_ps,
        tuple(sorted(scheduler.bytes_sent.items())),
        exposed_comm_ps_by_kind=tuple(sorted(executor.exposed_ps.items())),
        peak_memory_bytes=sum(size for _, size in resident) + executor.peak_memory,
        peak_memory_ps=executor.peak_memory_ps,
        memory_at_peak=(*resident, ("working", executor.peak_memory)) if resident or executor.peak_memory else (),
        compute_energy_pj=energy_pj,
        p2p_bytes_per_dim=executor.p2p_bytes_per_dim(),
    )


def validate(
    graphs: Sequence[workload_pb2.ExecutionGraph],
    topology: network_pb2.Topology,
    options: SystemOptions,
    representatives: Sequence[int] | None = None,
) -> None:
    """Every check ``simulate`` makes before it starts: graphs, groups, algorithms against line sizes (of the
    representatives' graphs only, when the workload declares some)."""
    npus = len(graphs)
    checked = sorted(set(representatives)) if representatives is not None else range(npus)
    _prepare({npu: graphs[npu] for npu in checked}, npus, _physical_grid(topology, npus), options)


def _physical_grid(topology: network_pb2.Topology, npus: int) -> Grid:
    physical = Grid.of(topology)
    if npus > physical.npus:
        raise WorkloadError(f"workload needs {npus} NPUs but the topology has {physical.npus}")
    return physical


def _prepare(
    graphs: dict[int, workload_pb2.ExecutionGraph], npus: int, physical: Grid, options: SystemOptions
) -> tuple[dict[int, GraphPlan], Grid]:
    """Check the graphs of the NPUs to simulate and plan every distinct collective once, so an impossible study
    fails before it runs."""
    plans: dict[int, GraphPlan] = {}
    for npu, graph in graphs.items():
        if id(graph) not in plans:
            plans[id(graph)] = plan_graph(graph, npu, npus)
    grid = _logical_grid(physical, options)
    table = CollectiveTable(grid, options, npus)
    table.preflight(
        [
            node
            for plan in plans.values()
            for part in (plan, *plan.blocks)
            for node in part.nodes
            if node.type == workload_pb2.COMM_COLL_NODE
        ],
        foreign_names=any(plan.foreign_names for plan in plans.values()),
    )
    return plans, grid


def _logical_grid(physical: Grid, options: SystemOptions) -> Grid:
    """The grid collectives run on: the physical topology's, or the logical one the options name."""
    if options.logical_topology is None:
        return physical
    logical = Grid(options.logical_topology)
    if logical.npus != physical.npus:
        raise WorkloadError(
            f"system.logical_topology: {list(logical.sizes)} holds {logical.npus} NPUs but the physical topology "
            f"has {physical.npus}"
        )
    return logical


def _check_time_fits(now_ps: int) -> None:
    """Refuse a run whose simulated time went beyond the int64 picoseconds the wire and the report hold."""
    if now_ps > 2**63 - 1:
        raise SimulationError(
            f"the run reached {now_ps / 1e12:.3g} s, beyond the int64 picoseconds (about 106 days) a report holds; "
            "check the study's sizes and bandwidths (network.topology, workload)"
        )
