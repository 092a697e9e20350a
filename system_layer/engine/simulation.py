"""One simulation: wire the graphs, the scheduler and the network federate, run, and collect the results.

The result's per-NPU, per-link and reduction figures are read from what ran in
:mod:`stratasim.system_layer.engine.result_parts`; blocks run whole are recorded by
:class:`~stratasim.system_layer.engine.macros.BlockRecorder`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from stratasim.kernel.contracts import ComputeBackend, LineConflict, LineNetwork, NetworkBackend
from stratasim.kernel.errors import SimulationError
from stratasim.kernel.events import Progress, RunStopped
from stratasim.kernel.grid import Grid
from stratasim.system_layer.engine.collective_table import CollectiveTable
from stratasim.system_layer.engine.contention import Contention
from stratasim.system_layer.engine.coordinator import Coordinator
from stratasim.system_layer.engine.executor import NpuExecutor
from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.system_layer.engine.line_batches import LineBatches, batchable
from stratasim.system_layer.engine.macros import BlockRecorder
from stratasim.system_layer.engine.npu_failures import NpuFailures
from stratasim.system_layer.engine.perturbation import Perturbation
from stratasim.system_layer.engine.plan_runs import (
    PlanRun,
    count_runs,
    distinct,
    physical_grid,
    plan_runs,
)
from stratasim.system_layer.engine.pricing import Pricing, price_devices
from stratasim.system_layer.engine.result_parts import (
    link_busy,
    link_stats,
    milestones,
    packet_latency,
    per_npu,
    reductions_run,
)
from stratasim.system_layer.engine.simulation_scope import Scope, jobs_of, scope_of
from stratasim.system_layer.operators import OperatorPricer
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.result import SimulationResult
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler, SchedulerContext, deadlock_cause
from stratasim.system_layer.scheduler.reduction import ReductionCost
from stratasim.system_layer.trace import TraceDetail, TraceRecorder, TraceSelection
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
    device_of: Mapping[int, str] | None = None,
    calibration: compute_pb2.Calibration | None = None,
    representatives: Sequence[int] | None = None,
    record_trace: bool | TraceSelection = False,
    progress: Progress | None = None,
    sample: int = 0,
    contention: Mapping[str, Contention] | None = None,
    node_times: bool = False,
) -> SimulationResult:
    """Run one execution graph per NPU (index = NPU id) on ``network`` and return what happened; ``compute``
    prices operators on ``device`` (with ``calibration``, when given), or on ``device_of[npu]`` for the NPUs it
    names (NPU groups running other devices: each distinct operator is priced once per device); ``record_trace`` keeps the busy spans of
    nodes and links for a trace: all of them (True) or those a :class:`TraceSelection` selects; ``progress`` is
    told now and then how far the event loop got (simulated ps, events and messages processed); ``sample``
    numbers the Monte-Carlo sample of the options' ``variability`` drawn (seed + sample); ``contention`` slows
    the compute of each device it names while the NPU's collectives run
    (:mod:`stratasim.system_layer.engine.contention`); ``node_times`` splits each NPU's time by node
    (``NpuStats.node_times``, for the per-layer breakdown), at a cost in speed: off, the engine keeps no per-node
    figures at all.

    With ``representatives`` (see :class:`~stratasim.kernel.contracts.SymmetricWorkload`) only the representatives'
    graphs are read and simulated when :mod:`stratasim.system_layer.symmetry.stand_ins` finds that exact; otherwise
    every NPU is; when ``slowdown`` slows an NPU otherwise than its stand-in, or with any ``variability``, every NPU
    is, and the result's notes say so (:mod:`stratasim.system_layer.engine.perturbation`). The steps: :func:`~stratasim.system_layer.engine.simulation_scope.scope_of` (which NPUs, which fast paths), :func:`_ready_plans` (plan, inline,
    price, fuse), :func:`_wire` (coordinator, schedulers, executors), :func:`_run` and :func:`_result`.
    """
    selection = TraceSelection() if record_trace is True else record_trace or None
    info = network.configure(_configured(topology, record_links=bool(selection), cancellable=bool(options.failures)))
    perturbation = Perturbation.of(options, len(graphs), sample)
    others = {npu: name for npu, name in (device_of or {}).items() if name != device}
    scope, runs, grid = scope_of(
        graphs, network, info, topology, options, representatives, selection, perturbation, others
    )
    scope.jobs = jobs_of(graphs, scope)
    scope.node_times = node_times
    names = [device, *sorted(set(others.values()))]
    pricers = None if compute is None else {name: OperatorPricer(compute, name, calibration) for name in names}
    pricing = _ready_plans(scope, runs, device, pricers, contention)
    failures = NpuFailures(options.failures, graphs) if options.failures else None
    scope.lines = network if isinstance(network, LineNetwork) else None
    reduction = partial(_reduction_cost, options, device, pricers, others)
    engine, stopped, unfinished = _wire_and_run(scope, runs, grid, pricing, reduction, failures, progress)
    result = _result(scope, engine, pricing, count_runs(runs, scope.stand_in, scope.npus), stopped, unfinished)
    _release(engine)
    return result


@dataclass
class _Engine:
    """The wired engine of one simulation: the coordinator, the schedulers' context, the collective table and one
    executor per simulated NPU."""

    coordinator: Coordinator
    reduction: ReductionCost
    context: SchedulerContext
    table: CollectiveTable
    executors: dict[int, NpuExecutor]
    recorder: TraceRecorder | None
    runs: dict[int, PlanRun]
    failures: NpuFailures | None = None


def _ready_plans(
    scope: Scope,
    runs: dict[int, PlanRun],
    device: str,
    pricers: Mapping[str, OperatorPricer] | None,
    contention: Mapping[str, Contention] | None,
) -> Pricing:
    """Inline the blocks not run whole, price every distinct plan on its device (``device``: the simulation's),
    and fuse the compute runs of the plans whose nodes the trace need not show one by one (fusing gives the same
    times, except where collectives slow compute: a node's slow-down is its own)."""
    distinct_runs = distinct(runs)
    by_device: dict[str, list[GraphPlan]] = {device: []}
    for run in distinct_runs:
        run.inline()
        by_device.setdefault(run.device or device, []).append(run.plan)
    pricing = price_devices(by_device, pricers, contention)
    for run in distinct_runs:
        run.take_prices(pricing)
    shown = _shown_node_by_node(scope, runs)
    dynamic = scope.perturbation is not None and scope.perturbation.dynamic  # each node's own time, not a run's
    dynamic = dynamic or bool(scope.options.failures)  # a failure stops the node running, not a run of nodes
    for run in distinct_runs:
        if run not in shown and not dynamic and not (run.slow and run.communicates()):
            run.fuse(members=scope.node_times)
    return pricing


def _reduction_cost(
    options: SystemOptions, device: str, pricers: Mapping[str, OperatorPricer] | None, device_of: Mapping[int, str]
) -> ReductionCost:
    """What reducing costs each NPU: priced on its own device when reductions are priced and NPU groups run
    different devices, else one cost for all."""
    if pricers is None or options.reduction != "compute" or not device_of:
        return ReductionCost(options, None if pricers is None else pricers[device])
    costs = {name: ReductionCost(options, pricer, device=name) for name, pricer in pricers.items() if name != device}
    return ReductionCost(options, pricers[device], {npu: costs[name] for npu, name in device_of.items()}, device)


def _shown_node_by_node(scope: Scope, runs: dict[int, PlanRun]) -> set[PlanRun]:
    """The plan runs of the traced NPUs when the trace shows nodes (or blocks) one by one: left unfused."""
    selection = scope.selection
    if selection is None or selection.detail not in (TraceDetail.NODES, TraceDetail.BLOCKS):
        return set()
    return {runs[npu] for npu in scope.traced}


def _wire(
    scope: Scope,
    runs: dict[int, PlanRun],
    grid: Grid,
    pricing: Pricing,
    reduction: ReductionCost,
    failures: NpuFailures | None,
) -> _Engine:
    """The coordinator, the schedulers' shared context, the collective table and one executor per simulated NPU,
    each scheduled to start at its graph's ``start_ps`` (0 unless a job starts later); the ``failures`` scheduled
    first, so a failure at a time comes before anything else at that time."""
    options, direct = scope.options, scope.direct
    coordinator = Coordinator(
        scope.network, scope.info.lookahead_ps, options.endpoint_delay, direct=direct, jobs=scope.jobs
    )
    recorder = None if scope.selection is None else TraceRecorder(scope.selection, scope.traced)
    context = SchedulerContext(
        coordinator,
        options,
        reduction,
        stand_ins=scope.stand_in,
        replay_phases=scope.info.stateless and not options.failures,
        trace=recorder,
        line_batches=_line_batches(scope, runs, coordinator, reduction, recorder),
        node_times=scope.node_times,
    )
    table = CollectiveTable(grid, options, scope.npus)
    blocks = _block_recorder(scope, runs, reduction, grid)
    executors: dict[int, NpuExecutor] = {}
    if failures is not None:
        failures.wire(coordinator, executors, context.schedulers, table)
    for npu in scope.simulated:
        context.schedulers[npu] = NpuScheduler(npu, context)
        run = runs[npu]
        executors[npu] = NpuExecutor(
            npu, run.plan, run.durations, context.schedulers[npu], table, context, run.slow, queue=coordinator.queue
        )
        if blocks is not None and run.whole:
            executors[npu].runs = blocks.runs_of(npu, run.plan, pricing, npu in scope.traced)
        coordinator.schedule(run.graph.start_ps, executors[npu].start)
    if scope.perturbation is not None:
        coordinator.jitter = scope.perturbation.jitter
        for npu, executor in executors.items():
            executor.speed = scope.perturbation.speeds[npu]
    for executor in executors.values():
        executor.peers = executors
    return _Engine(coordinator, reduction, context, table, executors, recorder, runs, failures)


def _wire_and_run(
    scope: Scope,
    runs: dict[int, PlanRun],
    grid: Grid,
    pricing: Pricing,
    reduction: Callable[[], ReductionCost],
    failures: NpuFailures | None,
    progress: Progress | None,
) -> tuple[_Engine, RunStopped | None, int]:
    """:func:`_wire` then :func:`_run`. When a message comes before crossings a network decided ahead for lock-step
    lines (:class:`~stratasim.kernel.contracts.LineConflict`), the network starts over and so does the run, every
    message sent one by one."""
    engine = _wire(scope, runs, grid, pricing, reduction(), failures)
    try:
        stopped, unfinished = _run(engine, progress)
    except LineConflict:
        assert scope.lines is not None
        scope.lines.line_reset()
        scope.lines = None
        engine = _wire(scope, runs, grid, pricing, reduction(), failures)
        stopped, unfinished = _run(engine, progress)
    return engine, stopped, unfinished


def _line_batches(
    scope: Scope,
    runs: dict[int, PlanRun],
    coordinator: Coordinator,
    reduction: ReductionCost,
    recorder: TraceRecorder | None,
) -> LineBatches | None:
    """Whole lines of NPUs run a phase at once when messages are priced on the spot (or the network decides a
    line's crossings: :class:`LineNetwork`, for a single job), every NPU is simulated and reduces at one cost, no
    trace is recorded, no NPU is slowed or varied and every plan does one thing at a time (:func:`batchable`);
    None otherwise."""
    network = scope.direct or (scope.lines if scope.jobs is None else None)
    if network is None or scope.stand_in is not None or recorder is not None or scope.perturbation is not None:
        return None
    if scope.options.failures:  # a line's phase run at once cannot stop midway
        return None
    if not reduction.uniform:
        return None
    if not batchable([run.plan for run in distinct(runs)], scope.options):
        return None
    return LineBatches(coordinator, network, reduction, links=scope.direct is None)


def _block_recorder(
    scope: Scope, runs: dict[int, PlanRun], reduction: ReductionCost, grid: Grid
) -> BlockRecorder | None:
    """What records the blocks run whole, when some plan runs one whole (on a direct network only)."""
    if scope.direct is None or not any(run.whole for run in runs.values()):
        return None
    return BlockRecorder(
        scope.network,
        scope.direct,
        scope.info.lookahead_ps,
        scope.options,
        reduction,
        grid,
        scope.npus,
        scope.stand_in,
        scope.selection.detail if scope.selection else None,
        scope.node_times,
    )


def _run(engine: _Engine, progress: Progress | None) -> tuple[RunStopped | None, int]:
    """Run the event loop to its end, or until a budget stops it (then what was still running ends now); the
    stop, if any, and how many collectives were in flight. A run that ends with work left is a deadlock."""
    coordinator = engine.coordinator
    stopped: RunStopped | None = None
    unfinished = 0
    try:
        coordinator.run(progress)
    except RunStopped as exc:
        stopped = exc
        for executor in engine.executors.values():
            if not executor.done:
                executor.stop(coordinator.now)
                engine.context.schedulers[executor.npu].stop(coordinator.now)
        for collective in engine.table.all:  # in flight when stopped: they ran until then
            if collective.start_ps is not None and not collective.end_ps:
                collective.end_ps = coordinator.now
                unfinished += 1
    stuck = [ex.npu for ex in engine.executors.values() if not ex.done]
    if stuck and stopped is None:
        raise SimulationError(
            f"deadlock at {coordinator.now} ps: NPUs {stuck[:8]}{'...' if len(stuck) > 8 else ''} still have work "
            f"but nothing can happen: {deadlock_cause(engine.context.schedulers)}"
        )
    for executor in engine.executors.values():
        executor.settle_blocks()
    _check_time_fits(coordinator.now)
    return stopped, unfinished + (engine.failures.unfinished if engine.failures else 0)


def _result(
    scope: Scope,
    engine: _Engine,
    pricing: Pricing,
    plan_runs: dict[GraphPlan, int],
    stopped: RunStopped | None,
    unfinished: int,
) -> SimulationResult:
    """What happened, gathered from the executors, schedulers, collective table, trace and network."""
    coordinator, recorder, selection = engine.coordinator, engine.recorder, scope.selection
    collectives = engine.table.ordered()
    if recorder:
        recorder.name_collectives()
    link_counters = scope.network.counters()
    return SimulationResult(
        total_time_ps=max((ex.finish_ps for ex in engine.executors.values()), default=0),
        npus=scope.npus,
        collectives=collectives,
        per_npu=per_npu(engine.executors, engine.context.schedulers, engine.runs, scope.stand_in, scope.npus),
        spans=recorder.spans.sort() if recorder else (),
        events_processed=coordinator.queue.processed + coordinator.messages,
        simulated_npus=len(scope.simulated),
        links=link_stats(link_counters),
        milestones=milestones(engine.executors),
        counters=tuple(recorder.samples()) if recorder else (),
        link_busy=link_busy(link_counters, selection) if selection else (),
        packet_latency=packet_latency(link_counters),
        operators=pricing.operator_stats(plan_runs, reductions_run(engine.context, scope.stand_in)),
        stand_ins=scope.stand_in or (),
        trace_detail=selection.detail.value if selection else "",
        traced_nodes=scope.traced_nodes,
        stopped_at_ps=None if stopped is None else coordinator.now,
        stopped_because="" if stopped is None else stopped.reason,
        unfinished_collectives=unfinished,
        notes=scope.notes,
        failures=tuple(engine.failures.stats) if engine.failures else (),
    )


def _release(engine: _Engine) -> None:
    """Break the engine's reference cycles (executors know their peers, schedulers their context, chunk runs
    their collective) once the results are out, so reference counting frees a finished simulation at once
    rather than leaving millions of objects to a pass of the cyclic garbage collector."""
    for executor in engine.executors.values():
        executor.peers = {}
    engine.context.schedulers.clear()
    for collective in engine.table.all:
        collective.release()


def _configured(topology: network_pb2.Topology, record_links: bool, cancellable: bool) -> network_pb2.Topology:
    """``topology`` asking a network that models links to record when each link is busy (``record_links``, for
    the trace) and to keep what it needs to take a failed job's messages off (``cancellable``)."""
    if not (record_links or cancellable):
        return topology
    configured = network_pb2.Topology()
    configured.CopyFrom(topology)
    configured.record_link_busy |= record_links
    configured.cancellable |= cancellable
    return configured


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
    plan_runs({npu: graphs[npu] for npu in checked}, npus, physical_grid(topology, npus), options)


def _check_time_fits(now_ps: int) -> None:
    """Refuse a run whose simulated time went beyond the int64 picoseconds the wire and the report hold."""
    if now_ps > 2**63 - 1:
        raise SimulationError(
            f"the run reached {now_ps / 1e12:.3g} s, beyond the int64 picoseconds (about 106 days) a report holds; "
            "check the study's sizes and bandwidths (network.topology, workload)"
        )
