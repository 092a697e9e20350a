"""Mappings for the intra-chip search to start from: kernel-by-kernel (when the partitions allow it) and greedy
in-order fusions, each kernel on a share of its partition's tiles. :func:`~stratasim.optimize.intra_chip.
solve_intra_chip` evaluates them and hands HiGHS the fastest that fits, so a solve stopped by its time limit is
never slower than the best of them.
"""

from __future__ import annotations

from stratasim.compute_layer.dataflow_chips import DataflowChip
from stratasim.optimize.chip_workload import ChipWorkload
from stratasim.optimize.intra_chip_model import Start, tile_options

__all__ = ["start_candidates"]


def start_candidates(work: ChipWorkload, chip: DataflowChip, parts: int) -> list[Start]:
    """Kernel-by-kernel on the whole chip when ``parts`` allows one partition per kernel; the kernels packed in
    order until a partition's tiles (one a kernel) or SRAM would overflow; and, for every count of partitions up
    to ``parts``, the kernels cut in order into that many runs of about equal work (each kernel on the most tiles
    within its share of the partition, the share proportional to the tile-seconds it needs) and into that many runs
    around the heaviest kernels (each on the tiles its run's other kernels leave, they on one each). Candidates
    may break a constraint; the caller evaluates them."""
    options = tile_options(work, chip)
    count = len(work.kernels)
    need = [min(tiles * seconds for tiles, seconds in kernel) for kernel in options]
    found: list[Start] = []
    if count <= parts:
        found.append((tuple(range(count)), tuple(kernel[-1][0] for kernel in options)))
    runs = range(1, min(parts, count) + 1)
    for assignment in [_packed(work, chip), *(_balanced(need, k) for k in runs)]:
        if max(assignment) < parts:
            found.append((tuple(assignment), _shares(chip, options, need, assignment)))
    for k in runs:
        assignment = _anchored(need, k)
        found.append((tuple(assignment), _beside_anchors(chip, options, need, assignment)))
    return found


def _anchored(need: list[float], runs: int) -> list[int]:
    """The kernels, in order, cut into ``runs`` consecutive runs, each holding one of the ``runs`` kernels that
    need the most tile-seconds (a run starts at each of them but the first; the kernels before it join it)."""
    heavy = sorted(sorted(range(len(need)), key=lambda i: -need[i])[:runs])
    assignment: list[int] = []
    part = 0
    for i in range(len(need)):
        if part + 1 < len(heavy) and i == heavy[part + 1]:
            part += 1
        assignment.append(part)
    return assignment


def _beside_anchors(
    chip: DataflowChip, options: list[list[tuple[int, float]]], need: list[float], assignment: list[int]
) -> tuple[int, ...]:
    """Each run's kernels on one tile, but its heaviest, which takes the most tiles the others leave."""
    tiles = [options[i][0][0] for i in range(len(need))]
    for part in set(assignment):
        members = [i for i, p in enumerate(assignment) if p == part]
        anchor = max(members, key=lambda i: need[i])
        left = chip.tiles - sum(tiles[i] for i in members if i != anchor)
        tiles[anchor] = max((n for n, _ in options[anchor] if n <= left), default=options[anchor][0][0])
    return tuple(tiles)


def _shares(
    chip: DataflowChip, options: list[list[tuple[int, float]]], need: list[float], assignment: list[int]
) -> tuple[int, ...]:
    """Each kernel's tiles in its partition: its options' most tiles within its share of the chip."""
    total: dict[int, float] = {}
    for i, part in enumerate(assignment):
        total[part] = total.get(part, 0.0) + need[i]
    chosen = []
    for i, part in enumerate(assignment):
        share = chip.tiles * need[i] / total[part] if total[part] > 0 else 1
        chosen.append(max(tiles for tiles, _ in options[i] if tiles <= max(share, 1)))
    return tuple(chosen)


def _balanced(need: list[float], runs: int) -> list[int]:
    """The kernels, in order, cut into ``runs`` consecutive runs, each closed once it holds its share of the
    total work (a run per kernel at least, so every run is used)."""
    total = sum(need) or 1.0
    assignment: list[int] = []
    part, done = 0, 0.0
    for i, work in enumerate(need):
        left = len(need) - i
        if part < runs - 1 and (done >= total * (part + 1) / runs or left <= runs - 1 - part) and assignment:
            part += 1
        assignment.append(part)
        done += work
    return assignment


def _packed(work: ChipWorkload, chip: DataflowChip) -> list[int]:
    """Each kernel's partition when the kernels, in order, fill a partition until its tiles (one per kernel) or
    its SRAM would overflow."""
    parts: list[int] = []
    current = kept = members = 0
    for i in range(len(work.kernels)):
        joining = sum(t.bytes for t in work.tensors if t.target == i and parts[t.source] == current)
        if members and (members + 1 > chip.tiles or kept + joining > chip.sram_bytes):
            current, kept, members, joining = current + 1, 0, 0, 0
        parts.append(current)
        kept, members = kept + joining, members + 1
    return parts
