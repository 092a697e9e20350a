"""The steps of a run that concern its request-level serving jobs (a study of several jobs): finding them,
checking them, replaying some in the engine and running the others apart. Each imports serving only when a study
has such jobs, so that no other run loads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from stratasim import system_layer
from stratasim.config.study_file import Study
from stratasim.kernel.contracts import MultiJobWorkload, WorkloadSource
from stratasim.study.budget import Budget

if TYPE_CHECKING:
    from stratasim.kernel.contracts import PlacedJob
    from stratasim.study.serving import ServedRun
    from stratasim.study.serving_replay import Replay
    from stratasim.v1 import workload_pb2

__all__ = ["serving_jobs_of", "check_serving_jobs_of", "replayable_of", "replay_of", "served_of"]


def serving_jobs_of(source: WorkloadSource, npus: int) -> dict[int, PlacedJob]:
    """The request-level serving jobs of a study of several jobs (:func:`stratasim.study.jobs.serving_jobs`); none,
    and nothing of serving imported, for any other workload."""
    if not isinstance(source, MultiJobWorkload):
        return {}
    from stratasim.study.jobs import serving_jobs

    return serving_jobs(source, npus)


def check_serving_jobs_of(study: Study, jobs: Mapping[int, PlacedJob], budget: Budget) -> None:
    """Every check of each serving job short of running it (:func:`stratasim.study.jobs.check_serving_jobs`)."""
    if jobs:
        from stratasim.study.jobs import check_serving_jobs

        check_serving_jobs(study, jobs, budget)


def replayable_of(study: Study, source: WorkloadSource, jobs: Mapping[int, PlacedJob]) -> dict[int, PlacedJob]:
    """The serving ``jobs`` the engine replays (:func:`stratasim.study.serving_replay.replayable_jobs`)."""
    if not jobs:
        return {}
    from stratasim.study.serving_replay import replayable_jobs

    return replayable_jobs(study, source, jobs)


def replay_of(
    study: Study,
    replays: Mapping[int, PlacedJob],
    jobs: Mapping[int, PlacedJob],
    graphs: Sequence[workload_pb2.ExecutionGraph],
    budget: Budget,
    used: int,
) -> tuple[dict[int, Replay], Sequence[workload_pb2.ExecutionGraph], Study]:
    """The ``replays`` run through their loops, the study's ``graphs`` with theirs in place and the study with
    their pools' devices (:mod:`stratasim.study.serving_replay`); nothing replayed, ``graphs`` and ``study``
    themselves, without any."""
    if not replays:
        return {}, graphs, study
    from stratasim.study.serving_replay import replay_jobs, with_pool_devices, with_replays

    replayed = replay_jobs(study, replays, budget, used)
    return replayed, with_replays(graphs, replayed, jobs), with_pool_devices(study, replayed)


def served_of(
    study: Study,
    jobs: Mapping[int, PlacedJob],
    replays: Mapping[int, PlacedJob],
    replayed: Mapping[int, Replay],
    result: system_layer.SimulationResult,
    budget: Budget,
) -> tuple[dict[int, ServedRun], float]:
    """Each serving job's run, by index: those not replayed run apart after the engine (their wall seconds, the
    second value), those replayed read from the engine's ``result``; none without serving jobs."""
    if not jobs:
        return {}, 0.0
    from stratasim.study.jobs import serve_jobs
    from stratasim.study.serving_replay import shared_run

    served = serve_jobs(study, {index: job for index, job in jobs.items() if index not in replays}, budget)
    seconds = sum(run.wall_seconds for run in served.values())
    served |= {index: shared_run(replay, jobs[index], result) for index, replay in replayed.items()}
    return served, seconds
