"""The memory levels of the hierarchical roofline: the bytes an operator moves at main memory and on chip.

An operator's minimum traffic (``OperatorDesc.bytes``: every input read once, every output written once) is
what it moves when its working set stays on chip. A matrix product too big for the on-chip memory (SRAM: a
GPU's L2, a TPU's CMEM) must re-read operands from main memory (DRAM), and how often depends on the tiling.
Following DFModel (Zhang et al.), where the on-chip SRAM capacity limits what a partition keeps on chip and
only the rest crosses DRAM, the DRAM traffic is that of the best tiling under the SRAM capacity.

The tiling (``[M, K] x [K, N] -> [M, N]``, S = SRAM capacity in elements) keeps a block of one matrix on chip
and streams the other two through it; with ``ceil`` counting passes, in elements:

* output stationary, an ``x x y`` block of C: ``M·K·ceil(N/y) + K·N·ceil(M/x) + M·N`` (A is read once per
  column of blocks, B once per row of blocks, C written once);
* A stationary, an ``x x z`` block of A: ``M·K + K·N·ceil(M/x) + M·N·(2·ceil(K/z) - 1)`` (C's partial sums
  are written after each of the ``ceil(K/z)`` passes and read back before all but the first);
* B stationary, a ``z x y`` block of B: ``K·N + M·K·ceil(N/y) + M·N·(2·ceil(K/z) - 1)``.

Every block shape that fits (``x·y <= S``) is considered — for each number of passes along one side, the
shortest side giving it and the other side as long as the capacity allows — and the least traffic is taken,
so a larger SRAM never adds traffic. Square output blocks give
``2·M·N·K/sqrt(S) + M·N``, the tiling that attains the I/O lower bound of matrix multiplication
(Hong & Kung 1981; Smith et al., "A Tight I/O Lower Bound for Matrix Multiplication", 2019:
``2·M·N·K/sqrt(S) - 2·S``); the model neglects the ``O(sqrt(S))`` elements of the streamed slices, as DFModel
neglects everything but whole tensors. Whenever one of the three matrices fits in S the result is the minimum
traffic, so an operator that fits on chip keeps the flat roofline's bytes exactly.

The on-chip level's own traffic is what the compute units read from it: each unit holds one
``tile_m x tile_n`` output tile (:class:`~stratasim.compute_layer.devices.Tiling`), so A is read ``ceil(N/tile_n)``
times, B ``ceil(M/tile_m)`` times and C written once — and never less than the DRAM traffic, which passes
through the on-chip memory on its way. A convolution is its implicit GEMM (M = N·P·Q, K = C·R·S, N = K filters)
with A standing for the input image (``N·C·H·W``: the overlap of its windows is fetched once per pass).
Element-wise operators, fused attention (whose kernel keeps its score blocks on chip: its HBM traffic is its
minimum, Q, K, V, O and row statistics, and it has no tile or wave quantisation here, its FLOPs and bytes being
priced as they are) and kinds without a shape move their minimum traffic at every level.

The third level of DFModel's roofline, the inter-chip network, is not priced here: in StrataSim the
collectives an operator's sharding implies are separate events that the network layer simulates, so an
operator's cost covers compute and the memory levels only.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isqrt

from stratasim.compute_layer.devices import Device
from stratasim.kernel.operator_shapes import ConvShape, GemmShape, ShapeError, shape_of
from stratasim.kernel.operators import dtype_bytes
from stratasim.v1 import compute_pb2

__all__ = ["GemmView", "gemm_view", "tiled_elements", "dram_bytes", "sram_bytes"]


@dataclass(frozen=True)
class GemmView:
    """An operator seen as ``batch`` matrix products ``[m, k] x [k, n]`` whose operands hold ``a``, ``b`` and
    ``c`` elements each (``a = m·k``, except for a convolution's input image)."""

    batch: int
    m: int
    k: int
    n: int
    a: int
    b: int
    c: int


def gemm_view(op: compute_pb2.OperatorDesc) -> GemmView | None:
    """``op`` as matrix products: a GEMM as given, a CONV as its implicit GEMM; ``None`` for anything else (a
    shapeless operator is priced by its totals alone)."""
    try:
        shape = shape_of(op)
    except ShapeError:
        return None
    if isinstance(shape, GemmShape):
        m, k, n = shape.m, shape.k, shape.n
        return GemmView(shape.batch, m, k, n, m * k, k * n, m * n)
    if isinstance(shape, ConvShape):
        pixels, window = shape.n * shape.p * shape.q, shape.c * shape.r * shape.s
        return GemmView(
            1,
            pixels,
            window,
            shape.k,
            shape.n * shape.c * shape.height * shape.width,
            shape.k * window,
            pixels * shape.k,
        )
    return None


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _sides(total: int, capacity: int) -> list[int]:
    """The block sides worth trying along a dimension of ``total``: for every pass count ``ceil(total / x)``, the
    least ``x`` giving it (a longer side with as many passes only takes capacity from the other side)."""
    root = isqrt(total) + 1
    sides = set(range(1, min(root, total) + 1)) | {_ceil_div(total, passes) for passes in range(1, root + 1)}
    return sorted(side for side in sides if side <= capacity)


def tiled_elements(view: GemmView, capacity: int) -> int:
    """Elements one of ``view``'s products moves to and from main memory under the best tiling in ``capacity``
    on-chip elements (at least 1): the least over the three stationary choices and every block shape."""
    capacity = max(capacity, 1)
    m, k, n, a, b, c = view.m, view.k, view.n, view.a, view.b, view.c
    if min(a, b, c) <= capacity:  # one matrix stays on chip whole: each is moved once, the least there is
        return a + b + c

    def partial_sums(z: int) -> int:
        return c * (2 * _ceil_div(k, z) - 1)

    out = [a * _ceil_div(n, min(n, capacity // x)) + b * _ceil_div(m, x) + c for x in _sides(m, capacity)]
    lhs = [a + b * _ceil_div(m, x) + partial_sums(min(k, capacity // x)) for x in _sides(m, capacity)]
    rhs = [b + a * _ceil_div(n, y) + partial_sums(min(k, capacity // y)) for y in _sides(n, capacity)]
    return min(out + lhs + rhs)


def dram_bytes(op: compute_pb2.OperatorDesc, view: GemmView | None, dev: Device) -> int:
    """Bytes ``op`` (seen as the products ``view``, :func:`gemm_view`) moves to and from ``dev``'s main memory: its
    minimum traffic, or more when it overflows SRAM."""
    if dev.sram is None or view is None:
        return op.bytes
    size = dtype_bytes(op.dtype)
    return max(op.bytes, view.batch * tiled_elements(view, dev.sram.capacity // size) * size)


def sram_bytes(op: compute_pb2.OperatorDesc, view: GemmView | None, dev: Device, dram: int) -> int:
    """Bytes ``dev``'s compute units read from and write to its on-chip memory for ``op`` (seen as the products
    ``view``, :func:`gemm_view`), given its DRAM bytes."""
    if dev.tiling is None or view is None:
        return dram
    tiling, size = dev.tiling, dtype_bytes(op.dtype)
    reads = view.a * _ceil_div(view.n, tiling.tile_n) + view.b * _ceil_div(view.m, tiling.tile_m)
    return max(dram, view.batch * (reads + view.c) * size)
