"""Placing jobs on the topology's NPUs by a policy: which NPU runs each job's rank i.

NPU ids run innermost dimension first (a fabric's NPUs in its own order: a fat tree's edge switch by edge switch,
pod by pod), so contiguous ids share a ring, a switch or an edge switch. The policies:

- ``packed``: each job, in the order listed, takes the next contiguous block of free NPUs;
- ``spread``: the jobs' ranks are dealt round-robin (rank 0 of every job, then rank 1 of every job still asking,
  ...) onto NPUs evenly spaced over the whole topology, slot s on NPU floor(s x N / T) for T NPUs asked of N: a
  job's consecutive ranks sit about (jobs) x N / T ids apart, so each job spans the whole fabric;
- ``random``: the NPUs in a random order (numpy's default generator seeded with ``seed``), each job taking the next
  ones, its rank i on the i-th: the same seed gives the same placement;
- ``explicit``: each job's ``place``.
"""

from __future__ import annotations

import numpy as np

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.jobs.config import JobsConfig

__all__ = ["place_jobs"]


def place_jobs(config: JobsConfig, npus: int) -> tuple[tuple[int, ...], ...]:
    """Each job's NPUs on a topology of ``npus`` NPUs, its rank i on the i-th; :class:`WorkloadError` naming the
    key when the jobs ask for more NPUs than the topology has, or a ``place`` names one outside it."""
    if config.placement == "explicit":
        return _explicit(config, npus)
    sizes = [job.npus for job in config.jobs]
    _check_room(config, npus)
    if config.placement == "spread":
        return _spread(sizes, npus)
    order = range(npus) if config.placement == "packed" else np.random.default_rng(config.seed).permutation(npus)
    placed = []
    taken = 0
    for size in sizes:
        placed.append(tuple(int(npu) for npu in order[taken : taken + size]))
        taken += size
    return tuple(placed)


def _check_room(config: JobsConfig, npus: int) -> None:
    """Refuse jobs asking for more NPUs than the topology has, naming the first job that does not fit."""
    free = npus
    for index, job in enumerate(config.jobs):
        if job.npus > free:
            before = (
                "" if not index else " after the job before it" if index == 1 else f" after the {index} jobs before it"
            )
            asked = sum(other.npus for other in config.jobs)
            raise WorkloadError(
                f"workload.jobs[{index}].npus: job {job.name!r} asks for {job.npus:,} NPUs but {free:,} of the "
                f"topology's {npus:,} are free{before} (the jobs ask for {asked:,} in all; network.topology)"
            )
        free -= job.npus


def _spread(sizes: list[int], npus: int) -> tuple[tuple[int, ...], ...]:
    """Round-robin slots, evenly spaced over the topology (see the module docstring)."""
    slots = [(job, rank) for rank in range(max(sizes)) for job, size in enumerate(sizes) if rank < size]
    placed: list[list[int]] = [[] for _ in sizes]
    for slot, (job, _) in enumerate(slots):
        placed[job].append(slot * npus // len(slots))
    return tuple(tuple(ids) for ids in placed)


def _explicit(config: JobsConfig, npus: int) -> tuple[tuple[int, ...], ...]:
    """Each job's ``place``, checked against the topology (the config checked lengths and overlaps)."""
    placed = []
    for index, job in enumerate(config.jobs):
        assert job.place is not None, "the config requires place with placement: explicit"
        outside = [npu for npu in job.place if npu >= npus]
        if outside:
            raise WorkloadError(
                f"workload.jobs[{index}].place: NPU {outside[0]} is outside the topology, whose {npus:,} NPUs are "
                f"0-{npus - 1} (network.topology)"
            )
        placed.append(job.place)
    return tuple(placed)
