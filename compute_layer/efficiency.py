"""Compute efficiency as a function of operator size: the work a device's tiles do that is not padding.

A GPU (or a TPU's MXUs) computes a matrix product ``[B, M, K] x [B, K, N]`` in whole tiles: each compute unit
produces one ``tile_m x tile_n`` output tile at a time, stepping through K in slices of ``tile_k``, and
``units`` tiles run at once, one *wave*. Two losses follow, both documented by NVIDIA as *tile quantization*
and *wave quantization* (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background"):

* a ragged edge still costs a whole tile: ``ceil(M / tile_m) · tile_m`` rows are computed for ``M`` useful ones
  (likewise N, and K in slices);
* the last wave may be partly empty: ``waves = ceil(tiles / units)`` with ``tiles = B · ceil(M / tile_m) ·
  ceil(N / tile_n)``, and every wave takes as long as a full one.

So the share of the hardware's time that does useful work is::

    size_efficiency = B·M·N·K / (waves · units · tile_m · tile_n · ceil(K / tile_k) · tile_k)

which is 1 for an operator that fills whole waves of whole tiles, falls towards ``1 / (units·tile_m·tile_n)``
for a tiny one, and tends to 1 as the operator grows (the padding and the idle part of the last wave become a
vanishing share). A GEMM library does not use one tile for every problem: it picks, per problem, the tile that
wastes least (cuBLAS's heuristics), down to the tensor core's 16-row instruction for a matrix-vector product.
So the share is the best over the device's tile, its transpose and their halvings down to 16 a side, a unit
computing smaller tiles at the same rate per output element (it runs several side by side). A convolution is its implicit GEMM (M = N·P·Q output pixels, N = K filters, K = C·R·S).
Other operators (element-wise, or a kind without a shape) are left at 1: they are priced by their memory
traffic. The roofline multiplies the device's ``compute_efficiency`` by this share.
"""

from __future__ import annotations

from fractions import Fraction

from stratasim.compute_layer.devices import Tiling
from stratasim.compute_layer.roofline_levels import GemmView, gemm_view
from stratasim.v1 import compute_pb2

__all__ = ["size_efficiency", "gemm_efficiency"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


_SMALLEST_SIDE = 16
"""The least tile side a GEMM library uses: a tensor core's matrix instruction is 16 rows (m16n8k16)."""


def _halvings(side: int) -> set[int]:
    """``side`` and its halves down to :data:`_SMALLEST_SIDE` (``side`` itself when it is smaller)."""
    sides = {side}
    while side % 2 == 0 and side // 2 >= _SMALLEST_SIDE:
        side //= 2
        sides.add(side)
    return sides


def _tile_shapes(tiling: Tiling) -> list[tuple[int, int]]:
    """The output tiles a GEMM library chooses among: the device's tile, its transpose, and each halved along
    one or both sides down to 16 (a unit then runs the smaller tiles side by side: same throughput, finer waves
    and less padding, as a library's small-M kernels do for a decode step's matrix-vector products)."""
    sides_m, sides_n = _halvings(tiling.tile_m), _halvings(tiling.tile_n)
    area = tiling.tile_m * tiling.tile_n
    shapes = {(m, n) for m in sides_m for n in sides_n if area % (m * n) == 0}
    return sorted(shapes | {(n, m) for m, n in shapes if area % (m * n) == 0})


def size_efficiency(op: compute_pb2.OperatorDesc, tiling: Tiling) -> Fraction:
    """The useful share (0, 1] of the work ``tiling``'s units do for ``op`` (:func:`gemm_efficiency`); 1 for an
    operator that is not a matrix product."""
    view = gemm_view(op)
    return Fraction(1) if view is None else gemm_efficiency(view, tiling)


def gemm_efficiency(view: GemmView, tiling: Tiling) -> Fraction:
    """The useful share (0, 1] of the work ``tiling``'s units do for the products ``view``: tile and wave
    quantization, under the best of the tile shapes a GEMM library picks from (as cuBLAS's heuristics choose per
    problem). A unit computes tiles smaller than the device's at the same rate per output element, so with
    ``tiles`` spread round-robin it is busy for ``ceil(tiles / units)`` of them. The best shape is the one doing
    the least work in all (padding and idle units included), compared as integers."""
    padded_k = _ceil_div(view.k, tiling.tile_k) * tiling.tile_k
    units = tiling.units
    done = min(
        _ceil_div(view.batch * _ceil_div(view.m, tile_m) * _ceil_div(view.n, tile_n), units) * units * tile_m * tile_n
        for tile_m, tile_n in _tile_shapes(tiling)
    )
    return Fraction(view.batch * view.m * view.n * view.k, done * padded_k)
