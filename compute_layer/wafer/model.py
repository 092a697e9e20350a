"""An operator's cost on a wafer: its split over a core group, the SRAM strategy, compute and DRAM time.

For a split (:mod:`.split`) each used core gets the same share (PALM's virtual tiles, section IV.A); its
forward DRAM bytes ``T`` come from Algorithm 1 (:mod:`.sram`) and the time they take from the contended edge
(:mod:`.contention`). A core computes at its share of the tile's peak (PALM's ``2·MACs / compute power``) while
its DRAM stream runs, so::

    compute_ps  = ⌈FLOPs per core · 10^12 / core peak⌉
    duration_ps = max(compute_ps, memory_ps)

:func:`plan` tries every worthwhile split of at most the wafer's cores and keeps the fastest (then the one on
fewer cores): PALM leaves the degrees to the user, and an operator cost has no user to ask.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.compute_layer.wafer.accelerator import Wafer
from stratasim.compute_layer.wafer.contention import EdgeLoad, edge_load
from stratasim.compute_layer.wafer.split import Shape, Work, splits
from stratasim.compute_layer.wafer.sram import Allocation, allocate

__all__ = ["Plan", "plan", "evaluate"]

_PS_PER_SECOND = 10**12


@dataclass(frozen=True)
class Plan:
    """How one operator runs: degrees per dimension, cores used, one core's work, strategy and times (ps)."""

    degrees: tuple[tuple[str, int], ...]
    cores: int
    work: Work
    allocation: Allocation
    compute_ps: int
    edge: EdgeLoad

    @property
    def duration_ps(self) -> int:
        """Compute and DRAM traffic overlap: the slower of the two."""
        return max(self.compute_ps, self.edge.memory_ps)


def evaluate(wafer: Wafer, shape: Shape, degrees: tuple[int, ...], peak: tuple[int, int]) -> Plan:
    """The plan of ``shape`` split ``degrees`` ways on ``wafer``; ``peak`` is a core's FLOP/s as a fraction."""
    cores = 1
    for degree in degrees:
        cores *= degree
    work = shape.share(degrees)
    allocation = allocate(work.inputs, work.weights, work.outputs, wafer.core_sram_bytes)
    numerator, denominator = peak
    compute_ps = -(-work.flops * _PS_PER_SECOND * denominator // numerator)
    named = tuple((name, degree) for (name, _), degree in zip(shape.dims, degrees))
    return Plan(named, cores, work, allocation, compute_ps, edge_load(wafer, cores, allocation.dram_bytes))


def plan(wafer: Wafer, shape: Shape, peak: tuple[int, int]) -> Plan:
    """The fastest plan of ``shape`` on at most all of ``wafer``'s cores; ties go to fewer cores."""
    best: Plan | None = None
    for degrees in splits([size for _, size in shape.dims], wafer.core_count):
        candidate = evaluate(wafer, shape, degrees, peak)
        if best is None or (candidate.duration_ps, candidate.cores) < (best.duration_ps, best.cores):
            best = candidate
    assert best is not None, "splits() always yields the all-ones split"
    return best
