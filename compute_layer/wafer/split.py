"""Operators split over a core group: PALM's parallelism over an operator's dimensions (section IV.B, Table III).

PALM maps an operator onto a group of cores by giving each dimension a degree of parallelism whose product is
the group size (a linear layer's ``(b, m, n, k)``, e.g. ``(2, 2, 2, 2)`` on 16 cores). Here only the
dimensions that index the *output* are split (a GEMM's b, m, n; a convolution's batch n, filters k and output
rows p and columns q; an element-wise operator's elements), so no core needs another's partial sums: splitting
a reduction dimension needs the all-reduce PALM inserts as a communication event, which is network traffic,
not an operator cost. A degree need not divide its dimension: every core gets the rounded-up share (PALM's
virtual tiles, section IV.A, all cost the same), and an operator uses the product of its degrees as cores.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Work", "Shape", "Gemm", "Conv", "Elementwise", "degrees", "splits"]


@dataclass(frozen=True)
class Work:
    """One core's share of an operator: FLOPs and the bytes of its input, weight and output operands."""

    flops: int
    inputs: int
    weights: int
    outputs: int


class Shape(Protocol):
    """An operator as the splitter sees it: its splittable dimensions and a core's share under given degrees."""

    @property
    def dims(self) -> tuple[tuple[str, int], ...]:
        """The splittable dimensions as (name, size), in the order degrees are given."""
        ...

    def share(self, degrees: Sequence[int]) -> Work:
        """One core's work when dimension ``i`` is split ``degrees[i]`` ways."""
        ...


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Gemm:
    """``[B, M, K] x [B, K, N] -> [B, M, N]`` with ``element`` bytes per value; the right operand is the weight."""

    batch: int
    m: int
    k: int
    n: int
    element: int

    @property
    def dims(self) -> tuple[tuple[str, int], ...]:
        """Batch, rows and columns of the output."""
        return (("b", self.batch), ("m", self.m), ("n", self.n))

    def share(self, degrees: Sequence[int]) -> Work:
        """One core's product: its b' x m' x K x n' block."""
        b, m, n = (_ceil(size, degree) for (_, size), degree in zip(self.dims, degrees))
        return Work(
            2 * b * m * self.k * n,
            b * m * self.k * self.element,
            b * self.k * n * self.element,
            b * m * n * self.element,
        )


@dataclass(frozen=True)
class Conv:
    """``N`` images of ``C`` channels, ``K`` filters of ``R x S``, ``P x Q`` outputs at ``stride``."""

    n: int
    k: int
    c: int
    p: int
    q: int
    r: int
    s: int
    stride: int
    element: int

    @property
    def dims(self) -> tuple[tuple[str, int], ...]:
        """Images, filters, output rows and output columns."""
        return (("n", self.n), ("k", self.k), ("p", self.p), ("q", self.q))

    def share(self, degrees: Sequence[int]) -> Work:
        """One core's block of images, filters and output rows and columns, with the input rows and columns it reads."""
        n, k, p, q = (_ceil(size, degree) for (_, size), degree in zip(self.dims, degrees))
        height, width = (p - 1) * self.stride + self.r, (q - 1) * self.stride + self.s
        return Work(
            2 * n * k * self.c * p * q * self.r * self.s,
            n * self.c * height * width * self.element,
            k * self.c * self.r * self.s * self.element,
            n * k * p * q * self.element,
        )


@dataclass(frozen=True)
class Elementwise:
    """``elements`` outputs of ``element`` bytes from ``flops`` FLOPs and ``bytes`` of traffic in all."""

    elements: int
    flops: int
    bytes: int
    element: int

    @property
    def dims(self) -> tuple[tuple[str, int], ...]:
        """The elements, flattened."""
        return (("elements", self.elements),)

    def share(self, degrees: Sequence[int]) -> Work:
        """One core's elements, with their share of the FLOPs and input bytes (rounded up)."""
        mine = _ceil(self.elements, degrees[0])
        read = max(0, self.bytes - self.elements * self.element)  # all but the output written
        return Work(_ceil(self.flops * mine, self.elements), _ceil(read * mine, self.elements), 0, mine * self.element)


def degrees(size: int, limit: int) -> list[int]:
    """The degrees worth trying for a dimension of ``size`` on at most ``limit`` cores: the least degree giving
    each distinct share (a larger one with the same share only occupies more cores)."""
    found: list[int] = []
    degree = 1
    while degree <= min(size, limit):
        found.append(degree)
        share = _ceil(size, degree)
        if share == 1:
            break
        degree = _ceil(size, share - 1)  # the least degree whose share is smaller
    return found


def splits(sizes: Sequence[int], cores: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of worthwhile degrees (see :func:`degrees`) for ``sizes`` whose product is at most ``cores``."""
    if not sizes:
        yield ()
        return
    for degree in degrees(sizes[0], cores):
        for rest in splits(sizes[1:], cores // degree):
            yield (degree, *rest)
