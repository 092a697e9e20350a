"""Operators as loop nests: named dimensions and, per operand, the dimensions that index it.

A :class:`Problem` is what the mapper tiles. Its iteration space is the product of ``dims``; each point is one
multiply-accumulate (``ops_per_point`` PE operations for element-wise work). Operands are ``"inputs"``,
``"weights"`` and ``"outputs"``; ``relevant[o]`` lists the dimensions that index operand ``o`` (a loop over any
other dimension reuses the same data: the source of stationarity). Footprints are in words (elements).

Dimension names: GEMM ``[B,] M, K, N`` for ``[B, M, K] x [B, K, N] -> [B, M, N]`` (batched GEMM covers the
two products of attention); convolution ``N, K, C, P, Q, R, S`` (batch, output channels, input channels,
output rows and columns, filter rows and columns); element-wise ``T, E`` (``T`` input tensors of ``E``
elements each: an n-ary element-wise operator reads one input word per point, like a reduction over ``T``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import prod
from types import MappingProxyType

__all__ = ["OPERANDS", "Problem", "gemm", "conv2d", "elementwise"]

OPERANDS: tuple[str, ...] = ("inputs", "weights", "outputs")
"""Operand names, in the order reports list them."""


@dataclass(frozen=True)
class Problem:
    """A loop nest to map: ``kind`` is ``"gemm"``, ``"conv"`` or ``"elementwise"``; sizes are positive ints.

    ``stride`` is the convolution stride (input rows = (P - 1)·stride + R); ``ops_per_point`` the PE
    operations each point takes (1 for a MAC). An operand missing from ``relevant`` does not exist.
    """

    kind: str
    dims: tuple[tuple[str, int], ...]
    relevant: Mapping[str, frozenset[str]] = field(hash=False, compare=False)
    stride: int = 1
    ops_per_point: int = 1

    def __post_init__(self) -> None:
        for name, size in self.dims:
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError(f"{self.kind}: dimension {name} must be a positive integer, got {size!r}")
        if self.stride <= 0 or self.ops_per_point <= 0:
            raise ValueError(f"{self.kind}: stride and ops_per_point must be positive")
        object.__setattr__(self, "relevant", MappingProxyType(dict(self.relevant)))

    @property
    def names(self) -> tuple[str, ...]:
        """Dimension names in declaration order."""
        return tuple(name for name, _ in self.dims)

    def size(self, dim: str) -> int:
        """The extent of ``dim``."""
        return dict(self.dims)[dim]

    @property
    def operands(self) -> tuple[str, ...]:
        """The operands this problem has (an element-wise op has no weights; a fill has no inputs)."""
        return tuple(o for o in OPERANDS if o in self.relevant)

    @property
    def points(self) -> int:
        """Points of the iteration space (MACs of a GEMM or convolution)."""
        return prod(size for _, size in self.dims)

    def footprint(self, operand: str, tile: Mapping[str, int]) -> int:
        """Words of ``operand`` touched by a tile whose extent per dimension is ``tile`` (missing = 1)."""
        extent = {name: tile.get(name, 1) for name in self.names}
        if self.kind == "conv" and operand == "inputs":
            rows = (extent["P"] - 1) * self.stride + extent["R"]
            cols = (extent["Q"] - 1) * self.stride + extent["S"]
            return extent["N"] * extent["C"] * rows * cols
        return prod(extent[d] for d in self.relevant[operand])


def gemm(m: int, k: int, n: int, batch: int = 1) -> Problem:
    """``[B, M, K] x [B, K, N] -> [B, M, N]``: inputs are the left matrix, weights the right one."""
    batched = ("B",) if batch != 1 else ()
    relevant = {
        "inputs": frozenset({*batched, "M", "K"}),
        "weights": frozenset({*batched, "K", "N"}),
        "outputs": frozenset({*batched, "M", "N"}),
    }
    dims = ((("B", batch),) if batch != 1 else ()) + (("M", m), ("K", k), ("N", n))
    return Problem("gemm", dims, relevant)


def conv2d(n: int, k: int, c: int, p: int, q: int, r: int, s: int, stride: int = 1) -> Problem:
    """A 2-D convolution producing ``N x K x P x Q`` outputs from ``C``-channel inputs with ``R x S`` filters."""
    relevant = {
        "inputs": frozenset("NCPQRS"),
        "weights": frozenset("KCRS"),
        "outputs": frozenset("NKPQ"),
    }
    dims = (("N", n), ("K", k), ("C", c), ("P", p), ("Q", q), ("R", r), ("S", s))
    return Problem("conv", dims, relevant, stride=stride)


def elementwise(elements: int, inputs: int = 1, ops_per_point: int = 1) -> Problem:
    """``elements`` outputs from ``inputs`` same-shaped tensors (0: a fill), ``ops_per_point`` PE operations
    per input word read (per output word for a fill)."""
    if inputs == 0:
        return Problem("elementwise", (("E", elements),), {"outputs": frozenset("E")}, ops_per_point=ops_per_point)
    relevant = {"inputs": frozenset("TE"), "outputs": frozenset("E")}
    return Problem("elementwise", (("T", inputs), ("E", elements)), relevant, ops_per_point=ops_per_point)
