"""Mappings: a loop nest over the storage levels plus the spatial unrolling onto the PE array.

``levels[i]`` is the tuple of temporal loops ``(dimension, factor)`` at storage level ``i``, outermost first
(the loop order); ``rows`` and ``cols`` are the spatial loops unrolled over the array's rows and columns,
between level 0 (inside each PE) and level 1. The tile a level holds spans every loop at or below it. Factors
of a dimension multiply to at least its size: a product above it pads the last tile (wasted PE cycles).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import prod

from stratasim.compute_layer.timeloop.accelerator import Accelerator
from stratasim.compute_layer.timeloop.problem import Problem
from stratasim.kernel.errors import BackendError

__all__ = ["Loop", "Mapping", "MappingError", "check", "tile"]

Loop = tuple[str, int]
"""A loop ``(dimension, factor)``."""


class MappingError(BackendError):
    """A mapping is malformed or does not fit the accelerator; the message names the level and the sizes."""


@dataclass(frozen=True)
class Mapping:
    """Temporal loops per storage level (innermost level first, loops outermost first) and spatial loops."""

    levels: tuple[tuple[Loop, ...], ...]
    rows: tuple[Loop, ...] = ()
    cols: tuple[Loop, ...] = ()

    def factor(self, level: int, dim: str) -> int:
        """The product of the temporal factors of ``dim`` at ``level``."""
        return prod(f for d, f in self.levels[level] if d == dim)

    def spatial(self, dim: str) -> int:
        """The product of the spatial factors of ``dim`` over rows and columns."""
        return prod(f for d, f in (*self.rows, *self.cols) if d == dim)

    def temporal_steps(self) -> int:
        """Iterations of all temporal loops: the cycles of one PE doing one MAC per cycle."""
        return prod(f for loops in self.levels for _, f in loops)


def tile(problem: Problem, mapping: Mapping, level: int, spatial: bool) -> dict[str, int]:
    """Extent per dimension of the tile at ``level``; ``spatial`` includes the array's loops (the union
    over PEs, as seen from above the array) and is always true for levels above 0."""
    extent = {d: prod(mapping.factor(i, d) for i in range(level + 1)) for d in problem.names}
    if spatial or level > 0:
        extent = {d: e * mapping.spatial(d) for d, e in extent.items()}
    return extent


def check(problem: Problem, acc: Accelerator, mapping: Mapping) -> None:
    """Raise :class:`MappingError` with every problem of ``mapping`` for ``problem`` on ``acc``."""
    problems = list(_shape_problems(problem, acc, mapping))
    if not problems:
        problems = list(_capacity_problems(problem, acc, mapping))
    if problems:
        raise MappingError(f"invalid mapping of {problem.kind} on {acc.name!r}: {'; '.join(problems)}")


def _shape_problems(problem: Problem, acc: Accelerator, mapping: Mapping) -> Iterator[str]:
    if len(mapping.levels) != len(acc.levels):
        yield f"has loops for {len(mapping.levels)} levels, the accelerator has {len(acc.levels)}"
        return
    names = set(problem.names)
    groups = [(acc.levels[i].name, loops) for i, loops in enumerate(mapping.levels)]
    for where, loops in [*groups, ("rows", mapping.rows), ("cols", mapping.cols)]:
        dims = [d for d, _ in loops]
        if len(set(dims)) != len(dims):
            yield f"{where} has more than one loop over the same dimension: {dims}"
        for d, f in loops:
            if d not in names:
                yield f"{where} loops over {d!r}, which {problem.kind} does not have ({', '.join(problem.names)})"
            if isinstance(f, bool) or not isinstance(f, int) or f <= 0:
                yield f"{where} has factor {f!r} for {d!r}; factors are positive integers"
    for where, loops, size in (("rows", mapping.rows, acc.rows), ("cols", mapping.cols, acc.cols)):
        used = prod(f for _, f in loops)
        if used > size:
            yield f"unrolls {used} over the array's {where}, which has {size}"
    allowed = acc.spatial_dims(problem.kind)
    if allowed is not None:
        for axis, unrolled, free in (("rows", mapping.rows, allowed[0]), ("cols", mapping.cols, allowed[1])):
            wrong = sorted({d for d, f in unrolled if f > 1} - free)
            if wrong:
                how = f"the {acc.dataflow} dataflow" if acc.dataflow else f"{acc.name!r}"
                yield f"{how} unrolls only {sorted(free)} over {axis}, not {wrong}"
    for d in problem.names:
        covered = prod(mapping.factor(i, d) for i in range(len(mapping.levels))) * mapping.spatial(d)
        if covered < problem.size(d):
            yield f"factors of {d} multiply to {covered}, less than its size {problem.size(d)}"


def _capacity_problems(problem: Problem, acc: Accelerator, mapping: Mapping) -> Iterator[str]:
    for index, level in enumerate(acc.levels):
        words = {o: problem.footprint(o, tile(problem, mapping, index, False)) for o in problem.operands}
        kept = {o: w for o, w in words.items() if o in level.keeps}
        for operand, need in kept.items():
            bound = level.partitions.get(operand)
            if bound is not None and need > bound:
                yield f"{operand} tile of {need} words does not fit level {level.name!r} ({bound} words for {operand})"
        total = sum(kept.values())
        if level.words is not None and total > level.words:
            detail = ", ".join(f"{o} {w}" for o, w in kept.items())
            per = " per PE" if index == 0 else ""
            yield f"tiles of {total} words ({detail}) do not fit level {level.name!r} ({level.words} words{per})"
