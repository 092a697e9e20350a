"""The intra-chip pass as a mixed-integer program, built and solved with HiGHS.

Variables (``n`` kernels, ``m`` tensors, ``P`` partitions, ``O`` tile options): ``Z[i,p,o]`` (binary) puts kernel
``i`` in partition ``p`` on ``options[o]`` tiles, so DFModel's assignment is ``A[i,p] = sum_o Z[i,p,o]``;
``B[j,p]`` = ``A[src,p] AND A[dst,p]`` (tensor ``j`` stays on chip in ``p``, exact through three inequalities);
``L[j,p] >= S[src,p] - S[dst,p-1] - sum_q B[j,q]`` with ``S[i,p] = sum_{q<=p} A[i,q]`` (tensor ``j`` alive in DRAM
while ``p`` runs); ``t[p]`` the partition's critical time. Compute time is linear because each option's time is a
constant: ``t[p] >= sum_o c[i,o] Z[i,p,o]`` for every kernel ``i``. DFModel's ``D[j,p] = A[src,p] XOR A[dst,p]``
is ``A[src,p] + A[dst,p] - 2 B[j,p]``. A kernel's options keep only tile counts faster than every smaller one; a
cut bounds each partition by its kernels' least tile-seconds over the chip's tiles; the search starts from a
mapping the caller gives (:mod:`stratasim.optimize.intra_chip_start`). Times are in microseconds inside the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np

from stratasim.compute_layer.dataflow_chips import DataflowChip
from stratasim.optimize.chip_workload import ChipWorkload
from stratasim.optimize.milp import silent_highs

__all__ = ["Fixed", "Start", "solve_model", "tile_counts", "tile_options"]

_US = 1e6
_PROVED = 1e-6
"""The relative gap at which a mapping counts as proved optimal (HiGHS's ``mip_rel_gap`` here)."""
_INF = highspy.kHighsInf

Start = tuple[Sequence[int], Sequence[int]]
"""A mapping to start from: each kernel's partition and its tiles."""


@dataclass
class _Program:
    """Columns (bounds, costs, integrality) and rows (bounds, sparse coefficients) of a program being built."""

    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    rows: list[tuple[float, float, dict[int, float]]] = field(default_factory=list)

    def column(self, lower: float, upper: float, cost: float = 0.0, integer: bool = False) -> int:
        self.lower.append(lower)
        self.upper.append(upper)
        self.cost.append(cost)
        self.integer.append(integer)
        return len(self.lower) - 1

    def row(self, terms: dict[int, float], lower: float = -_INF, upper: float = _INF) -> None:
        self.rows.append((lower, upper, terms))

    def solve(self, time_limit_s: float, start: dict[int, float]) -> highspy.Highs:
        """Solve within ``time_limit_s`` seconds from the integer values ``start`` (a mapping to improve on; HiGHS
        completes the continuous columns, or ignores it if it breaks a constraint)."""
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = len(self.lower), len(self.rows)
        lp.col_lower_, lp.col_upper_ = np.array(self.lower), np.array(self.upper)
        lp.col_cost_ = np.array(self.cost)
        lp.row_lower_ = np.array([r[0] for r in self.rows])
        lp.row_upper_ = np.array([r[1] for r in self.rows])
        starts, index, value = [0], list[int](), list[float]()
        for _, _, terms in self.rows:
            index.extend(terms)
            value.extend(terms.values())
            starts.append(len(index))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_, lp.a_matrix_.index_ = np.array(starts), np.array(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(value, dtype=np.float64)
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in self.integer
        ]
        solver = silent_highs()
        solver.setOptionValue("time_limit", float(time_limit_s))
        solver.setOptionValue("mip_rel_gap", _PROVED)
        solver.passModel(lp)
        if start:
            solver.setSolution(len(start), np.array(list(start), dtype=np.int32), np.array(list(start.values())))
        solver.run()
        return solver


def _add(terms: dict[int, float], column: int, coefficient: float) -> None:
    terms[column] = terms.get(column, 0.0) + coefficient


@dataclass(frozen=True)
class Fixed:
    """Decisions taken out of the program: each kernel's partition, and whether each takes the whole chip."""

    parts: tuple[int, ...]
    whole_chip: bool


@dataclass
class _Columns:
    """The program's columns by meaning: ``z[i, p, o]``, ``b[j, p]``, ``t[p]``, and ``a[i, p]``, the ``z``
    columns whose sum is ``A[i, p]``."""

    z: dict[tuple[int, int, int], int]
    b: dict[tuple[int, int], int]
    t: list[int]
    a: dict[tuple[int, int], list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for (i, p, _), column in self.z.items():
            self.a.setdefault((i, p), []).append(column)

    def assigned(self, kernel: int, part: int) -> list[int]:
        """The columns summing to ``A[kernel, part]``."""
        return self.a.get((kernel, part), [])


def tile_counts(chip: DataflowChip) -> list[int]:
    """The tile counts a kernel may take in a partition: the chip's options (powers of two and all its tiles) and
    what each leaves of the chip, so that a kernel can take the tiles a few small ones beside it leave (DFModel's
    ``t_used`` is any integer; these keep the program small)."""
    options = chip.tile_options()
    return sorted(set(options) | {chip.tiles - n for n in options if n < chip.tiles})


def tile_options(work: ChipWorkload, chip: DataflowChip) -> list[list[tuple[int, float]]]:
    """Per kernel, the tile options worth having (each faster than every smaller one) with their seconds."""
    kept = []
    for kernel in work.kernels:
        useful: list[tuple[int, float]] = []
        for tiles in tile_counts(chip):
            seconds = chip.kernel_seconds(kernel.operator, tiles)
            if not useful or seconds < useful[-1][1]:
                useful.append((tiles, seconds))
        kept.append(useful)
    return kept


def _allowed(fixed: Fixed | None, kernel: int, part: int, option: int, options: int) -> bool:
    if fixed is None:
        return True
    return fixed.parts[kernel] == part and (not fixed.whole_chip or option == options - 1)


def _build(
    work: ChipWorkload, chip: DataflowChip, parts: int, fixed: Fixed | None
) -> tuple[_Program, _Columns, list[list[tuple[int, float]]]]:
    program = _Program()
    options = tile_options(work, chip)
    if fixed is not None and fixed.whole_chip:
        options = [[(chip.tiles, chip.kernel_seconds(k.operator, chip.tiles))] for k in work.kernels]
    n = len(work.kernels)
    z = {
        (i, p, o): program.column(0, 1, integer=True)
        for i in range(n)
        for p in range(parts)
        for o in range(len(options[i]))
        if _allowed(fixed, i, p, o, len(options[i]))
    }
    b = {(j, p): program.column(0, 1) for j in range(len(work.tensors)) for p in range(parts)}
    t = [program.column(0, _INF, cost=1.0) for _ in range(parts)]
    columns = _Columns(z, b, t)
    for i in range(n):
        program.row({c: 1.0 for p in range(parts) for c in columns.assigned(i, p)}, 1, 1)
    # Tile-seconds each kernel needs at least: a partition's kernels share the chip's tiles, so its slowest kernel
    # takes at least their sum over the tiles (a valid cut that lifts the relaxation's bound to total work / chip).
    work_us = [min(tiles * seconds for tiles, seconds in kernel) * _US / chip.tiles for kernel in options]
    for p in range(parts):
        tiles: dict[int, float] = {}
        busy: dict[int, float] = {t[p]: -1.0}
        slowest: dict[int, dict[int, float]] = {}
        for (i, p2, o), c in z.items():
            if p2 == p:
                tiles[c] = float(options[i][o][0])
                busy[c] = work_us[i]
                slowest.setdefault(i, {t[p]: -1.0})[c] = options[i][o][1] * _US
        program.row(tiles, upper=chip.tiles)
        program.row(busy, upper=0)
        for terms in slowest.values():
            program.row(terms, upper=0)
    _order_and_symmetry(program, columns, work, parts)
    _tensors(program, columns, work, chip, parts)
    return program, columns, options


def _order_and_symmetry(program: _Program, columns: _Columns, work: ChipWorkload, parts: int) -> None:
    """Producers run no later than consumers (a consumer placed by ``p`` has its producer placed by ``p``), and a
    kernel is in partition ``p + 1`` only if partition ``p`` is used (the partitions are numbered without gaps)."""
    for tensor in work.tensors:
        for p in range(parts - 1):
            terms: dict[int, float] = {}
            for q in range(p + 1):
                for c in columns.assigned(tensor.target, q):
                    _add(terms, c, 1.0)
                for c in columns.assigned(tensor.source, q):
                    _add(terms, c, -1.0)
            program.row(terms, upper=0)
    n = len(work.kernels)
    for p in range(parts - 1):
        used = {c: -1.0 for i in range(n) for c in columns.assigned(i, p)}
        for i in range(n):
            if columns.assigned(i, p + 1):
                program.row(used | {c: 1.0 for c in columns.assigned(i, p + 1)}, upper=0)


def _tensors(program: _Program, columns: _Columns, work: ChipWorkload, chip: DataflowChip, parts: int) -> None:
    """B exact, SRAM capacity over B, DRAM traffic time (crossing tensors and weights), network time, and DRAM
    capacity over the live tensors L."""
    resident = work.resident_bytes
    b, t = columns.b, columns.t
    for p in range(parts):
        sram: dict[int, float] = {}
        memory: dict[int, float] = {t[p]: -1.0}
        network: dict[int, float] = {t[p]: -1.0}
        per_us = _US / chip.dram_bandwidth
        for i, kernel in enumerate(work.kernels):
            for c in columns.assigned(i, p):
                _add(memory, c, work.weight_traffic(i) * per_us)
                _add(network, c, kernel.network_seconds * _US)
        for j, tensor in enumerate(work.tensors):
            source, target = columns.assigned(tensor.source, p), columns.assigned(tensor.target, p)
            program.row({b[j, p]: 1.0} | {c: -1.0 for c in source}, upper=0)
            program.row({b[j, p]: 1.0} | {c: -1.0 for c in target}, upper=0)
            program.row({b[j, p]: 1.0} | {c: -1.0 for c in source + target}, lower=-1)
            sram[b[j, p]] = float(tensor.bytes)
            for c in source:
                _add(memory, c, tensor.bytes * per_us)
            for c in target:
                _add(memory, c, tensor.bytes * per_us)
            _add(memory, b[j, p], -2 * tensor.bytes * per_us)
        program.row(sram, upper=chip.sram_bytes)
        program.row(memory, upper=0)
        program.row(network, upper=0)
    _lifetimes(program, columns, work, parts, chip.dram_capacity - resident)


def _lifetimes(program: _Program, columns: _Columns, work: ChipWorkload, parts: int, room: float) -> None:
    """``L[j,p] >= S[src,p] - S[dst,p-1] - sum_q B[j,q]``, and the tensors alive in each partition within
    ``room`` (DRAM left beside the weights)."""
    capacity: list[dict[int, float]] = [{} for _ in range(parts)]
    for j, tensor in enumerate(work.tensors):
        for p in range(parts):
            live = program.column(0, _INF)
            terms: dict[int, float] = {live: 1.0}
            for q in range(p + 1):
                for c in columns.assigned(tensor.source, q):
                    _add(terms, c, -1.0)
            for q in range(p):
                for c in columns.assigned(tensor.target, q):
                    _add(terms, c, 1.0)
            for q in range(parts):
                _add(terms, columns.b[j, q], 1.0)
            program.row(terms, lower=0)
            capacity[p][live] = float(tensor.bytes)
    for terms in capacity:
        if terms:
            program.row(terms, upper=room)


def _start(columns: _Columns, options: list[list[tuple[int, float]]], start: Start | None) -> dict[int, float]:
    """The ``z`` values of ``start`` (each kernel's partition and tiles), or nothing when its columns do not
    exist."""
    if start is None:
        return {}
    assignment, tiles = start
    chosen = []
    for i, (part, count) in enumerate(zip(assignment, tiles)):
        option = next((o for o, (n, _) in enumerate(options[i]) if n == count), None)
        chosen.append(None if option is None else columns.z.get((i, part, option)))
    if None in chosen:
        return {}
    return {column: float(column in chosen) for column in columns.z.values()}


def solve_model(
    work: ChipWorkload,
    chip: DataflowChip,
    parts: int,
    time_limit_s: float,
    fixed: Fixed | None = None,
    start: Start | None = None,
) -> tuple[Sequence[int], Sequence[int], bool, float] | None:
    """The best assignment (partition per kernel) and tiles per kernel found within ``parts`` partitions, whether
    it is proved optimal, and the relative gap; None when the program is infeasible, TimeoutError when nothing was
    found in time. ``fixed`` takes the partitions (and the tiles) out of the program; ``start`` is a feasible
    mapping for the search to improve on (each kernel's partition and tiles)."""
    program, columns, options = _build(work, chip, parts, fixed)
    solver = program.solve(time_limit_s, _start(columns, options, start))
    status = solver.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return None
    values = solver.getSolution().col_value
    if (
        status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit)
        or not solver.getInfo().primal_solution_status
    ):
        raise TimeoutError(
            f"HiGHS found no mapping of {work.name!r} onto chip {chip.name!r} within {time_limit_s} s "
            f"({solver.modelStatusToString(status)}): allow more time or fewer partitions"
        )
    assignment = [0] * len(work.kernels)
    tiles = [0] * len(work.kernels)
    for (i, p, o), c in columns.z.items():
        if values[c] > 0.5:
            assignment[i], tiles[i] = p, options[i][o][0]
    info = solver.getInfo()
    gap = min(float(info.mip_gap), _bound_gap(work, chip, options, info.objective_function_value))
    return assignment, tiles, status == highspy.HighsModelStatus.kOptimal or gap <= _PROVED, gap


def _bound_gap(
    work: ChipWorkload, chip: DataflowChip, options: list[list[tuple[int, float]]], found_us: float
) -> float:
    """The relative gap of ``found_us`` to a bound no mapping beats: the partitions' times sum to at least the
    kernels' least tile-seconds over the chip's tiles, their weight traffic over the DRAM bandwidth, and their
    network seconds (HiGHS reports no gap when a time limit stops it before its root relaxation is solved)."""
    compute = sum(min(tiles * seconds for tiles, seconds in kernel) for kernel in options) / chip.tiles
    weights = sum(work.weight_traffic(i) for i in range(len(work.kernels))) / chip.dram_bandwidth
    network = sum(k.network_seconds for k in work.kernels)
    bound_us = max(compute, weights, network) * _US
    return max(found_us - bound_us, 0.0) / found_us if found_us > 0 else 0.0
