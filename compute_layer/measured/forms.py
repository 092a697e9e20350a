"""The operator-level model's forms: a kernel's time from its shape and a few fitted parameters per device.

Each form is a physical bound plus a fixed cost, in seconds:

- ``gemm`` (GEMMs and batched GEMMs): ``max(floor, overhead + (compute^p + memory^p)^(1/p) + min(compute,
  memory) / k_blocks)``: a fixed prologue and epilogue plus a smooth maximum, since a kernel near the ridge point is
  neither purely compute- nor memory-bound (``p``, the ``sharpness``, fitted), plus the software pipeline's fill:
  a thread block steps through ``k_blocks = ceil(K / tile_k)`` blocks of the reduction, overlapping one block's
  loads with another's multiplies, so one block's worth of the shorter term stays exposed (all of it when K is a
  single block, as in attention's batched products); the floor is the least time any GEMM kernel takes. ``memory =
  bytes / bandwidth``, ``bytes`` reading both operands and writing the product once. ``compute`` is the FLOPs over
  ``ceiling · share``, ``share`` being the tile and wave quantization the roofline uses
  (:func:`~stratasim.compute_layer.efficiency.size_efficiency` with the device preset's tiling), at a clock that
  falls as the kernel runs: a short kernel runs at the boost clock's ``ceiling``, a long one at the power-limited
  ``sustained`` rate, the rate blending from one to the other with weight ``exp(-t / tau)`` (``t`` its time at the
  ceiling; a replayed kernel of milliseconds draws the board's 700 W);
- ``attention`` (fused, forward and backward fitted apart): FlashAttention-2 runs one thread block per block of
  128 queries, looping over the 128-key blocks it computes (causally, those not wholly above the diagonal). A
  block of scores costs ``per_block + per_block_dim · head_dim`` and a row of query blocks ``per_row + per_row_dim ·
  head_dim`` besides (loading Q, writing O and its statistics). The forward's time is ``floor +`` the cost of the
  busiest SM's blocks and rows when the hardware hands the thread blocks out in launch order
  (:mod:`~stratasim.compute_layer.measured.dispatch`), so wave and tail effects are counted; the backward's is
  ``floor + max(all rows' cost / sms, the longest row's cost)``: the SMs share the work, or, with too few rows to
  fill them, the longest row sets the time;
- ``bandwidth`` (decode attention over its KV cache; element-wise and normalisation kernels):
  ``floor + bytes / bandwidth``, so the achieved bandwidth grows with size and saturates at ``bandwidth``.

The profiles replay each operator many times, so operands that fit in the L2 cache (the device preset's on-chip
level) are read from it: every memory term uses the fitted ``l2_bandwidth`` instead of ``bandwidth`` when the bytes
moved fit in L2. (In a model's step the previous kernel's output is likewise often still in L2.)

The fit (:mod:`stratasim.compute_layer.measured.fitting`) and the backend evaluate the same functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.efficiency import size_efficiency
from stratasim.compute_layer.measured.dispatch import busiest_sm, query_block_work
from stratasim.kernel import operators
from stratasim.kernel.operator_shapes import ATTENTION_BLOCK, AttentionShape

__all__ = ["GemmFeatures", "AttentionFeatures", "gemm_features", "attention_features", "gemm_time", "gemm_compute_time"]
__all__ += ["attention_forward_time", "attention_backward_time", "bandwidth_time", "fits_in_cache", "SMS", "BF16_BYTES"]

SMS = 132
"""Streaming multiprocessors of H100 SXM and H200 (the same GH100 die): the units fused attention's blocks share."""

BF16_BYTES = 2


@dataclass(frozen=True)
class GemmFeatures:
    """What prices a (batched) GEMM: its FLOPs, its quantization share, its bytes moved, whether they fit in L2 and
    the blocks of its reduction dimension a thread block steps through."""

    flops: int
    share: float
    bytes: int
    cached: bool
    k_blocks: int


@dataclass(frozen=True)
class AttentionFeatures:
    """What prices a fused attention: its score blocks, its rows of query blocks, the blocks of the longest row, the
    head size, and the key blocks and rows of the busiest SM under the forward's dispatch."""

    blocks: float
    rows: int
    longest: int
    head_dim: int
    busiest_blocks: int
    busiest_rows: int


def gemm_features(batch: int, m: int, k: int, n: int, device: Device, element_bytes: int = BF16_BYTES) -> GemmFeatures:
    """A ``[batch, m, k] x [batch, k, n]`` product's features on ``device`` (its tiling and L2 capacity)."""
    assert device.tiling is not None
    share = float(size_efficiency(operators.gemm(m, k, n, batch=batch), device.tiling))
    moved = batch * (m * k + k * n + m * n) * element_bytes
    k_blocks = -(-k // device.tiling.tile_k)
    return GemmFeatures(2 * batch * m * k * n, share, moved, fits_in_cache(moved, device), k_blocks)


def fits_in_cache(moved: int, device: Device) -> bool:
    """Whether ``moved`` bytes fit in ``device``'s on-chip level (its L2)."""
    return device.sram is not None and moved <= device.sram.capacity


def attention_features(shape: AttentionShape) -> AttentionFeatures:
    """A fused attention's features: blocks counted as the kernel runs them (causal blocks skipped)."""
    rows = shape.batch * -(-shape.queries // ATTENTION_BLOCK)
    longest = -(-shape.keys // ATTENTION_BLOCK)
    busiest = busiest_sm(shape.batch, query_block_work(shape), SMS)
    return AttentionFeatures(
        shape.scores / ATTENTION_BLOCK**2, rows, longest, shape.head_dim, busiest.blocks, busiest.ctas
    )


def gemm_compute_time(params: Mapping[str, float], features: GemmFeatures) -> float:
    """Seconds of tensor-core work: the FLOPs at the boost clock's ceiling while the kernel is short, blending to the
    sustained (power-limited) rate with weight ``1 - exp(-t / tau)``, ``t`` being the time at the ceiling."""
    peak = features.flops / (params["ceiling_flops"] * features.share)
    sustained = features.flops / (params["sustained_flops"] * features.share)
    boost = math.exp(-peak / params["tau_s"])
    return 1.0 / (boost / peak + (1.0 - boost) / sustained)


def gemm_time(params: Mapping[str, float], features: GemmFeatures) -> float:
    """Seconds: the floor, or the overhead plus the smooth maximum of compute and memory (at the fitted bandwidth)
    and the pipeline's exposed fill, whichever is longer."""
    compute = gemm_compute_time(params, features)
    memory = features.bytes / params["l2_bandwidth" if features.cached else "bandwidth"]
    sharpness = params["sharpness"]
    smooth = (compute**sharpness + memory**sharpness) ** (1.0 / sharpness)
    fill = min(compute, memory) / features.k_blocks
    return max(params["floor_s"], params["overhead_s"] + smooth + fill)


def _block_and_row(params: Mapping[str, float], features: AttentionFeatures) -> tuple[float, float]:
    """Seconds per block of scores and per row of query blocks at ``features``' head size."""
    per_block = params["per_block_s"] + params["per_block_dim_s"] * features.head_dim
    return per_block, params["per_row_s"] + params["per_row_dim_s"] * features.head_dim


def attention_forward_time(params: Mapping[str, float], features: AttentionFeatures) -> float:
    """Seconds: the floor plus the busiest SM's blocks and rows."""
    per_block, per_row = _block_and_row(params, features)
    return params["floor_s"] + features.busiest_blocks * per_block + features.busiest_rows * per_row


def attention_backward_time(params: Mapping[str, float], features: AttentionFeatures) -> float:
    """Seconds: the floor plus the SMs' share of the blocks and rows, or the longest row when that is longer."""
    per_block, per_row = _block_and_row(params, features)
    shared = (features.blocks * per_block + features.rows * per_row) / SMS
    return params["floor_s"] + max(shared, features.longest * per_block + per_row)


def bandwidth_time(params: Mapping[str, float], moved: int, cached: bool) -> float:
    """Seconds: the floor plus ``moved`` bytes at the fitted bandwidth (of L2 when ``cached``)."""
    return params["floor_s"] + moved / params["l2_bandwidth" if cached else "bandwidth"]
