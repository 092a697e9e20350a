"""Serving jobs whose traffic shares the fabric: each runs its request-level loop alone, then its iterations are
replayed in the engine beside the other jobs, with the batching decisions of its standalone run frozen.

:func:`replayable_jobs` picks the serving jobs a replay covers: every request-level one but those the study opts out
with ``shared: false`` (they keep running apart, :mod:`stratasim.study.jobs`). :func:`replay_jobs` runs each one's loop on its placed NPUs, recording its
iterations, and builds its NPUs' graphs (:func:`~stratasim.workload_layer.serving.replay.replay_graphs`), its
collectives at the sizes its pricer priced them, moved onto its NPUs and named after it
(:func:`~stratasim.workload_layer.jobs.remap.remap_graphs`); the engine runs them with the other jobs' graphs, so
on a network that models links each slows the other. :func:`shared_run` then gives the job's figures from the
shared run: its requests' token times moved to when the iterations that produced them ended there
(:func:`~stratasim.workload_layer.serving.replay_times.replayed_run`). At zero interference they are the standalone run's
exactly: each iteration's operators are priced by the same operator pricer on the same device, and its collectives
are the ones its pricer simulated alone, on the replica's own NPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from stratasim import system_layer
from stratasim.compute_layer.sections import DeviceGroup
from stratasim.config.study_file import Study
from stratasim.kernel.contracts import PlacedJob, WorkloadSource
from stratasim.kernel.serving import ExpertWork, Iteration, IterationShape
from stratasim.study.budget import Budget, refuse_over, replay_memory
from stratasim.study.serving import ServedRun, pool_sections, serve
from stratasim.system_layer.serving.kv_transfer import quantised
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.jobs.remap import job_milestones, remap_graphs
from stratasim.workload_layer.jobs.workload import JobsWorkload
from stratasim.workload_layer.serving.metrics import serving_metrics, serving_timeline
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.replay import ExpertGroups, replay_graphs, replay_size
from stratasim.workload_layer.serving.replay_times import replayed_run
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

__all__ = [
    "Replay",
    "expert_groups",
    "replay_jobs",
    "replayable_jobs",
    "shared_run",
    "with_pool_devices",
    "with_replays",
]


@dataclass(frozen=True)
class Replay:
    """A serving job's standalone run (``alone``), its loop's record (``run``) and its NPUs' graphs (in the order of
    its placed NPUs)."""

    alone: ServedRun
    run: PoolRun
    graphs: list[workload_pb2.ExecutionGraph]
    devices: tuple[DeviceGroup, ...] = ()
    """Its pools on devices of their own, as groups of its placed NPUs (:func:`with_pool_devices`)."""


def replayable_jobs(study: Study, source: WorkloadSource, jobs: Mapping[int, PlacedJob]) -> dict[int, PlacedJob]:
    """The serving ``jobs`` (by index) of the study's ``source`` whose iterations the engine replays (module
    docstring): every request-level one unless the study says ``shared: false``."""
    shared = [job.shared for job in source.config.jobs] if isinstance(source, JobsWorkload) else []
    return {
        index: job for index, job in jobs.items() if isinstance(job.source, ServingRequestsWorkload) and shared[index]
    }


def replay_jobs(study: Study, jobs: Mapping[int, PlacedJob], budget: Budget, used: int = 0) -> dict[int, Replay]:
    """Each of ``jobs`` (replayable) run alone on its placed NPUs and its graphs for the engine, by its index; each
    refused before its graphs are built when, with the ``used`` bytes the rest of the study is estimated to take and
    the replays before it, it would exceed ``budget`` (:func:`~stratasim.study.budget.replay_memory`)."""
    replays: dict[int, Replay] = {}
    for index, job in jobs.items():
        replays[index], used = _replay(study, index, job, budget, used)
    return replays


def _replay(study: Study, index: int, job: PlacedJob, budget: Budget, used: int) -> tuple[Replay, int]:
    source = job.source
    assert isinstance(source, ServingRequestsWorkload)
    runs: list[PoolRun] = []
    alone = serve(study, source, budget, placed=job.npus, key=f"workload.jobs[{index}].workload", runs=runs)
    cached: dict[tuple[int, IterationShape], Iteration] = {}

    def works(pool: int, shape: IterationShape) -> Iteration:
        if (pool, shape) not in cached:
            cached[pool, shape] = Iteration(shape, source.works(shape, pool))
        return cached[pool, shape]

    replicas = [list(npus) for pool in source.pools() for npus in pool.replica_npus()]
    experts = expert_groups(source)
    nodes, events = replay_size(runs[0], replicas, works, experts)
    used += replay_memory(nodes, events)
    refuse_over(
        f"workload.jobs[{index}]: replaying serving job '{job.name}' on the shared fabric "
        f"({len(runs[0].record):,} iterations, {nodes:,} graph nodes, {events:,} nodes run) with the rest of the study",
        used,
        events,
        budget,
        f"its requests (workload.jobs[{index}].workload.requests), or set workload.jobs[{index}].shared: false to "
        "price its traffic apart from the other jobs' without replaying it",
    )
    graphs = replay_graphs(runs[0], replicas, works, quantised, experts)
    moved = remap_graphs(graphs, job.npus, index, job.start_ps, name=job.name)
    return Replay(alone, runs[0], moved, _pool_devices(study, source, job, index)), used


def expert_groups(source: ServingRequestsWorkload) -> ExpertGroups:
    """The expert parts of ``source``'s expert-parallel groups (each asked once) and each replica's group: the
    ``ep`` consecutive replicas of its pool it is one of."""
    cached: dict[tuple[int, int, int], ExpertWork] = {}

    def work(pool: int, group: int, member: int) -> ExpertWork:
        if (pool, group, member) not in cached:
            cached[pool, group, member] = source.expert_work(group, member, pool)
        return cached[pool, group, member]

    members: list[range] = []
    for pool in source.pools():
        first = len(members)
        members += [range(first + i - i % pool.ep, first + i - i % pool.ep + pool.ep) for i in range(pool.replicas)]
    return ExpertGroups(work, members)


def _pool_devices(study: Study, source: ServingRequestsWorkload, job: PlacedJob, index: int) -> tuple[DeviceGroup, ...]:
    """Each of the job's pools on a device other than the study's, as a group of its placed NPUs running it."""
    assert study.compute is not None  # checked by serve
    main = study.compute.device_name()
    sections = pool_sections(study, source, f"workload.jobs[{index}].workload")
    return tuple(
        DeviceGroup(npus=tuple(job.npus[npu] for npu in pool.npus()), device=section.device)
        for pool, section in zip(source.pools(), sections, strict=True)
        if section.device_name() != main
    )


def with_pool_devices(study: Study, replays: Mapping[int, Replay]) -> Study:
    """``study`` with its replayed jobs' pools on devices of their own added to ``compute.groups``, so that the
    engine prices their operators on those devices as their loops' pricers did; ``study`` itself without any."""
    groups = [group for replay in replays.values() for group in replay.devices]
    if not groups or study.compute is None:
        return study
    compute = study.compute.model_copy(update={"groups": [*(study.compute.groups or ()), *groups]})
    return replace(study, compute=compute)


def with_replays(
    graphs: Sequence[workload_pb2.ExecutionGraph], replays: Mapping[int, Replay], jobs: Mapping[int, PlacedJob]
) -> Sequence[workload_pb2.ExecutionGraph]:
    """The study's ``graphs`` (one per NPU) with each replayed job's NPUs running its replay's graphs; ``graphs``
    themselves, untouched, when nothing is replayed (a workload's graphs may be built lazily, NPU by NPU, and the
    engine may read only its stand-ins')."""
    if not replays:
        return graphs
    merged = list(graphs)
    for index, replay in replays.items():
        for npu, graph in zip(jobs[index].npus, replay.graphs, strict=True):
            merged[npu] = graph
    return merged


def shared_run(replay: Replay, job: PlacedJob, result: system_layer.SimulationResult) -> ServedRun:
    """The job's run as the engine's shared ``result`` times it (module docstring); its standalone run when the
    engine stopped before it finished."""
    ends = {name: time - job.start_ps for name, time in job_milestones(result.milestones, job.name).items()}
    if result.stopped_at_ps is not None:
        return replay.alone
    moved = replayed_run(replay.run, ends)
    source = job.source
    assert isinstance(source, ServingRequestsWorkload)
    config = source.config
    figures = serving_metrics(moved, config.slo, sum(pool.replicas for pool in config.pools))
    served = replace(
        replay.alone.result,
        total_time_ps=max((sequence.finish_ps for sequence in moved.sequences), default=0),
        figures=replay.alone.result.figures | figures,
        timeline=serving_timeline(moved),
    )
    return replace(replay.alone, result=served, figures=replay.alone.figures | figures | _cost(replay.alone, figures))


def _cost(alone: ServedRun, figures: Mapping[str, float]) -> dict[str, float]:
    """The cost of a million tokens at the shared run's token rate (the standalone one's scaled by the rates)."""
    cost, rate = alone.figures.get("cost_usd_per_million_tokens"), figures["tokens_per_second"]
    if cost is None or rate <= 0:
        return {}
    return {"cost_usd_per_million_tokens": cost * (alone.figures["tokens_per_second"] / rate)}  # exact at one rate
