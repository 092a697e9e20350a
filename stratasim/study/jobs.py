"""The report's view of a study of several jobs: each job's figures over its own NPUs, and what the network level
cannot show of them.

The workload says what its jobs are (:class:`~stratasim.kernel.contracts.MultiJobWorkload`: names, placements,
starts, each job's own workload); the engine's result says what each NPU did. A job's end is the latest finish of
its NPUs; its compute and exposed communication are means over them (the engine counts an NPU's figures from its
graph's start, so the wait before a later job starts is in neither); a training job's throughput is its own
iteration's over its NPUs and its duration.
"""

from __future__ import annotations

from stratasim import system_layer
from stratasim.config.study_file import Study
from stratasim.kernel import registry
from stratasim.kernel.contracts import MultiJobWorkload, PlacedJob, TrainingWorkload
from stratasim.report.jobs import JobFigures

__all__ = ["job_figures", "interference_warning"]


def job_figures(source: MultiJobWorkload, result: system_layer.SimulationResult) -> tuple[JobFigures, ...]:
    """Each job's :class:`JobFigures`, in the order the study lists the jobs."""
    return tuple(_figures(index, job, result) for index, job in enumerate(source.placed_jobs(result.npus)))


def _figures(index: int, job: PlacedJob, result: system_layer.SimulationResult) -> JobFigures:
    """Job ``index``'s figures; a job an NPU failure stopped (``system.failures``) ends at the failure, without
    throughput."""
    stats = [result.per_npu[npu] for npu in job.npus]
    failed = next((f.at_ps for f in result.failures if f.job == index and f.stopped), None)
    end = max(max(npu.finish_ps for npu in stats), job.start_ps)
    duration = end - job.start_ps
    samples = flops = None
    if isinstance(job.source, TrainingWorkload) and duration > 0 and result.stopped_at_ps is None and failed is None:
        seconds = duration / 1e12
        samples = job.source.samples_per_iteration() / seconds
        flops = job.source.model_flops_per_iteration() / seconds / len(stats) / 1e12
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
        failed,
    )


def interference_warning(study: Study, jobs: int) -> tuple[str, ...]:
    """One warning, for a study of several jobs on a network level whose delays never depend on traffic (its
    class's ``stateless``: the analytical level): it has no shared links, so it cannot show the jobs slowing each
    other down."""
    names = sorted(set(study.network.backends().values()))
    alone = [name for name in names if name in registry.available("network") and _stateless(name)]
    if jobs < 2 or not alone:
        return ()
    return (
        f"network: the {' and '.join(alone)} level prices every message as if alone (it has no shared links), so it "
        f"cannot show interference between the study's {jobs} jobs: each takes what it would alone; "
        "network.backend: congestion_aware or flit_level shows it",
    )


def _stateless(name: str) -> bool:
    return getattr(registry.load("network", name), "stateless", False) is True
