"""Several jobs in one study: each a workload of its own kind on NPUs of its own, sharing the topology's network.

Each job's workload is built for its ``npus`` NPUs, then its graphs are moved onto the NPUs the placement gave it
(:mod:`~stratasim.workload_layer.jobs.remap`), tagged with the job's index and starting at the job's ``start``; the
NPUs no job holds run empty graphs. The jobs' traffic then shares the network: a network that models links
(congestion-aware, flit-level) shows them slowing one another, the analytical one prices each message as if alone.

A request-level serving job (a :class:`~stratasim.kernel.serving.RequestLevelWorkload`, ``kind: serving``) yields no
graphs: its NPUs run empty graphs here, and the composition root runs its own loop on them. Where it can, it then
replaces them with graphs replaying the loop's iterations (:mod:`stratasim.study.serving_replay`), which share the
network with the other jobs; otherwise the loop prices its collectives and KV moves on the network alone
(:mod:`stratasim.study.jobs`), apart from the other jobs' traffic.

The workload claims no symmetry (it is not a ``SymmetricWorkload``): its jobs differ, and where they do not the
engine finds identical graphs on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.kernel import registry
from stratasim.kernel.contracts import PlacedJob, WorkloadSource
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.serving import RequestLevelWorkload
from stratasim.kernel.work import EstimableWorkload, WorkEstimate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.jobs.config import JobConfig, JobsConfig
from stratasim.workload_layer.jobs.placement import place_jobs
from stratasim.workload_layer.jobs.remap import remap_graphs

__all__ = ["JobsWorkload"]


class JobsWorkload:
    """The jobs of a ``kind: jobs`` workload, built, placed and merged into one graph per NPU of the topology."""

    name = "jobs"
    Config = JobsConfig

    def __init__(self, config: JobsConfig) -> None:
        self.config = config
        self._sources = tuple(_built(index, job) for index, job in enumerate(config.jobs))

    def npus_required(self) -> None:
        """None: the jobs run on the whole topology (its NPUs no job holds idle)."""
        return None

    def placed_jobs(self, npus: int) -> tuple[PlacedJob, ...]:
        """Each job as placed on a topology of ``npus`` NPUs (see :mod:`~stratasim.workload_layer.jobs.placement`)."""
        placed = place_jobs(self.config, npus)
        return tuple(
            PlacedJob(job.name, job.kind, members, job.start, source)
            for job, members, source in zip(self.config.jobs, placed, self._sources)
        )

    def estimate(self, npus: int) -> WorkEstimate:
        """The jobs' estimates together: their graphs summed, the nodes and communications of a graph as the mean
        over the topology's NPUs weighted by each job's NPUs (so NPUs x nodes is the jobs' total: an idle NPU
        counts one node), the largest message the largest of any job."""
        place_jobs(self.config, npus)  # a study whose jobs do not fit says so before anything is estimated
        works = [
            (job.npus, source.estimate(job.npus) if isinstance(source, EstimableWorkload) else None)
            for job, source in zip(self.config.jobs, self._sources)
        ]
        idle = npus - sum(size for size, _ in works)
        nodes = idle + sum(size * (1 if work is None else work.nodes) for size, work in works)
        communications = sum(size * (1 if work is None else work.communications) for size, work in works)
        return WorkEstimate(
            sum(size if work is None else work.graphs for size, work in works) + (1 if idle else 0),
            -(-nodes // npus),
            -(-communications // npus),
            max((work.largest_message for _, work in works if work is not None), default=0),
            "workload.jobs (their npus and their workloads' sizes)",
        )

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        """One graph per NPU of the topology: each job's on the NPUs it was placed on, an empty one on a serving
        job's NPUs and elsewhere."""
        idle = workload_pb2.ExecutionGraph()
        merged: list[workload_pb2.ExecutionGraph] = [idle] * npus
        for index, job in enumerate(self.placed_jobs(npus)):
            if isinstance(job.source, RequestLevelWorkload):
                continue
            try:
                graphs = job.source.graphs(len(job.npus))
                moved = remap_graphs(graphs, job.npus, index, job.start_ps, name=job.name)
            except WorkloadError as exc:
                raise WorkloadError(f"workload.jobs[{index}] (job {job.name!r}): {exc}") from None
            for npu, graph in zip(job.npus, moved):
                merged[npu] = graph
        return merged


def _built(index: int, job: JobConfig) -> WorkloadSource | RequestLevelWorkload:
    """The job's workload, built from its validated config; it must run on exactly the job's NPUs."""
    source: WorkloadSource | RequestLevelWorkload = registry.load("workload", job.kind)(job.workload)
    required = source.npus_required()
    if required is not None and required != job.npus:
        plan = (
            " (its plan's degrees must multiply to the job's npus)"
            if getattr(source, "fills_topology", False)
            else " (its pools' replicas x tp x pp, summed over the pools)"
            if isinstance(source, RequestLevelWorkload)
            else ""
        )
        raise WorkloadError(
            f"workload.jobs[{index}].npus: job {job.name!r} has {job.npus:,} NPUs but its {job.kind} workload runs "
            f"on {required:,}{plan}"
        )
    return source
