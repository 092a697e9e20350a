"""The report's view of a study of several jobs: each job's figures over its own NPUs, the serving jobs' own runs,
and what the network level cannot show of them.

The workload says what its jobs are (:class:`~stratasim.kernel.contracts.MultiJobWorkload`: names, placements,
starts, each job's own workload); the engine's result says what each NPU did. A job's end is the latest finish of
its NPUs; its compute and exposed communication are means over them (the engine counts an NPU's figures from its
graph's start, so the wait before a later job starts is in neither); a training job's throughput is its own
iteration's over its NPUs and its duration; an inference job's TTFT and TPOT come from its own milestones
(:func:`~stratasim.workload_layer.jobs.remap.job_milestones`), counted from its start.

A request-level serving job (``kind: serving``) the engine replays (:mod:`stratasim.study.serving_replay`) runs its
loop alone first, then its iterations run in the engine beside the other jobs' graphs, its batching decisions frozen;
its figures come from the shared run. A serving job with ``shared: false`` is no part of the engine's run: its NPUs idle there, and :func:`serve_jobs` runs its own loop (:func:`stratasim.study.serving.serve`) with the study's compute and network,
its NPU i on the job's i-th placed NPU. That loop prices each collective and KV move on the network alone, so the
job's traffic and the other jobs' never meet on a link, and the engine's figures show its NPUs idle
(:func:`interference_warning` says so). Its end is its start
plus its loop's simulated time; its figures are its loop's (TTFT, TPOT and end-to-end percentiles, throughput,
goodput...).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from stratasim import system_layer
from stratasim.config.study_file import Study
from stratasim.kernel.contracts import MultiJobWorkload, PlacedJob, ServingWorkload, TrainingWorkload, WorkloadSource
from stratasim.kernel.serving import RequestLevelWorkload
from stratasim.report.jobs import JobFigures
from stratasim.study.budget import Budget, stateless
from stratasim.study.serving import ServedRun, check_serving, serve
from stratasim.workload_layer.jobs.remap import job_milestones

__all__ = ["check_serving_jobs", "interference_warning", "job_figures", "serve_jobs", "serving_jobs"]


def serving_jobs(source: WorkloadSource, npus: int) -> dict[int, PlacedJob]:
    """The request-level serving jobs of a study of several jobs on ``npus`` NPUs, by their index in its list
    (none for any other workload)."""
    if not isinstance(source, MultiJobWorkload):
        return {}
    placed = source.placed_jobs(npus)
    return {index: job for index, job in enumerate(placed) if isinstance(job.source, RequestLevelWorkload)}


def _key(index: int) -> str:
    return f"workload.jobs[{index}].workload"


def check_serving_jobs(study: Study, jobs: Mapping[int, PlacedJob], budget: Budget) -> None:
    """Every check of each serving job short of running it, as a serving study's (its problems named under its
    key)."""
    for index, job in jobs.items():
        assert isinstance(job.source, RequestLevelWorkload)
        check_serving(study, job.source, budget, _key(index))


def serve_jobs(study: Study, jobs: Mapping[int, PlacedJob], budget: Budget) -> dict[int, ServedRun]:
    """Each serving job's own request-level run on its placed NPUs, by its index."""
    runs = {}
    for index, job in jobs.items():
        assert isinstance(job.source, RequestLevelWorkload)
        runs[index] = serve(study, job.source, budget, placed=job.npus, key=_key(index))
    return runs


def job_figures(
    source: MultiJobWorkload,
    result: system_layer.SimulationResult,
    served: Mapping[int, ServedRun],
    replayed: Collection[int] = (),
) -> tuple[JobFigures, ...]:
    """Each job's :class:`JobFigures`, in the order the study lists them: a serving job's from its run in
    ``served`` (one the engine replayed, its index in ``replayed``, with its NPUs' compute and exposed
    communication: its waits for requests are neither), the others' from the engine's ``result``."""
    return tuple(
        _served(job, served[index], result, index in replayed) if index in served else _figures(index, job, result)
        for index, job in enumerate(source.placed_jobs(result.npus))
    )


def _served(job: PlacedJob, run: ServedRun, result: system_layer.SimulationResult, replayed: bool) -> JobFigures:
    """A serving job's figures: from its start to its loop's end; engine figures (compute, exposed comm) only when
    the engine ``replayed`` it."""
    end = job.start_ps + run.result.total_time_ps
    if not replayed:
        return JobFigures(job.name, job.kind, job.npus, job.start_ps, end, None, None, serving=run.figures)
    stats = [result.per_npu[npu] for npu in job.npus]
    compute = sum(npu.compute_ps for npu in stats) / len(stats)
    exposed = sum(npu.exposed_comm_ps for npu in stats) / len(stats)
    return JobFigures(job.name, job.kind, job.npus, job.start_ps, end, compute, exposed, serving=run.figures)


def _figures(index: int, job: PlacedJob, result: system_layer.SimulationResult) -> JobFigures:
    """Job ``index``'s figures; a job an NPU failure stopped (``system.failures``) ends at the failure, without
    throughput."""
    stats = [result.per_npu[npu] for npu in job.npus]
    failed = next((f.at_ps for f in result.failures if f.job == index and f.stopped), None)
    end = max(max(npu.finish_ps for npu in stats), job.start_ps)
    duration = end - job.start_ps
    samples = flops = serving = None
    finished = duration > 0 and result.stopped_at_ps is None and failed is None
    if isinstance(job.source, TrainingWorkload) and finished:
        seconds = duration / 1e12
        samples = job.source.samples_per_iteration() / seconds
        flops = job.source.model_flops_per_iteration() / seconds / len(stats) / 1e12
    if isinstance(job.source, ServingWorkload) and finished:
        own = {name: time - job.start_ps for name, time in job_milestones(result.milestones, job.name).items()}
        serving = job.source.serving_figures(own, duration)
    return JobFigures(
        job.name,
        job.kind,
        job.npus,
        job.start_ps,
        end,
        sum(npu.compute_ps for npu in stats) / len(stats),
        sum(npu.exposed_comm_ps for npu in stats) / len(stats),
        samples,
        flops,
        serving,
        failed,
    )


def interference_warning(
    study: Study, jobs: int, serving: Sequence[str] = (), replayed: Sequence[str] = ()
) -> tuple[str, ...]:
    """The warnings of a study of ``jobs`` jobs about what it cannot show: on a network level whose delays never
    depend on traffic (its class's ``stateless``: the analytical level), which has no shared links, any interference
    between jobs; with ``serving`` jobs (named) run apart, their work, which the engine does not run, and on a level
    that models links, interference between them and the others, since each serving job's loop prices its traffic
    on the network alone; with ``replayed`` serving jobs, that their batching decisions are frozen."""
    names = sorted(set(study.network.backends().values()))
    alone = [name for name in names if stateless(name)]
    warnings = []
    if jobs > 1 and alone:
        warnings.append(
            f"network: the {' and '.join(alone)} level prices every message as if alone (it has no shared links), so "
            f"it cannot show interference between the study's {jobs} jobs: each takes what it would alone; "
            "network.backend: congestion_aware or flit_level shows it"
        )
    if serving:
        warnings.append(_serving_warning(serving, jobs > 1 and len(alone) < len(names)))
    if replayed:
        warnings.append(_replay_warning(replayed))
    return tuple(warnings)


def _replay_warning(replayed: Sequence[str]) -> str:
    """What the report cannot show of the ``replayed`` serving jobs: their decisions reacting to the shared run."""
    one = len(replayed) == 1
    names = ", ".join(repr(name) for name in replayed)
    return (
        f"workload.jobs: serving job{'' if one else 's'} {names} {'replays its' if one else 'replay their'} "
        "standalone request-level run in the engine, sharing the network with the other jobs, with the batching "
        "decisions frozen from the standalone run (which requests batch together, how long each replica waits "
        f"between iterations): only when {'its' if one else 'their'} iterations end moves; a full co-simulation "
        "would let the decisions react to the slowed iterations (docs/how-to/several-jobs.md)"
    )


def _serving_warning(serving: Sequence[str], links: bool) -> str:
    """What the report cannot show of the ``serving`` jobs: their NPUs' work, and with ``links`` (other jobs on a
    network that models links) their traffic meeting the other jobs'."""
    one = len(serving) == 1
    said = (
        f"serving job {serving[0]!r} runs its own request-level loop"
        if one
        else (f"serving jobs {', '.join(repr(name) for name in serving)} run their own request-level loops")
    )
    said += (
        ", not in the engine: the per-NPU figures, cluster view and compute energy show "
        f"{'its' if one else 'their'} NPUs idle ({'its' if one else 'their'} figures are in the jobs list)"
    )
    if links:
        said += (
            f"; {'it prices' if one else 'they price'} each collective and KV move on the network alone, not on "
            f"the links the study's other jobs share: {'its' if one else 'their'} traffic and the other jobs' never "
            "meet, so neither slows the other"
        )
    return f"workload.jobs: {said} (docs/how-to/several-jobs.md)"
