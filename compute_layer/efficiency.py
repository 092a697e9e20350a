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
vanishing share). A convolution is its implicit GEMM (M = N·P·Q output pixels, N = K filters, K = C·R·S).
Other operators (element-wise, or a kind without a shape) are left at 1: they are priced by their memory
traffic. The roofline multiplies the device's ``compute_efficiency`` by this share.
"""

from __future__ import annotations

from fractions import Fraction

from stratasim.compute_layer.devices import Tiling
from stratasim.compute_layer.roofline_levels import gemm_view
from stratasim.v1 import compute_pb2

__all__ = ["size_efficiency"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def size_efficiency(op: compute_pb2.OperatorDesc, tiling: Tiling) -> Fraction:
    """The useful share (0, 1] of the work ``tiling``'s units do for ``op``: tile and wave quantization."""
    view = gemm_view(op)
    if view is None:
        return Fraction(1)
    row_tiles, col_tiles = _ceil_div(view.m, tiling.tile_m), _ceil_div(view.n, tiling.tile_n)
    waves = _ceil_div(view.batch * row_tiles * col_tiles, tiling.units)
    padded_k = _ceil_div(view.k, tiling.tile_k) * tiling.tile_k
    done = waves * tiling.units * tiling.tile_m * tiling.tile_n * padded_k
    return Fraction(view.batch * view.m * view.n * view.k, done)
