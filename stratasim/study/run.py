"""Run one study: build the workload and backends a :class:`~stratasim.config.Study` names, simulate, report.

This is the composition root: the only place that knows every layer. Backends run in-process (from the
registry), in a server spawned for the run, or at a remote endpoint; whichever it is, they are closed and
spawned servers stopped when the run ends, failed or not.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from fractions import Fraction
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from stratasim import system_layer
from stratasim.config.study_file import Study
from stratasim.kernel.contracts import (
    ComputeBackend,
    DeviceBalancedWorkload,
    MemoryModel,
    MultiJobWorkload,
    NetworkBackend,
    RoutedWorkload,
    ServingWorkload,
    SymmetricWorkload,
    TrainingWorkload,
    WorkloadSource,
)
from stratasim.kernel.errors import SimulationError, StrataSimError, WorkloadError
from stratasim.kernel.events import Progress
from stratasim.kernel.serving import RequestLevelWorkload
from stratasim.kernel.units import format_bytes, format_time_ps, ps_to_ns
from stratasim.report.jobs import JobFigures
from stratasim.report.report import Report
from stratasim.study.backends import open_backend
from stratasim.study.balance import balance_in_process, balanced_to_devices, wants_devices
from stratasim.study.budget import DEFAULT_BUDGET, Budget, check_budget, long_run_note
from stratasim.study.compute_setup import open_compute
from stratasim.study.contention import contention_of, contention_statement
from stratasim.study.device import StudyDevices, calibrations, check_device, check_groups, memory_capacity
from stratasim.study.economics import study_cost
from stratasim.study.failures import failure_warnings
from stratasim.study.goodput import check_goodput, study_goodput
from stratasim.study.samples import sample_count, sample_figures
from stratasim.study.serving_job_steps import (
    check_serving_jobs_of,
    replay_of,
    replayable_of,
    served_of,
    serving_jobs_of,
)
from stratasim.study.shard_casts import with_shard_casts
from stratasim.study.spawned_servers import start_servers
from stratasim.system_layer.trace import TraceSelection

if TYPE_CHECKING:
    from stratasim.remote import Spawned
    from stratasim.study.serving import ServedRun

__all__ = ["check_study", "prepare_workload", "run_study"]


def prepare_workload(study: Study) -> tuple[WorkloadSource | RequestLevelWorkload, int]:
    """Build the study's workload and the number of NPUs it runs on (all of the topology's if it names none).

    Raises :class:`WorkloadError` when the workload needs more NPUs than the topology has, or other than it has
    when its plan must fill the topology (``fills_topology``).
    """
    source = with_shard_casts(study).workload.build()
    available = study.npus
    check_goodput(study.goodput, source)
    required = source.npus_required()
    if required is not None and required > available:
        raise WorkloadError(f"workload needs {required} NPUs but the topology has {available} (network.topology)")
    if required is not None and required != available and getattr(source, "fills_topology", False):
        raise WorkloadError(
            f"workload: its plan runs on {required} NPUs but the topology (network.topology) has {available}; "
            "make the plan's degrees multiply to the topology's size"
        )
    return source, available if required is None else required


def check_study(study: Study, budget: Budget = DEFAULT_BUDGET) -> int:
    """Every check short of simulating: the study fits ``budget`` (estimated, before building anything), the
    workload builds and fits, its graphs and collectives can run on the topology with the chosen algorithms, an
    in-process compute device exists.

    Returns the number of NPUs the study would simulate. Remote and spawned backends are not contacted.
    """
    with _collector_paused():
        return _check_study(study, budget)


def _check_study(study: Study, budget: Budget) -> int:
    source, npus = prepare_workload(study)
    if isinstance(source, RequestLevelWorkload):
        from stratasim.study.serving import check_serving  # a serving study's loop: imported for one only

        sample_count(None, study.system, engine=False)
        check_serving(study, source, budget)
        return npus
    jobs = serving_jobs_of(source, npus)
    sample_count(None, study.system, engine=not jobs)
    source = balance_in_process(source, npus, study, contact_remote=False)
    estimate = check_budget(study, source, npus, budget)
    check_serving_jobs_of(study, jobs, budget)
    representatives = estimate.representatives or _representatives(source, study)
    system_layer.validate(source.graphs(npus), study.topology_proto(), study.system, representatives)
    section = study.compute
    if section is not None and section.endpoint is None and not section.spawn:
        with ExitStack() as stack:
            compute, _ = open_compute(section, stack)
            check_device(compute, section)
            check_groups(compute, section)
    return npus


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector switched off for the block, and back to how it was after it.

    Building and simulating a whole model allocates millions of long-lived containers (graph nodes, plans,
    chunk runs) and nothing the run frees is garbage only a cycle search would find, so the collector's
    repeated passes over the growing heap bought nothing and took some 40 % of a GPT-3 iteration's wall time.
    Reference counting still frees everything as usual; cycles left behind are collected once it is back on.
    What survived the block is moved to the oldest generation unscanned (``freeze`` then ``unfreeze``), so the
    collector's first pass afterwards does not walk the millions of objects allocated while it was off.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def run_study(
    study: Study,
    *,
    record_trace: bool | TraceSelection = False,
    progress: Progress | None = None,
    budget: Budget = DEFAULT_BUDGET,
    notes: Callable[[str], None] | None = None,
    samples: int | None = None,
    layers: bool = False,
) -> Report:
    """Simulate ``study`` and report it; with ``record_trace`` the report carries the busy spans for a trace
    (all of them, or those a :class:`~stratasim.system_layer.trace.TraceSelection` selects); ``progress`` hears
    now and then how far the simulation got (:data:`~stratasim.kernel.events.Progress`). A study estimated to
    exceed ``budget`` is refused before anything is built (:class:`~stratasim.study.budget.BudgetError`);
    ``notes`` hears, before the simulation starts, that a packet-level network predicts a long run
    (:func:`~stratasim.study.budget.long_run_note`). ``samples`` Monte-Carlo samples (else the study's
    ``system.variability.samples``, when it has variability) add the report's ``samples`` figures
    (:mod:`stratasim.study.samples`); every other figure is the first sample's. With ``layers`` the engine
    charges each NPU's time to its nodes and the report carries the per-layer breakdown (``Report.layers``, the
    JSON ``layers``; :mod:`stratasim.report.layers`), at a cost in speed; without it the report has none.

    ``wall_seconds`` in the report covers the simulation itself, not building the workload or starting servers.
    """
    with _collector_paused():
        return _run_study(study, record_trace, progress, budget, notes, samples, layers)


def _run_study(
    study: Study,
    record_trace: bool | TraceSelection,
    progress: Progress | None,
    budget: Budget,
    notes: Callable[[str], None] | None,
    samples: int | None,
    layers: bool = False,
) -> Report:
    backends: dict[str, str] = {}
    source, npus = prepare_workload(study)
    if isinstance(source, RequestLevelWorkload):
        from stratasim.study.serving import run_serving  # a serving study's loop: imported for one only

        sample_count(samples, study.system, engine=False)
        return run_serving(study, source, budget, record_trace=bool(record_trace), layers=layers)
    jobs = serving_jobs_of(source, npus)  # request-level serving jobs: each runs its own loop
    replays = replayable_of(study, source, jobs)  # ... replayed in the engine; the others' after it, apart
    count = sample_count(samples, study.system, engine=not jobs)
    with ExitStack() as stack:
        servers = start_servers(study, stack)  # first: they boot while the workload is checked and built
        source, opened = _balanced(study, source, npus, stack, servers, backends)
        estimate = check_budget(study, source, npus, budget)  # before a graph is built or a server configured
        check_serving_jobs_of(study, jobs, budget)
        if notes is not None and (line := long_run_note(study, estimate)) is not None:
            notes(line)
        representatives = estimate.representatives or _representatives(source, study)  # asked once: walks every NPU
        _check_selection(record_trace, npus)
        replayed, graphs, placed = replay_of(study, replays, jobs, source.graphs(npus), budget, estimate.memory)
        network, backends["network"] = open_backend("network", study.network, stack, servers)
        compute, devices = _compute(placed, stack, servers, backends) if opened is None else opened
        started = time.perf_counter()
        simulate = partial(
            system_layer.simulate,
            graphs,
            cast(NetworkBackend, network),
            study.topology_proto(),
            study.system,
            compute=compute,
            device="" if devices is None else devices.main,
            device_of=None if devices is None else devices.device_of,
            calibration=None
            if study.compute is None or study.compute.calibration is None
            else study.compute.calibration.proto(),
            representatives=representatives,
            progress=progress,
            contention=contention_of(study, devices),
            node_times=layers,
        )
        result = simulate(record_trace=record_trace)
        distribution = None
        if count is not None and result.stopped_at_ps is None:
            distribution = sample_figures(
                result, lambda sample: simulate(sample=sample), count, study.system.variability
            )
        wall_seconds = time.perf_counter() - started
    served, apart_seconds = served_of(study, jobs, replays, replayed, result, budget)
    wall_seconds += apart_seconds
    return _report(study, source, result, wall_seconds, backends, devices, distribution, served, frozenset(replayed))


def _report(
    study: Study,
    source: WorkloadSource,
    result: system_layer.SimulationResult,
    wall_seconds: float,
    backends: dict[str, str],
    devices: StudyDevices | None,
    distribution: dict[str, Any] | None,
    served: dict[int, ServedRun],
    replayed: frozenset[int] = frozenset(),
) -> Report:
    """The report of a simulated study: the engine's result with the warnings, figures and statements the study
    adds (calibration, memory, jobs and their ``served`` serving jobs, those ``replayed`` in the engine among them
    (by index), training and serving figures, cost at each
    device's rate, the Monte-Carlo ``distribution``)."""
    calibration, uncalibrated = calibrations(study.compute, {} if devices is None else devices.facts)
    if contended := contention_statement(study, devices):
        calibration = f"{calibration}; {contended}" if calibration else contended
    memory = _check_memory(study, result, devices)
    warnings = (*_stopped(result), *result.notes, *study.warnings, *uncalibrated, *memory)
    jobs: tuple[JobFigures, ...] = ()
    if isinstance(source, MultiJobWorkload):
        jobs, result, said = _jobs(study, source, result, served, replayed)
        warnings += tuple(warning for warning in dict.fromkeys(said) if warning not in warnings)
    warnings += failure_warnings(result, [job.name for job in jobs])
    serving = None
    training = None
    hourly = None if devices is None else devices.hourly_usd(result.npus)
    cost = None
    if result.stopped_at_ps is None:  # a stopped run's iteration or tokens per second would be meaningless
        training = _training_figures(source, result, hourly)
        if training is not None and study.goodput is not None:
            training["goodput"] = study_goodput(study.goodput, result, study.topology_proto(), source)
        if isinstance(source, ServingWorkload):
            serving = _priced(source.serving_figures(result.milestones, result.total_time_ps), hourly)
        if study.economics is not None:
            cost = study_cost(study, result.total_time_ps, training, serving)
    return Report(
        study.name,
        result,
        wall_seconds,
        backends,
        training,
        serving=serving,
        network_energy_per_bit_pj=study.network.energy_per_bit_pj(len(study.grid.sizes)),
        warnings=warnings,
        calibration=calibration,
        jobs=jobs,
        samples=distribution,
        devices=devices.counts(result.npus) if devices is not None and devices.device_of else None,
        torus_shape=_torus_shape(study),
        cost=cost,
    )


def _torus_shape(study: Study) -> tuple[int, ...]:
    """The shape of the study's torus or mesh fabric; empty on any other topology."""
    topology = study.topology_proto()
    return tuple(topology.torus.shape) if topology.WhichOneof("fabric") == "torus" else ()


def _jobs(
    study: Study,
    source: MultiJobWorkload,
    result: system_layer.SimulationResult,
    served: dict[int, ServedRun],
    replayed: frozenset[int],
) -> tuple[tuple[JobFigures, ...], system_layer.SimulationResult, tuple[str, ...]]:
    """A study of several jobs: each job's figures, the engine's result whose total time is the latest end of any
    job (a serving job's loop may end after the engine's last NPU), and the warnings of the jobs (interference the
    network cannot show, the serving jobs' devices)."""
    from stratasim.study.jobs import interference_warning, job_figures  # a study of several jobs only

    jobs = job_figures(source, result, served, replayed)
    end = max(job.end_ps for job in jobs)
    if end > result.total_time_ps:
        result = replace(result, total_time_ps=end)
    apart = [jobs[index].name for index in served if index not in replayed]
    warnings = interference_warning(study, len(jobs), apart, [jobs[index].name for index in sorted(replayed)])
    return jobs, result, (*warnings, *(warning for run in served.values() for warning in run.warnings))


def _compute(
    study: Study, stack: ExitStack, servers: dict[tuple[str, str], Spawned], backends: dict[str, str]
) -> tuple[ComputeBackend | None, StudyDevices | None]:
    """The study's compute backend (opened, its devices checked, its label in ``backends``) and its devices with
    their facts; None and None without a compute section."""
    if study.compute is None:
        return None, None
    compute, backends["compute"] = open_backend("compute", study.compute, stack, servers)
    return compute, StudyDevices.ask(compute, study.compute)


def _balanced(
    study: Study,
    source: WorkloadSource,
    npus: int,
    stack: ExitStack,
    servers: dict[tuple[str, str], Spawned],
    backends: dict[str, str],
) -> tuple[WorkloadSource, tuple[ComputeBackend | None, StudyDevices | None] | None]:
    """``source`` with its work split by device (:mod:`stratasim.study.balance`), before anything is built from it,
    and the compute backend and devices opened to price it (None when it splits nothing by device)."""
    if not wants_devices(source):
        return source, None
    opened = _compute(study, stack, servers, backends)
    return balanced_to_devices(source, npus, study, *opened), opened


def _stopped(result: system_layer.SimulationResult) -> tuple[str, ...]:
    """The warning a run stopped before its end carries first: when, and that its figures cover only that far."""
    if result.stopped_at_ps is None:
        return ()
    return (
        f"incomplete: the run was {result.stopped_because} at simulated time "
        f"{format_time_ps(result.stopped_at_ps)}; every figure covers the run up to then",
    )


def _check_selection(record_trace: bool | TraceSelection, npus: int) -> None:
    """A trace selection names NPUs of this study only."""
    if isinstance(record_trace, TraceSelection) and record_trace.npus:
        outside = sorted(npu for npu in record_trace.npus if npu >= npus)
        if outside:
            raise StrataSimError(
                f"--trace-npus names NPU {outside[0]}{' and others' if len(outside) > 1 else ''}, but the study has "
                f"{npus} NPUs (0-{npus - 1})"
            )


def _representatives(source: WorkloadSource, study: Study) -> tuple[int, ...] | None:
    """The NPUs the workload says stand for the others on this topology, if it says."""
    if not isinstance(source, SymmetricWorkload):
        return None
    representatives = source.representatives(study.grid)
    return None if representatives is None else tuple(representatives)


def _check_memory(study: Study, result: system_layer.SimulationResult, devices: StudyDevices | None) -> tuple[str, ...]:
    """Fail (or warn, with ``system.over_capacity: warn``) when an NPU's peak memory exceeds its capacity (its own
    device's); warn that memory went unchecked when the workload holds memory but no capacity is known."""
    known = {"": memory_capacity(study, None)} if devices is None else {}
    if devices is not None:
        known = {name: memory_capacity(study, fact) for name, fact in devices.facts.items()}
    capacity_of = {npu.npu: known["" if devices is None else devices.of(npu.npu)] for npu in result.per_npu}
    unchecked = [capacity_of[npu.npu][1] for npu in result.per_npu if capacity_of[npu.npu][0] is None]
    if unchecked and any(npu.peak_memory_bytes for npu in result.per_npu):
        return (f"memory not checked: {unchecked[0]}; set system.memory_capacity to check it",)
    over = [npu for npu in result.per_npu if npu.peak_memory_bytes > (capacity_of[npu.npu][0] or 0)]
    if unchecked or not over:
        return ()
    worst = max(over, key=lambda npu: (npu.peak_memory_bytes, -npu.npu))
    capacity = capacity_of[worst.npu][0] or 0
    parts = ", ".join(f"{kind} {format_bytes(size)}" for kind, size in worst.memory_at_peak)
    message = (
        f"NPU {worst.npu} needs {format_bytes(worst.peak_memory_bytes)} at {format_time_ps(worst.peak_memory_ps)} "
        f"({parts}) but holds {format_bytes(capacity)}"
        + (f" ({len(over)} NPUs over capacity)" if len(over) > 1 else "")
    )
    if study.system.over_capacity == "error":
        raise SimulationError(
            f"out of memory: {message}; set system.memory_capacity, or system.over_capacity: warn to run anyway"
        )
    return (f"over capacity: {message}; the times assume it fits (system.over_capacity: error stops such runs)",)


def _training_figures(
    source: WorkloadSource, result: system_layer.SimulationResult, hourly: Fraction | None = None
) -> dict[str, Any] | None:
    """Throughput of a training workload's iteration (samples per second, model TFLOPS per NPU); when the
    workload models it, the peak memory of each NPU; and when the NPUs' hourly rate is known (``hourly``: the sum
    of each NPU's device's USD per hour), what an iteration costs on rented devices: ``cost_usd_per_iteration`` =
    iteration time x USD per hour of all NPUs."""
    if not isinstance(source, TrainingWorkload) or result.total_time_ps <= 0:
        return None
    seconds = result.total_time_ps / 1e12
    figures: dict[str, Any] = {
        "iteration_time_ns": ps_to_ns(result.total_time_ps),
        "samples_per_second": source.samples_per_iteration() / seconds,
        "tflops_per_npu": source.model_flops_per_iteration() / seconds / result.npus / 1e12,
    }
    if isinstance(source, MemoryModel):
        figures["memory_per_npu_bytes"] = source.memory_per_npu_bytes()
    if isinstance(source, DeviceBalancedWorkload) and (split := source.work_split()) is not None:
        figures["work_split"] = dict(split)
    if isinstance(source, RoutedWorkload) and (drops := source.dropped_assignments()) is not None:
        figures["moe_dropped_tokens"], figures["moe_dropped_fraction"] = drops[0], drops[0] / drops[1]
    bubble = _pipeline_bubble(result)
    if bubble is not None:
        figures["pipeline_bubble_fraction"] = bubble
    if hourly is not None:
        # Exact until the one rounding to float: picoseconds x dollars per hour of all NPUs / picoseconds per hour.
        figures["cost_usd_per_iteration"] = float(Fraction(result.total_time_ps) * hourly / (3600 * 10**12))
    return figures


def _priced(serving: dict[str, float], hourly: Fraction | None) -> dict[str, float]:
    """A serving workload's figures and, when the NPUs' hourly rate is known (``hourly``: the sum of each NPU's
    device's USD per hour), what a million generated tokens cost on rented devices: USD per hour / tokens per hour
    x 10^6."""
    rate = serving.get("tokens_per_second", 0.0)
    if hourly is None or rate <= 0:
        return serving
    return {**serving, "cost_usd_per_million_tokens": float(hourly) / 3600 / rate * 1e6}


def _pipeline_bubble(result: system_layer.SimulationResult) -> float | None:
    """The mean share of the iteration an NPU spends neither computing nor waiting on a collective: waiting
    on pipeline neighbours (``pp`` or ``p2p`` transfers) or done early. None when nothing went point to point."""
    total = result.total_time_ps
    pipelined = any(kind in ("pp", "p2p") for npu in result.per_npu for kind, _ in npu.exposed_comm_ps_by_kind)
    if not pipelined or total <= 0:
        return None
    idle = [
        total - npu.compute_ps - sum(ps for kind, ps in npu.exposed_comm_ps_by_kind if kind not in ("pp", "p2p"))
        for npu in result.per_npu
    ]
    return sum(idle) / len(idle) / total
