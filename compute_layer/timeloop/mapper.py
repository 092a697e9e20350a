"""The mapper: search the valid mappings of a problem on an accelerator for the best latency, energy or EDP.

Spatial choices put at most one dimension on the array's rows and one on its columns (a systolic dataflow
restricts which, and keeps only the unrollings using the most PEs), with factors that divide the dimension or
fill the axis (padding the last tile). Temporal factors at every level but the outermost divide what is left of
the dimension; the outermost level takes the rest. Loop order matters only above the PE-local level and only
among loops with factors above 1.

Spaces of at most ``exhaustive_limit`` valid mappings are searched exhaustively, pruning a branch as soon
as an inner level overflows (tiles only grow outwards). Larger ones are sampled with a seeded
``random.Random`` (Timeloop's random mapper: prime factors dealt to random levels), after candidates that keep
every loop on chip in each loop order, filled bottom-up into the levels (each operand crossing the backing store
once when the chip holds it), or stream the outermost loop from the backing store: random dealing rarely finds
them. On an accelerator costed as ZigZag (``zigzag_compat``) the candidates are ZigZag's instead: each loop order
allocated bottom-up, as its LOMA mapper does. The mapping that unrolls nothing and keeps every loop at the outermost level is always a candidate: it has
the smallest tiles, so a search comes back empty only when nothing fits. Ties keep the first mapping found, so
results are deterministic for a given seed.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from functools import cache
from math import factorial, isqrt, prod

from stratasim.compute_layer.timeloop.accelerator import Accelerator
from stratasim.compute_layer.timeloop.analysis import Evaluation, evaluate
from stratasim.compute_layer.timeloop.mapping import Loop, Mapping, MappingError, check, tile
from stratasim.compute_layer.timeloop.problem import Problem

__all__ = ["OBJECTIVES", "factoring_steps", "search", "mappings", "space_size"]

OBJECTIVES: dict[str, Callable[[Evaluation], tuple[float, float]]] = {
    "latency": lambda e: (e.cycles, e.energy_pj),
    "energy": lambda e: (e.energy_pj, e.cycles),
    "edp": lambda e: (e.cycles * e.energy_pj, e.cycles),
}
"""Search objectives: each maps an evaluation to a key to minimise (ties broken by the other metric)."""


def factoring_steps(extent: int) -> int:
    """The trial divisions the search spends on a dimension of ``extent``: its divisors and its prime factors, each
    found by dividing up to the square root (some 10^7 a second: a dimension of 2^63 takes minutes); other work grows
    with the number of divisors, at most a few thousand for any 64-bit extent."""
    return 2 * isqrt(max(extent, 0)) + 1


@cache
def _divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return tuple(sorted({*small, *(n // d for d in small)}))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _axis_choices(problem: Problem, dims: frozenset[str] | None, size: int) -> list[tuple[Loop, ...]]:
    choices: list[tuple[Loop, ...]] = [()]
    for dim in problem.names:
        if dims is not None and dim not in dims:
            continue
        extent = problem.size(dim)
        factors = {d for d in _divisors(extent) if 1 < d <= size} | ({min(extent, size)} - {1})
        choices += [((dim, f),) for f in sorted(factors)]
    return choices


def _unrolled(choice: tuple[tuple[Loop, ...], tuple[Loop, ...]]) -> int:
    return prod(f for _, f in (*choice[0], *choice[1]))


def spatial_choices(problem: Problem, acc: Accelerator) -> list[tuple[tuple[Loop, ...], tuple[Loop, ...]]]:
    """Every (rows, cols) unrolling the mapper considers.

    On a systolic array only the unrollings using the most PEs: its cycles are SCALE-Sim's, which spread the
    dataflow's dimensions over the whole array, and a mapping using part of it would price the energy of a
    schedule other than the one timed (ZigZag's TPU-like example likewise unrolls 32 x 32).
    """
    allowed = acc.spatial_dims(problem.kind)
    rows = _axis_choices(problem, None if allowed is None else allowed[0], acc.rows)
    cols = _axis_choices(problem, None if allowed is None else allowed[1], acc.cols)
    pairs = []
    for r, c in itertools.product(rows, cols):
        if r and c and r[0][0] == c[0][0] and r[0][1] * c[0][1] > problem.size(r[0][0]) * 2:
            continue  # the same dimension on both axes, unrolled far beyond its size
        pairs.append((r, c))
    if acc.dataflow is not None and allowed is not None:
        most = max(map(_unrolled, pairs))
        pairs = [pair for pair in pairs if _unrolled(pair) == most]
    return pairs


def _remaining(problem: Problem, rows: tuple[Loop, ...], cols: tuple[Loop, ...]) -> dict[str, int]:
    spatial = {d: prod(f for e, f in (*rows, *cols) if e == d) for d in problem.names}
    return {d: _ceil_div(problem.size(d), spatial[d]) for d in problem.names}


def _orders(loops: tuple[Loop, ...]) -> Iterator[tuple[Loop, ...]]:
    active = [loop for loop in loops if loop[1] > 1]
    yield from itertools.permutations(active)


def _fits(problem: Problem, acc: Accelerator, partial: Mapping, level: int) -> bool:
    spec = acc.levels[level]
    extent = tile(problem, partial, level, False)
    kept = {o: problem.footprint(o, extent) for o in problem.operands if o in spec.keeps}
    if any(spec.partitions.get(o, need) < need for o, need in kept.items()):
        return False
    return spec.words is None or sum(kept.values()) <= spec.words


def mappings(problem: Problem, acc: Accelerator) -> Iterator[Mapping]:
    """Every valid mapping the mapper considers, in a fixed order (exhaustive, with capacity pruning)."""
    for rows, cols in spatial_choices(problem, acc):
        left = _remaining(problem, rows, cols)
        for temporal in _factorings(problem, acc, rows, cols, [], left):
            ordered = [list(_orders(loops)) for loops in temporal[1:]]
            for orders in itertools.product(*ordered):
                yield Mapping((temporal[0], *orders), rows, cols)


def _factorings(
    problem: Problem,
    acc: Accelerator,
    rows: tuple[Loop, ...],
    cols: tuple[Loop, ...],
    inner: list[tuple[Loop, ...]],
    left: dict[str, int],
) -> Iterator[list[tuple[Loop, ...]]]:
    depth = len(acc.levels)
    level = len(inner)
    if level == depth - 1:
        yield [*inner, tuple((d, n) for d, n in left.items() if n > 1)]
        return
    names = list(left)
    for factors in itertools.product(*(_divisors(left[d]) for d in names)):
        loops = tuple((d, f) for d, f in zip(names, factors) if f > 1)
        partial = Mapping(tuple([*inner, loops]) + ((),) * (depth - level - 1), rows, cols)
        if not _fits(problem, acc, partial, level):
            continue
        rest = {d: left[d] // f for d, f in zip(names, factors)}
        yield from _factorings(problem, acc, rows, cols, [*inner, loops], rest)


@cache
def _chains(n: int, parts: int) -> int:
    if parts == 1:
        return 1
    return sum(_chains(n // d, parts - 1) for d in _divisors(n))


def space_size(problem: Problem, acc: Accelerator) -> int:
    """An upper bound of the number of mappings :func:`mappings` would yield (capacity ignored)."""
    depth = len(acc.levels)
    temporal = prod(_chains(problem.size(d), depth) for d in problem.names)
    orders = factorial(len(problem.names)) ** (depth - 1)
    return len(spatial_choices(problem, acc)) * temporal * orders


@cache
def _primes(n: int) -> tuple[int, ...]:
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return tuple(factors + ([n] if n > 1 else []))


def _sample(
    problem: Problem, acc: Accelerator, rng: random.Random, choices: list[tuple[tuple[Loop, ...], tuple[Loop, ...]]]
) -> Mapping:
    """A random mapping: a spatial choice biased to high PE use, each prime factor of what is left of a
    dimension placed at a random level (pushed outwards where it overflows), random loop orders."""
    rows, cols = choices[int(len(choices) * rng.random() ** 3)]
    depth = len(acc.levels)
    factors = [dict.fromkeys(problem.names, 1) for _ in range(depth)]
    for dim, left in _remaining(problem, rows, cols).items():
        for p in _primes(left):
            factors[rng.randrange(depth)][dim] *= p

    def build() -> Mapping:
        return Mapping(tuple(tuple((d, f) for d, f in level.items() if f > 1) for level in factors), rows, cols)

    # Repair: while a level overflows, push one prime factor of a random dimension out to the next level.
    for level in range(depth - 1):
        while not _fits(problem, acc, build(), level):
            crowded = [d for d, f in factors[level].items() if f > 1]
            if not crowded:
                break
            dim = rng.choice(crowded)
            prime = _primes(factors[level][dim])[0]
            factors[level][dim] //= prime
            factors[level + 1][dim] *= prime
    levels = [tuple((d, f) for d, f in level.items() if f > 1) for level in factors]
    shuffled = [levels[0]] + [tuple(rng.sample(loops, len(loops))) for loops in levels[1:]]
    return Mapping(tuple(shuffled), rows, cols)


def _fallback(problem: Problem, acc: Accelerator) -> list[Mapping]:
    """Two candidates with every temporal loop at the outermost level: no spatial unrolling (the smallest
    tiles, so valid whenever any mapping is) and the largest spatial unrolling."""
    rows, cols = max(spatial_choices(problem, acc), key=_unrolled)
    inner = ((),) * (len(acc.levels) - 1)
    unrolled = tuple((d, n) for d, n in _remaining(problem, rows, cols).items() if n > 1)
    serial = tuple((d, problem.size(d)) for d in problem.names if problem.size(d) > 1)
    return [Mapping(inner + (serial,)), Mapping(inner + (unrolled,), rows, cols)]


def _filled(
    problem: Problem,
    acc: Accelerator,
    order: tuple[Loop, ...],
    top: tuple[Loop, ...],
    rows: tuple[Loop, ...],
    cols: tuple[Loop, ...],
) -> Mapping:
    """``order`` (outermost first) over the on-chip levels, filled from the PE's upwards with whole innermost loops
    while each level holds them (ZigZag's and Timeloop's bottom-up allocation), the rest at the outermost on-chip
    level; ``top`` at the backing store."""
    depth = len(acc.levels)
    levels: list[tuple[Loop, ...]] = [()] * (depth - 2) + [order, top]
    for level in range(depth - 2):
        while levels[depth - 2]:
            loop, rest = levels[depth - 2][-1], levels[depth - 2][:-1]
            trial = [*levels]
            trial[level], trial[depth - 2] = (loop, *levels[level]), rest
            if not _fits(problem, acc, Mapping(tuple(trial), rows, cols), level):
                break
            levels = trial
    return Mapping(tuple(levels), rows, cols)


def _on_chip(problem: Problem, acc: Accelerator, rng: random.Random, orders: int) -> list[Mapping]:
    """Candidates keeping every temporal loop on chip, filled bottom-up (:func:`_filled`), so that each operand crosses
    the backing store once when the chip holds the whole problem, and the same with the outermost loop split by each
    of its divisors into the backing store (a smaller first tile, streamed): per spatial choice, up to ``orders``
    loop orders, on the spatial choices using the most PEs. Random dealing of factors to levels rarely finds them."""
    found = []
    for order, rows, cols in _loop_orders(problem, acc, rng, orders):
        found.append(_filled(problem, acc, order, (), rows, cols))
        if order:
            (dim, n), rest = order[0], order[1:]
            for f in _divisors(n)[1:]:
                kept = ((dim, n // f), *rest) if f < n else rest
                found.append(_filled(problem, acc, kept, ((dim, f),), rows, cols))
    return found


def _loop_orders(
    problem: Problem, acc: Accelerator, rng: random.Random, orders: int
) -> Iterator[tuple[tuple[Loop, ...], tuple[Loop, ...], tuple[Loop, ...]]]:
    """(loop order, rows, cols): per spatial choice using the most PEs, every order of the temporal loops left (at most
    ``orders`` of them, sampled)."""
    choices = spatial_choices(problem, acc)
    most = max(map(_unrolled, choices))
    for rows, cols in (choice for choice in choices if _unrolled(choice) == most):
        loops = tuple((d, n) for d, n in _remaining(problem, rows, cols).items() if n > 1)
        every = list(itertools.permutations(loops))
        for order in every if len(every) <= orders else rng.sample(every, orders):
            yield order, rows, cols


def _bottom_up(
    problem: Problem, acc: Accelerator, order: tuple[Loop, ...], rows: tuple[Loop, ...], cols: tuple[Loop, ...]
) -> Mapping:
    """``order`` (outermost first) allocated from the PE's level upwards as ZigZag's LOMA does: each level takes the
    innermost loops left while its tiles fit, a loop that does not fit whole split by its largest divisor that does;
    what no on-chip level holds goes to the backing store."""
    depth = len(acc.levels)
    left = list(order)
    levels: list[tuple[Loop, ...]] = [()] * depth
    for level in range(depth - 1):
        while left:
            dim, n = left[-1]
            fitting = None
            for f in reversed(_divisors(n)[1:]):
                trial = [*levels]
                trial[level] = ((dim, f), *levels[level])
                if _fits(problem, acc, Mapping(tuple(trial), rows, cols), level):
                    fitting = f
                    break
            if fitting is None:
                break
            levels[level] = ((dim, fitting), *levels[level])
            if fitting == n:
                left.pop()
            else:
                left[-1] = (dim, n // fitting)
                break
    levels[depth - 1] = tuple(left)
    return Mapping(tuple(levels), rows, cols)


def _loma(problem: Problem, acc: Accelerator, rng: random.Random, orders: int) -> list[Mapping]:
    """ZigZag's candidates: every loop order (at most ``orders`` of them, sampled), allocated bottom-up
    (:func:`_bottom_up`), on the spatial choices using the most PEs."""
    return [
        _bottom_up(problem, acc, order, rows, cols) for order, rows, cols in _loop_orders(problem, acc, rng, orders)
    ]


def _exhaustive(problem: Problem, acc: Accelerator, limit: int) -> list[Mapping] | None:
    """Every mapping, when there are at most ``limit`` valid ones (None otherwise)."""
    if space_size(problem, acc) > 100 * limit:
        return None
    found = list(itertools.islice(mappings(problem, acc), limit + 1))
    return found if len(found) <= limit else None


def search(
    problem: Problem,
    acc: Accelerator,
    objective: str = "latency",
    *,
    exhaustive_limit: int = 20_000,
    samples: int = 600,
    seed: int = 0,
) -> Evaluation:
    """The best mapping found for ``objective`` (``latency``, ``energy`` or ``edp``), with its evaluation.

    Exhaustive when at most ``exhaustive_limit`` valid mappings exist, else ``samples`` seeded random
    candidates. Raises :class:`MappingError` when no candidate fits the accelerator.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}")
    key = OBJECTIVES[objective]
    best: Evaluation | None = None
    every = None if acc.zigzag_compat else _exhaustive(problem, acc, exhaustive_limit)
    candidates: Iterator[Mapping]
    if acc.zigzag_compat:  # ZigZag's mapper: bottom-up allocations only
        candidates = itertools.chain(
            _loma(problem, acc, random.Random(seed), max(samples, 720)), _fallback(problem, acc)
        )
        checked = False
    elif every is not None:
        candidates = iter(every)
        checked = True
    else:
        rng = random.Random(seed)
        choices = sorted(spatial_choices(problem, acc), key=lambda rc: -_unrolled(rc))  # most PEs first
        samples_of = (_sample(problem, acc, rng, choices) for _ in range(samples))
        # The on-chip candidates draw from a generator of their own: the random samples stay those of ``seed``.
        on_chip = _on_chip(problem, acc, random.Random(seed), samples)
        candidates = itertools.chain(_fallback(problem, acc), on_chip, samples_of)
        checked = False
    for mapping in candidates:
        try:
            result = evaluate(problem, acc, mapping, checked=checked)
        except MappingError:
            continue
        if best is None or key(result) < key(best):
            best = result
    if best is None:
        check(problem, acc, _fallback(problem, acc)[0])  # raises, naming the level that overflows
        raise MappingError(f"no mapping of {problem.kind} fits {acc.name!r}")
    return best
