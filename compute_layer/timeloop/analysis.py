"""From a mapping to access counts per level, cycles and energy (Timeloop's reuse analysis, simplified).

For operand ``o`` kept at level ``c`` whose next outer level keeping ``o`` is ``p``, the words moved between
them are ``footprint(o, tile at c) x refills(o, c)``. ``refills`` multiplies the factors of the temporal loops
above ``c``, walked from the innermost outwards, except the leading run of loops over dimensions that do not
index ``o``: while only those iterate, ``c`` keeps its tile (stationarity). The tile of the PE-local level is
taken over all PEs, so data multicast to several PEs, or partial sums reduced across them, cross once.
Inputs and weights move down (read at ``p``, written at ``c``); outputs move up (read at ``c``, written at
``p``) and come back down for further accumulation, except the first time each output word is touched.
At the innermost level keeping it, every MAC reads an input and a weight and updates an output.

    compute cycles = temporal iterations x ops per point    (SCALE-Sim's formula on a systolic array)
    level cycles   = max(ceil(reads / read bandwidth), ceil(writes / write bandwidth),
                         ceil((reads + writes) / shared bandwidth))       (a shared port: one for both)
    cycles         = max(compute cycles, every level's cycles)       (transfers overlap compute)
    energy (pJ)    = MACs x MAC energy + sum of accesses x energy per access (the operand's own price where the
                     level gives one)

An accelerator costed as ZigZag (``zigzag_compat``) takes ZigZag's latency instead (:func:`_zigzag`).

On a systolic array with ``dram_bandwidth`` (SCALE-Sim's user bandwidth) the outermost level's cycles are instead
SCALE-Sim's timeline of fill, compute, stalls and drain (:mod:`~stratasim.compute_layer.timeloop.scalesim_memory`).
Operands in an accelerator's ``onload`` (ZigZag's data onloading) load their outermost on-chip tile from the backing
store before compute starts: those cycles come first, overlapped with nothing.

Simplifications, as in first-order Timeloop: a convolution's input tile is refetched whole (halo included)
on every refill; a padded last tile moves padded words. An operand that bypasses the PE registers is read (an
output updated) at its innermost level once per MAC over the PEs sharing each word: one read multicast to the PEs
along the dimensions that do not index it, one update for the partial sums reduced across them.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from stratasim.compute_layer.timeloop.accelerator import Accelerator, StorageLevel
from stratasim.compute_layer.timeloop.mapping import Loop, Mapping, check, tile
from stratasim.compute_layer.timeloop.problem import Problem
from stratasim.compute_layer.timeloop.scalesim import scalesim_cycles
from stratasim.compute_layer.timeloop.scalesim_memory import user_bandwidth_cycles

__all__ = ["LevelAccesses", "Evaluation", "evaluate"]


@dataclass(frozen=True)
class LevelAccesses:
    """Words read from and written to one storage level over the whole operator, and the cycles they need."""

    name: str
    reads: int
    writes: int
    cycles: int


@dataclass(frozen=True)
class Evaluation:
    """The cost of one mapping: ``bound`` is ``"compute"`` or the name of the level that sets ``cycles``."""

    mapping: Mapping
    cycles: int
    compute_cycles: int
    energy_pj: float
    macs: int
    levels: tuple[LevelAccesses, ...]
    bound: str


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _refills(problem: Problem, mapping: Mapping, operand: str, level: int) -> int:
    relevant = problem.relevant[operand]
    loops: list[Loop] = [loop for above in mapping.levels[level + 1 :] for loop in reversed(above)]
    count, stationary = 1, True
    for dim, factor in loops:
        if factor == 1 or (stationary and dim not in relevant):
            continue
        stationary = False
        count *= factor
    return count


def _fanout(problem: Problem, mapping: Mapping, operand: str) -> int:
    """PEs sharing each word of ``operand`` in a step: the spatial factors of the dimensions not indexing it (a
    word read from a shared level is multicast to them; a partial sum is reduced across them)."""
    return prod(f for d, f in (*mapping.rows, *mapping.cols) if d not in problem.relevant[operand])


def _compute_cycles(problem: Problem, acc: Accelerator, mapping: Mapping) -> tuple[int, int]:
    """(compute cycles, cycles with SCALE-Sim's DRAM ports' stalls, fill and drain: the same without them)."""
    if acc.dataflow is not None and acc.spatial_dims(problem.kind) is not None:
        compute = scalesim_cycles(problem, acc.rows, acc.cols, acc.dataflow)
        if acc.dram_bandwidth is None:
            return compute, compute
        sram = acc.levels[1].partitions
        words = (sram["inputs"], sram["weights"], sram["outputs"])
        timeline = user_bandwidth_cycles(problem, acc.rows, acc.cols, acc.dataflow, words, acc.dram_bandwidth)
        return compute, timeline.total
    steps = mapping.temporal_steps() * problem.ops_per_point
    return steps, steps


def _onload_cycles(problem: Problem, acc: Accelerator, mapping: Mapping) -> int:
    """Cycles to load the ``onload`` operands' tiles at their outermost on-chip level before compute starts."""
    store = acc.levels[-1]
    words = 0
    for operand in acc.onload & set(problem.operands):
        chain = [i for i, level in enumerate(acc.levels[:-1]) if operand in level.keeps]
        if chain:
            words += problem.footprint(operand, tile(problem, mapping, chain[-1], True))
    return 0 if store.read_bandwidth is None else _ceil_div(words, store.read_bandwidth)


def evaluate(problem: Problem, acc: Accelerator, mapping: Mapping, checked: bool = False) -> Evaluation:
    """Access counts, cycles and energy of ``mapping``; raises MappingError if it is invalid (unless the
    caller has ``checked`` it already)."""
    if not checked:
        check(problem, acc, mapping)
    macs = problem.points * problem.ops_per_point
    reads, writes = _words_moved(problem, acc, mapping, macs)
    accesses = []
    for index, level in enumerate(acc.levels):
        instances = acc.pes if index == 0 else 1
        read, written = sum(reads[index].values()), sum(writes[index].values())
        accesses.append(LevelAccesses(level.name, read, written, _port_cycles(level, read, written, instances)))
    energy = (
        macs * acc.mac_pj
        + sum(
            words * level.read_price(operand) for level, by in zip(acc.levels, reads) for operand, words in by.items()
        )
        + sum(
            words * level.write_price(operand) for level, by in zip(acc.levels, writes) for operand, words in by.items()
        )
    )
    if acc.zigzag_compat:
        return _zigzag(problem, acc, mapping, accesses, energy, macs)
    compute, streamed = _compute_cycles(problem, acc, mapping)
    if streamed > compute:  # SCALE-Sim's DRAM ports: the outermost level is what the array waits for
        last = accesses[-1]
        accesses[-1] = LevelAccesses(last.name, last.reads, last.writes, max(last.cycles, streamed))
    slowest = max(accesses, key=lambda a: a.cycles)
    bound = slowest.name if slowest.cycles > compute else "compute"
    onload = _onload_cycles(problem, acc, mapping)
    return Evaluation(
        mapping=mapping,
        cycles=onload + max(compute, slowest.cycles),
        compute_cycles=compute,
        energy_pj=energy,
        macs=macs,
        levels=tuple(accesses),
        bound=bound,
    )


def _words_moved(
    problem: Problem, acc: Accelerator, mapping: Mapping, macs: int
) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """Words read from and written to each level of ``acc``, by operand: the MACs' touches at each operand's
    innermost level, then each tile's refills between a level keeping it and the next outer one."""
    depth = len(acc.levels)
    reads: list[dict[str, int]] = [dict.fromkeys(problem.operands, 0) for _ in range(depth)]
    writes: list[dict[str, int]] = [dict.fromkeys(problem.operands, 0) for _ in range(depth)]
    top = tile(problem, mapping, depth - 1, True)
    for operand in problem.operands:
        chain = [i for i, level in enumerate(acc.levels) if operand in level.keeps]
        touches = macs if chain[0] == 0 else macs // _fanout(problem, mapping, operand)
        if operand == "outputs":
            writes[chain[0]][operand] += touches
            # An element-wise output is written once per point; a MAC's is read, updated and written back.
            reads[chain[0]][operand] += touches if problem.kind != "elementwise" else 0
        else:
            reads[chain[0]][operand] += touches
        for child, parent in zip(chain, chain[1:]):
            moved = problem.footprint(operand, tile(problem, mapping, child, True)) * _refills(
                problem, mapping, operand, child
            )
            if operand == "outputs":
                back = max(0, moved - problem.footprint(operand, top))
                reads[child][operand] += moved
                writes[parent][operand] += moved
                reads[parent][operand] += back
                writes[child][operand] += back
            else:
                reads[parent][operand] += moved
                writes[child][operand] += moved
    return reads, writes


def _port_cycles(level: StorageLevel, reads: int, writes: int, instances: int = 1) -> int:
    """Cycles the level's ports need for ``reads`` and ``writes`` words (0 where it has no bound)."""
    cycles = 0
    for count, bandwidth in (
        (reads, level.read_bandwidth),
        (writes, level.write_bandwidth),
        (reads + writes, level.shared_bandwidth),
    ):
        if bandwidth is not None:
            cycles = max(cycles, _ceil_div(count, bandwidth * instances))
    return cycles


def _own_allocation(
    problem: Problem, acc: Accelerator, mapping: Mapping, operand: str, child: int, parent: int
) -> Mapping:
    """``mapping`` with ``operand``'s level ``child`` also taking, innermost first, the loops of the levels between it
    and ``parent`` (which do not keep it) while its tile fits there: ZigZag allocates each operand's memories
    bottom-up on their own, so a PE's weight register spans loops that the outputs' register leaves to the SRAM."""
    levels = [list(loops) for loops in mapping.levels]
    spec = acc.levels[child]
    room = spec.capacity(operand)
    for level in range(child + 1, parent):
        while levels[level]:
            trial = [list(loops) for loops in levels]
            trial[child] = [levels[level][-1], *levels[child]]
            trial[level] = levels[level][:-1]
            candidate = Mapping(tuple(tuple(loops) for loops in trial), mapping.rows, mapping.cols)
            if room is not None and problem.footprint(operand, tile(problem, candidate, child, False)) > room:
                return Mapping(tuple(tuple(loops) for loops in levels), mapping.rows, mapping.cols)
            levels = trial
    return Mapping(tuple(tuple(loops) for loops in levels), mapping.rows, mapping.cols)


def _zigzag(
    problem: Problem, acc: Accelerator, mapping: Mapping, accesses: list[LevelAccesses], energy: float, macs: int
) -> Evaluation:
    """ZigZag's latency (zigzag-dse 3.9.1, ``cost_model.py``: ``calc_overall_latency``, ``calc_loading_single_port*``,
    ``reduce_ordered``) of ``mapping``: ideal temporal cycles, plus the transfers with the backing store made once
    (an operand's tile at its outermost on-chip level moved a single time), less the port's idle cycles during
    compute handed to the largest of them first, each down to the tile its innermost level holds (one PE's
    registers, or the whole tile of a level the array shares), the inputs' before compute (the
    longest of them: ZigZag loads the operands side by side) and the outputs' after it, plus one systolic fill and
    drain (``systolic_drain_cycle``: one cycle per unit of each systolic axis used, less one).

    What the backing store moves repeatedly during compute sets its port's busy cycles; a level slower than compute
    stalls it."""
    store = acc.levels[-1]
    compute = mapping.temporal_steps() * problem.ops_per_point
    periodic_reads, periodic_writes, once = _backing_store_transfers(problem, acc, mapping)
    busy = _port_cycles(store, periodic_reads, periodic_writes)
    remaining = _after_idle_cycles(once, max(0, compute - busy))
    onload = max((c for o, c in remaining.items() if o != "outputs"), default=0)
    offload = remaining.get("outputs", 0)
    drain = 0
    if acc.dataflow is not None:
        drain = sum(max(prod(f for _, f in axis) - 1, 0) for axis in (mapping.rows, mapping.cols))
    on_chip = max((a.cycles for a in accesses[:-1]), default=0)
    steady = max(compute, busy, on_chip)
    bound = (
        "compute"
        if steady == compute
        else (store.name if steady == busy else max(accesses[:-1], key=lambda a: a.cycles).name)
    )
    return Evaluation(
        mapping=mapping,
        cycles=onload + steady + offload + drain,
        compute_cycles=compute,
        energy_pj=energy,
        macs=macs,
        levels=tuple(accesses),
        bound=bound,
    )


def _backing_store_transfers(
    problem: Problem, acc: Accelerator, mapping: Mapping
) -> tuple[int, int, list[tuple[str, int, int]]]:
    """ZigZag's traffic with the backing store: the words read and written repeatedly during compute, and the
    transfers made once, each as (operand, cycles, least cycles after idle cycles are handed out)."""
    store = acc.levels[-1]
    periodic_reads = periodic_writes = 0
    once: list[tuple[str, int, int]] = []
    for operand in problem.operands:
        chain = [i for i, level in enumerate(acc.levels) if operand in level.keeps]
        if len(chain) < 2:
            continue
        child = chain[-2]
        own = _own_allocation(problem, acc, mapping, operand, child, chain[-1])
        words = problem.footprint(operand, tile(problem, own, child, True))
        refills = _refills(problem, own, operand, child)
        if refills == 1:
            # What its innermost level holds, one PE's registers or a shared level's tile (ZigZag's minimum).
            least = problem.footprint(operand, tile(problem, mapping, chain[0], chain[0] > 0))
            once.append((operand, _port_cycles(store, words, 0), _port_cycles(store, least, 0)))
        elif operand == "outputs":
            back = max(
                0, words * refills - problem.footprint(operand, tile(problem, mapping, len(acc.levels) - 1, True))
            )
            periodic_writes, periodic_reads = periodic_writes + words * refills, periodic_reads + back
        else:
            periodic_reads += words * refills
            once.append((operand, _port_cycles(store, words, 0), _port_cycles(store, words, 0)))  # its first period
    return periodic_reads, periodic_writes, once


def _after_idle_cycles(once: list[tuple[str, int, int]], idle: int) -> dict[str, int]:
    """The cycles left of each transfer made ``once`` after the port's ``idle`` cycles during compute are handed to
    the largest first (``reduce_ordered``), each down to its least."""
    remaining = {}
    for operand, cycles, least in sorted(once, key=lambda t: -t[1]):  # stable: inputs, weights, outputs
        cut = min(max(0, cycles - least), idle)
        idle -= cut
        remaining[operand] = cycles - cut
    return remaining
