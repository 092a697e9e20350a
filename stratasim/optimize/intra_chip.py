"""DFModel's intra-chip pass: which kernels one chip fuses into partitions that run in sequence, and how many of its
compute tiles each kernel gets, for the least time.

The chip runs its share of a dataflow graph (after the inter-chip pass has sharded it) as partitions executed one
after another (DFModel Sec. V). Inside a partition the kernels run at once, each on its own tiles, and the tensors
between them stream through SRAM; a tensor crossing partitions, and every kernel's weights, go through DRAM. A
partition, once configured, streams all the inputs of a pass (``ChipWorkload.streamed``: the micro-batches a
pipeline stage runs an iteration) through, so its weights cross DRAM once for them all and its tensors once for
each; kernel-by-kernel execution reads a kernel's weights for every input, as a GPU or TPU does when it runs the
micro-batches one after another, each kernel evicting the last one's operands from its caches. A
partition takes the longest of its compute (its slowest kernel), its DRAM traffic over the DRAM bandwidth and its
network time; the pass minimises the sum over partitions, under the chip's tiles, SRAM capacity (tensors kept on
chip) and DRAM capacity (weights and the tensors alive between partitions). Kernel-by-kernel execution is the same
model with every kernel its own partition on the whole chip. :func:`solve_intra_chip` solves it exactly as a
mixed-integer program (:mod:`stratasim.optimize.intra_chip_model`); :func:`enumerate_intra_chip` tries every
mapping of a small graph. docs/explanation/dataflow-execution.md gives the formulation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from stratasim.compute_layer.dataflow_chips import DataflowChip, Execution
from stratasim.optimize.chip_workload import ChipWorkload
from stratasim.optimize.intra_chip_model import Fixed, Start, solve_model, tile_counts
from stratasim.optimize.intra_chip_start import start_candidates

__all__ = [
    "Partition",
    "IntraChipSolution",
    "InfeasibleMapping",
    "evaluate",
    "solve_intra_chip",
    "enumerate_intra_chip",
]

Status = Literal["optimal", "time_limit", "enumerated"]
Bound = Literal["compute", "memory", "network"]


class InfeasibleMapping(ValueError):
    """No mapping of the kernels fits the chip; the message names the constraint that binds."""


@dataclass(frozen=True)
class Partition:
    """Kernels run together: their ``tiles`` (one count each), the seconds of ``compute`` (the slowest kernel),
    ``memory`` (DRAM traffic over bandwidth) and ``network``; the SRAM its on-chip tensors take, its DRAM traffic
    and the DRAM alive while it runs (weights and the tensors crossing it), in bytes."""

    kernels: tuple[str, ...]
    tiles: tuple[int, ...]
    compute_s: float
    memory_s: float
    network_s: float
    sram_bytes: int
    dram_traffic_bytes: int
    dram_live_bytes: int

    @property
    def time_s(self) -> float:
        """The partition's critical time: compute, memory and network overlap, the longest sets the pace."""
        return max(self.compute_s, self.memory_s, self.network_s)

    @property
    def bound(self) -> Bound:
        """What sets its time: ``compute``, ``memory`` or ``network``."""
        times: dict[Bound, float] = {"compute": self.compute_s, "memory": self.memory_s, "network": self.network_s}
        return max(times, key=lambda name: times[name])


@dataclass(frozen=True)
class IntraChipSolution:
    """A mapping of a chip workload onto a chip: its partitions in execution order, ``status`` (``optimal``, proved
    by the solver; ``time_limit``, the best mapping found in time; ``enumerated`` by exhaustive search) and the
    solver's relative optimality ``gap``."""

    chip: str
    execution: Execution
    partitions: tuple[Partition, ...]
    repeat: int
    status: Status
    gap: float

    @property
    def pass_s(self) -> float:
        """Seconds to run the kernels once: the sum of the partitions' critical times."""
        return sum(p.time_s for p in self.partitions)

    @property
    def total_s(self) -> float:
        """Seconds to run them ``repeat`` times."""
        return self.pass_s * self.repeat


def evaluate(
    work: ChipWorkload, chip: DataflowChip, assignment: Sequence[int], tiles: Sequence[int]
) -> tuple[Partition, ...]:
    """The partitions of putting kernel ``i`` in partition ``assignment[i]`` on ``tiles[i]`` tiles (the
    partitions in increasing number, empty ones left out); :class:`InfeasibleMapping` if it breaks a constraint."""
    resident = work.resident_bytes
    for t in work.tensors:
        if assignment[t.source] > assignment[t.target]:
            raise InfeasibleMapping(f"tensor {t.name!r} would be consumed in a partition before the one producing it")
    partitions = []
    for part in sorted(set(assignment)):
        members = [i for i, p in enumerate(assignment) if p == part]
        inside = [t for t in work.tensors if assignment[t.source] == part == assignment[t.target]]
        crossing = [t for t in work.tensors if (assignment[t.source] == part) != (assignment[t.target] == part)]
        live = [t for t in work.tensors if assignment[t.source] <= part <= assignment[t.target] != assignment[t.source]]
        traffic = sum(t.bytes for t in crossing) + sum(work.weight_traffic(i) for i in members)
        partition = Partition(
            kernels=tuple(work.kernels[i].name for i in members),
            tiles=tuple(tiles[i] for i in members),
            compute_s=max(chip.kernel_seconds(work.kernels[i].operator, tiles[i]) for i in members),
            memory_s=traffic / chip.dram_bandwidth,
            network_s=sum(work.kernels[i].network_seconds for i in members),
            sram_bytes=sum(t.bytes for t in inside),
            dram_traffic_bytes=traffic,
            dram_live_bytes=resident + sum(t.bytes for t in live),
        )
        _check(partition, chip)
        partitions.append(partition)
    return tuple(partitions)


def _check(partition: Partition, chip: DataflowChip) -> None:
    where = f"partition {{{', '.join(partition.kernels)}}}"
    if sum(partition.tiles) > chip.tiles:
        raise InfeasibleMapping(f"{where} takes {sum(partition.tiles)} tiles; chip {chip.name!r} has {chip.tiles}")
    if partition.sram_bytes > chip.sram_bytes:
        raise InfeasibleMapping(
            f"{where} keeps {partition.sram_bytes} bytes on chip; chip {chip.name!r} has {chip.sram_bytes} of SRAM"
        )
    if partition.dram_live_bytes > chip.dram_capacity:
        raise InfeasibleMapping(
            f"{where} needs {partition.dram_live_bytes} bytes of DRAM (weights and live tensors); chip "
            f"{chip.name!r} has {chip.dram_capacity}"
        )


def solve_intra_chip(
    work: ChipWorkload,
    chip: DataflowChip,
    *,
    execution: Execution | None = None,
    partitions: Sequence[Sequence[str]] | None = None,
    max_partitions: int | None = None,
    time_limit_s: float = 60.0,
) -> IntraChipSolution:
    """The fastest mapping of ``work`` onto ``chip``, solved by HiGHS within ``time_limit_s`` seconds.

    ``execution`` (default: the chip's own) ``dataflow`` chooses the partitions, at most ``max_partitions`` of
    them (default: one per kernel), or takes ``partitions`` as given (kernel names, in execution order) and
    chooses only the tiles; ``kernel_by_kernel`` fixes every kernel alone on the whole chip, reading its weights
    for every input (``work.streamed`` taken as 1). Raises :class:`InfeasibleMapping` when no mapping fits, naming
    the constraint that binds.
    """
    style = execution or chip.execution
    count = len(work.kernels)
    fixed: Fixed | None = None
    if style == "kernel_by_kernel":
        if partitions is not None:
            raise ValueError("kernel-by-kernel execution puts every kernel alone: it takes no partitions")
        work = replace(work, streamed=1)
        fixed = Fixed(tuple(range(count)), whole_chip=True)
    elif partitions is not None:
        fixed = Fixed(_numbered(work, partitions), whole_chip=False)
    limit = count if max_partitions is None or fixed is not None else max_partitions
    if limit < 1:
        raise ValueError(f"max_partitions must be at least 1, got {max_partitions}")
    resident = work.resident_bytes
    start = _best_start(work, chip, limit) if fixed is None else None
    found = solve_model(work, chip, limit, time_limit_s, fixed, start) if resident <= chip.dram_capacity else None
    if found is None:
        raise InfeasibleMapping(_why_infeasible(work, chip, fixed, limit))
    assignment, tiles, optimal, gap = found
    mapped = evaluate(work, chip, assignment, tiles)
    return IntraChipSolution(chip.name, style, mapped, work.repeat, "optimal" if optimal else "time_limit", gap)


def _best_start(work: ChipWorkload, chip: DataflowChip, parts: int) -> Start | None:
    """The fastest of :func:`start_candidates` that fits the chip, None if none does."""
    best: tuple[float, Start] | None = None
    for assignment, tiles in start_candidates(work, chip, parts):
        try:
            seconds = _time(evaluate(work, chip, assignment, tiles))
        except InfeasibleMapping:
            continue
        if best is None or seconds < best[0]:
            best = (seconds, (assignment, tiles))
    return None if best is None else best[1]


def _numbered(work: ChipWorkload, partitions: Sequence[Sequence[str]]) -> tuple[int, ...]:
    """The partition number of each kernel from lists of kernel names; ValueError unless each kernel is in one
    and no partition is empty."""
    empty = [str(number) for number, names in enumerate(partitions) if not names]
    if empty:
        raise ValueError(f"partitions {', '.join(empty)} name no kernel; leave empty partitions out")
    where = {name: number for number, names in enumerate(partitions) for name in names}
    names = [k.name for k in work.kernels]
    stray = sorted(set(where) - set(names))
    missing = [name for name in names if name not in where]
    if stray or missing or sum(len(p) for p in partitions) != len(names):
        raise ValueError(
            f"partitions must name each kernel of {work.name!r} once (unknown: {', '.join(stray) or 'none'}; "
            f"missing: {', '.join(missing) or 'none'})"
        )
    return tuple(where[name] for name in names)


def _why_infeasible(work: ChipWorkload, chip: DataflowChip, fixed: Fixed | None, limit: int) -> str:
    """Which constraint leaves no mapping: DRAM for the weights, the given mapping's first broken constraint, DRAM
    for the tensors even with every kernel alone, or else too few partitions for the SRAM and tiles."""
    weights = work.resident_bytes
    where = f"chip {chip.name!r}, workload {work.name!r}"
    if weights > chip.dram_capacity:
        return (
            f"{where}: the weights ({weights} bytes over {work.repeat} repeats) exceed its DRAM capacity of "
            f"{chip.dram_capacity} bytes"
        )
    count = len(work.kernels)
    try:
        if fixed is not None:
            evaluate(work, chip, fixed.parts, [chip.tiles if fixed.whole_chip else 1] * count)
        evaluate(work, chip, range(count), [1] * count)
    except InfeasibleMapping as error:
        return f"{where}: {error}"
    return (
        f"{where}: no partitioning into at most {limit} partitions keeps its on-chip tensors within "
        f"{chip.sram_bytes} bytes of SRAM and its kernels within {chip.tiles} tiles; allow more partitions"
    )


def enumerate_intra_chip(
    work: ChipWorkload, chip: DataflowChip, *, max_partitions: int | None = None
) -> IntraChipSolution:
    """The fastest dataflow mapping of a small ``work`` into at most ``max_partitions`` partitions (default: one per
    kernel) by trying every order-respecting partitioning and every tile count of every kernel (a check on
    :func:`solve_intra_chip`; exponential in the kernels)."""
    limit = len(work.kernels) if max_partitions is None else max_partitions
    best: tuple[Partition, ...] | None = None
    for assignment in _assignments(work):
        partitions = _best_tiles(work, chip, assignment) if max(assignment) < limit else None
        if partitions is not None and (best is None or _time(partitions) < _time(best)):
            best = partitions
    if best is None:
        raise InfeasibleMapping(_why_infeasible(work, chip, None, limit))
    return IntraChipSolution(chip.name, "dataflow", best, work.repeat, "enumerated", 0.0)


def _time(partitions: tuple[Partition, ...]) -> float:
    return sum(p.time_s for p in partitions)


def _assignments(work: ChipWorkload) -> Iterator[tuple[int, ...]]:
    """Every numbering of the kernels into consecutive partitions 0, 1, ... that runs producers no later than
    their consumers."""
    count = len(work.kernels)
    for assignment in itertools.product(range(count), repeat=count):
        used = sorted(set(assignment))
        if used != list(range(len(used))):
            continue
        if all(assignment[t.source] <= assignment[t.target] for t in work.tensors):
            yield assignment


def _best_tiles(work: ChipWorkload, chip: DataflowChip, assignment: tuple[int, ...]) -> tuple[Partition, ...] | None:
    """The fastest tile counts for one partitioning (each partition chooses its own), None if none fits."""
    tiles = [0] * len(work.kernels)
    for part in set(assignment):
        members = [i for i, p in enumerate(assignment) if p == part]
        best, choice = math.inf, None
        for option in itertools.product(tile_counts(chip), repeat=len(members)):
            if sum(option) <= chip.tiles:
                slowest = max(chip.kernel_seconds(work.kernels[i].operator, n) for i, n in zip(members, option))
                if slowest < best:
                    best, choice = slowest, option
        if choice is None:
            return None
        for i, n in zip(members, choice):
            tiles[i] = n
    try:
        return evaluate(work, chip, assignment, tiles)
    except InfeasibleMapping:
        return None
