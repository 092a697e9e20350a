"""The cluster view of a run on a network that models links: how busy the NPUs were, which links carried the most
and for which job, and where messages queued, level by level.

A link's level is what it joins, read from its name: on a list of dimensions its dimension (``dim 1``), and likewise on
a torus or mesh (``npu 5->npu 6`` of a 4 x 4 torus is in ``dim 0``, ``npu 5->npu 9`` in ``dim 1``); on another fabric
the kinds of its two ends, their numbers dropped — on a fat tree ``npu->edge``, ``edge->aggregation``,
``aggregation->core`` and the same downwards, so queueing at the ToR (edge) and spine (core) shows level by level;
on a graph fabric the node names without their trailing digits (``gpu3->tor0``: ``gpu->tor``). Levels are listed in
the order their first link comes in the network's counters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stratasim.network_layer.topologies import torus
from stratasim.system_layer.result import LinkStats, SimulationResult

__all__ = ["BUSIEST_LINKS", "ClusterView", "LevelLoad", "cluster_view", "link_level"]

BUSIEST_LINKS = 8
"""Links the cluster view lists, the most bytes first."""

_DIMENSION = re.compile(r"^(dim \d+):")
_NPU_LINK = re.compile(r"^npu (\d+)->npu (\d+)$")
_NUMBERED = re.compile(r"[\s\d.]+$")


@dataclass(frozen=True)
class LevelLoad:
    """The links of one level together: how many, the bytes and messages that crossed them, the time those messages
    waited for them (picoseconds, summed; 0 where the network does not measure it) and, in a study of several jobs,
    the same per job as (job, bytes, messages, queue ps)."""

    level: str
    links: int
    bytes: int
    messages: int
    queue_ps: int
    by_job: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def mean_queue_ps(self) -> float:
        """The mean time a message waited for a link of this level (0 without messages)."""
        return self.queue_ps / self.messages if self.messages else 0.0


@dataclass(frozen=True)
class ClusterView:
    """``npu_utilisation``: the share of NPU-time spent computing (every NPU's compute time over NPUs x total
    time); ``active_npu_share``: the share of NPUs that did anything taking time; ``busiest``: the links that carried
    the most bytes (at most :data:`BUSIEST_LINKS`); ``levels``: load and queueing per link level; ``jobs``: the jobs
    the network counted load for (empty in a single-job study); ``queue_measured``: whether the network measured
    the time messages waited for links (the congestion-aware network does; the flit-level network and ns-3 do not).
    """

    npu_utilisation: float
    active_npu_share: float
    busiest: tuple[LinkStats, ...]
    levels: tuple[LevelLoad, ...]
    jobs: tuple[int, ...]
    queue_measured: bool


def link_level(name: str, torus_shape: tuple[int, ...] = ()) -> str:
    """The level of the link called ``name``: its dimension (on a torus or mesh of ``torus_shape``, the one its ends
    differ in), or the kinds of the nodes it joins."""
    dimension = _DIMENSION.match(name)
    if dimension:
        return dimension.group(1)
    npus = _NPU_LINK.match(name) if torus_shape else None
    along = None if npus is None else torus.link_dimension(torus_shape, int(npus[1]), int(npus[2]))
    if along is not None:
        return f"dim {along}"
    return "->".join(_NUMBERED.sub("", end) or end for end in name.split("->"))


def cluster_view(result: SimulationResult, torus_shape: tuple[int, ...] = ()) -> ClusterView | None:
    """The cluster view of ``result`` (on a torus or mesh of ``torus_shape``, if it ran on one); None when the
    network reported no link counters."""
    if not result.links:
        return None
    npus, total = result.npus, result.total_time_ps
    compute = sum(npu.compute_ps for npu in result.per_npu)
    active = sum(1 for npu in result.per_npu if npu.finish_ps > 0)
    busiest = sorted(result.links, key=lambda link: (-link.bytes, link.link))[:BUSIEST_LINKS]
    jobs = sorted({job for link in result.links for job, _ in link.bytes_by_job})
    return ClusterView(
        npu_utilisation=compute / (npus * total) if npus and total else 0.0,
        active_npu_share=active / npus if npus else 0.0,
        busiest=tuple(busiest),
        levels=_levels(result.links, torus_shape),
        jobs=tuple(jobs),
        queue_measured=all(link.queue_ps is not None for link in result.links),
    )


def _levels(links: tuple[LinkStats, ...], torus_shape: tuple[int, ...]) -> tuple[LevelLoad, ...]:
    """Each level's links, bytes, messages and queueing, in total and per job."""
    totals: dict[str, list[int]] = {}
    per_job: dict[str, dict[int, list[int]]] = {}
    for link in links:
        level = link_level(link.link, torus_shape)
        counts = totals.setdefault(level, [0, 0, 0, 0])
        for i, value in enumerate((1, link.bytes, link.messages, link.queue_ps or 0)):
            counts[i] += value
        jobs = per_job.setdefault(level, {})
        for (job, size), (_, messages), (_, queue) in zip(
            link.bytes_by_job, link.messages_by_job, link.queue_ps_by_job
        ):
            job_counts = jobs.setdefault(job, [0, 0, 0])
            for i, value in enumerate((size, messages, queue)):
                job_counts[i] += value
    return tuple(
        LevelLoad(
            level,
            count,
            size,
            messages,
            queue,
            tuple((job, part[0], part[1], part[2]) for job, part in sorted(per_job[level].items())),
        )
        for level, (count, size, messages, queue) in totals.items()
    )
