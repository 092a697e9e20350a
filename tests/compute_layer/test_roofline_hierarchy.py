"""The hierarchical roofline: tiled DRAM traffic under the SRAM capacity, the SRAM level's ceiling, the bound
it reports, and compute efficiency falling with operator size (tile and wave quantization)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.compute_layer.device_presets import PRESETS as FITTED
from stratasim.compute_layer.devices import Device, Sram, Tiling, datasheet
from stratasim.compute_layer.efficiency import size_efficiency
from stratasim.compute_layer.roofline import RooflineCompute, level_times
from stratasim.compute_layer.roofline_levels import GemmView, gemm_view, tiled_elements
from stratasim.kernel import operators
from stratasim.v1 import compute_pb2

# The datasheet roofline: these tests check the roofline's arithmetic; the presets' fitted efficiency models are
# tested in tests/report/test_calibration_line.py.
PRESETS = {name: datasheet(dev) for name, dev in FITTED.items()}

# 8³ BF16 GEMM: F = 1024 FLOPs, minimum traffic 3·64 elements = 384 bytes.
SMALL = operators.gemm(8, 8, 8)


def _toy(**overrides: object) -> Device:
    # Compute is fast (10^13 FLOP/s: 102.4 ps for SMALL), so memory decides and 1 byte takes 1 ps.
    fields: dict[str, object] = {
        "name": "toy",
        "peak_flops": {compute_pb2.BF16: 10**13},
        "memory_bandwidth": 10**12,
        "memory_capacity": 2**30,
        "tdp_w": 1,
        "source": "test",
    }
    fields.update(overrides)
    return Device(**fields)  # type: ignore[arg-type]


def _cost(dev: Device, op: compute_pb2.OperatorDesc) -> compute_pb2.OperatorCost:
    response = RooflineCompute([dev]).estimate(compute_pb2.EstimateRequest(device=dev.name, ops=[op]))
    assert not response.HasField("error"), response.error.message
    return response.costs[0]


def _traffic(cost: compute_pb2.OperatorCost) -> dict[str, int]:
    return {entry.level: entry.bytes for entry in cost.traffic}


def _square(size: int) -> GemmView:
    return GemmView(1, size, size, size, size * size, size * size, size * size)


@pytest.mark.parametrize(
    ("size", "capacity", "elements"),
    [
        # Square output blocks of side sqrt(S): 2·n³/sqrt(S) + n² = 2·64/2 + 16.
        (4, 4, 80),
        # 2·512/4 + 64: 4x4 blocks of C; A and B are each read twice.
        (8, 16, 320),
        # A 4x8 block: A read once, B twice, C once: 64 + 128 + 64.
        (8, 32, 256),
        # The output fits: every matrix moves once (the minimum, 3·64).
        (8, 64, 192),
        # One element of SRAM: every product re-reads its operands, 64·8 + 64·8 + 64.
        (8, 1, 1088),
    ],
)
def test_tiled_traffic_on_hand_cases(size: int, capacity: int, elements: int) -> None:
    assert tiled_elements(_square(size), capacity) == elements


def test_a_stationary_operand_that_fits_keeps_the_minimum_traffic() -> None:
    # [4, 4] x [4, 64]: C (256 elements) overflows 16, but A (16) fits: A once, B once, C once = 528.
    # The best output-stationary tiling would move 768 (4x4 blocks: A 16 times).
    assert tiled_elements(GemmView(1, 4, 4, 64, 16, 256, 256), 16) == 16 + 256 + 256


def test_a_gemm_that_fits_moves_its_minimum_and_one_that_does_not_moves_the_tiling() -> None:
    fits = _cost(_toy(sram=Sram(capacity=128)), SMALL)  # 64 elements: the output fits
    spills = _cost(_toy(sram=Sram(capacity=32)), SMALL)  # 16 elements: 4x4 blocks, 320 elements
    assert (fits.duration_ps, fits.bound, _traffic(fits)) == (384, compute_pb2.MEMORY, {"dram": 384, "sram": 384})
    assert (spills.duration_ps, spills.bound, _traffic(spills)) == (640, compute_pb2.MEMORY, {"dram": 640, "sram": 640})


def test_the_sram_level_bounds_when_tiles_are_small() -> None:
    # 2x2 output tiles read A and B four times each from SRAM: (4·64 + 4·64 + 64)·2 = 1152 bytes at 1 byte/ps,
    # against 384 bytes of DRAM traffic (the output fits in 128 bytes).
    dev = _toy(sram=Sram(capacity=128, bandwidth=10**12), tiling=Tiling(tile_m=2, tile_n=2, units=1))
    cost = _cost(dev, SMALL)
    assert (cost.duration_ps, cost.bound, _traffic(cost)) == (1152, compute_pb2.SRAM, {"dram": 384, "sram": 1152})
    assert compute_pb2.Bound.Name(cost.bound).lower() == "sram"
    # Without a bandwidth the level only counts bytes, and DRAM decides.
    capacity_only = _cost(replace(dev, sram=Sram(capacity=128)), SMALL)
    assert (capacity_only.duration_ps, capacity_only.bound) == (384, compute_pb2.MEMORY)


def test_a_device_without_sram_is_the_flat_roofline() -> None:
    cost = _cost(_toy(), SMALL)
    assert (cost.duration_ps, _traffic(cost)) == (384, {"dram": 384})


def test_elementwise_moves_its_minimum_at_every_level() -> None:
    op = operators.elementwise([2**20])
    cost = _cost(PRESETS["h100"], op)
    assert _traffic(cost) == {"dram": op.bytes, "sram": op.bytes} and cost.bound == compute_pb2.MEMORY


def test_conv_is_seen_as_its_implicit_gemm() -> None:
    op = operators.conv2d(2, 64, 16, 14, 14, 3, 3, stride=1)
    view = gemm_view(op)
    assert view == GemmView(1, 2 * 14 * 14, 16 * 9, 64, 2 * 16 * 16 * 16, 64 * 16 * 9, 2 * 64 * 14 * 14)
    assert view is not None and (view.a + view.b + view.c) * 2 == op.bytes
    # Everything fits in an H100's L2: DRAM sees the minimum traffic.
    assert _traffic(_cost(PRESETS["h100"], op))["dram"] == op.bytes


def test_malformed_shapes_fall_back_to_the_minimum_traffic() -> None:
    odd = compute_pb2.OperatorDesc(gemm=compute_pb2.GemmShape(m=4, k=4), dtype=compute_pb2.BF16, flops=10, bytes=7)
    assert gemm_view(odd) is None
    assert _traffic(_cost(_toy(sram=Sram(capacity=2)), odd)) == {"dram": 7, "sram": 7}


def test_a_gemm_beyond_the_h100_l2_rereads_its_operands() -> None:
    # [8192, 8192] x [8192, 8192] bf16: no matrix fits in 50 MiB (26214400 elements). A 5120x5120 block of C
    # (or 4096x6400) needs ceil(8192/5120) = 2 passes each way: A twice, B twice, C once = 5·8192² elements,
    # above the continuous bound 2·n³/sqrt(S) + n² = 281857228.8 elements (1.6 passes each way).
    op = operators.gemm(8192, 8192, 8192)
    dram = _traffic(_cost(PRESETS["h100"], op))["dram"]
    assert dram == 5 * 8192**2 * 2 and op.bytes == 3 * 8192**2 * 2
    assert dram >= 2 * (2 * 8192**3 / 26214400**0.5 + 8192**2)


_DIMS = st.integers(min_value=1, max_value=3000)


@settings(max_examples=60, deadline=None)
@given(_DIMS, _DIMS, _DIMS, st.integers(min_value=1, max_value=10**7), st.integers(min_value=1, max_value=10**7))
def test_more_sram_never_adds_traffic_and_traffic_never_drops_below_the_minimum(
    m: int, k: int, n: int, one: int, other: int
) -> None:
    view = GemmView(1, m, k, n, m * k, k * n, m * n)
    small, large = sorted((one, other))
    assert m * k + k * n + m * n <= tiled_elements(view, large) <= tiled_elements(view, small)
    if min(m * k, k * n, m * n) <= large:
        assert tiled_elements(view, large) == m * k + k * n + m * n


@settings(max_examples=40, deadline=None)
@given(_DIMS, _DIMS, _DIMS, st.sampled_from(sorted(PRESETS)))
def test_the_hierarchy_only_adds_time_to_the_flat_roofline(m: int, k: int, n: int, name: str) -> None:
    op = operators.gemm(m, k, n)
    hierarchical = PRESETS[name]
    flat = replace(hierarchical, sram=None, tiling=None)
    assert level_times(op, hierarchical).slowest_ps >= level_times(op, flat).slowest_ps


# Size efficiency: 128x128 tiles, K in slices of 64, four units.
TILES = Tiling(tile_m=128, tile_n=128, units=4, tile_k=64)


def test_whole_waves_of_whole_tiles_are_fully_efficient() -> None:
    assert size_efficiency(operators.gemm(256, 64, 256), TILES) == 1  # 4 tiles: one full wave
    assert size_efficiency(operators.gemm(512, 128, 512), TILES) == 1  # 16 tiles: four full waves


def test_tile_and_wave_quantization_on_hand_cases() -> None:
    # 129 rows pad to 144 in 16-row tiles; 16 x 32 tiles make 9 x 4 = 36 of them, 9 per unit: 129 / 144.
    assert size_efficiency(operators.gemm(129, 64, 128), TILES) == Fraction(129, 144)
    # One 16 x 16 tile, the least there is, keeps one of the 4 units busy: a quarter of their time is useful.
    assert size_efficiency(operators.gemm(16, 64, 16), TILES) == Fraction(1, 4)
    # 640 rows are 5 tiles of 128 (two waves on 4 units, 5/8 useful) but 20 of 32 rows: 5 per unit, no idle unit.
    assert size_efficiency(operators.gemm(128 * 5, 64, 128), TILES) == 1
    # K = 65 costs two slices of 64.
    assert size_efficiency(operators.gemm(256, 65, 256), TILES) == Fraction(65, 128)
    # Batches are tiles too: 4 batches of one tile fill one wave.
    assert size_efficiency(operators.gemm(128, 64, 128, batch=4), TILES) == 1
    # Element-wise operators are not tiled.
    assert size_efficiency(operators.elementwise([3]), TILES) == 1


def test_small_operators_run_far_below_peak_and_large_ones_approach_it() -> None:
    h100 = PRESETS["h100"].tiling
    assert h100 is not None
    # 64 x 64 is 16 tiles of 16 x 16 for 66 SMs: 50 stay idle.
    assert size_efficiency(operators.gemm(64, 64, 64), h100) == Fraction(16, 66)
    # A decode step's matrix-vector product pads its one row to the tensor core's 16.
    assert size_efficiency(operators.gemm(1, 4096, 4096), h100) <= Fraction(1, 16)
    assert size_efficiency(operators.gemm(16384, 16384, 16384), h100) > Fraction(95, 100)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=64))
def test_efficiency_tends_to_one_as_the_operator_grows(waves: int) -> None:
    # One ragged row more than `waves` full waves of 128 x 128 tiles: the best tiles lose only the padding of
    # that row to 16, a share that shrinks as 1/waves.
    rows = 128 * 4 * waves + 1
    share = size_efficiency(operators.gemm(rows, 64, 128), TILES)
    assert share == Fraction(rows, rows + 15)
    assert share >= Fraction(waves, waves + 1) - Fraction(1, 1000)


def test_size_efficiency_slows_small_operators_when_on() -> None:
    dev = _toy(peak_flops={compute_pb2.BF16: 10**12}, tiling=TILES)
    op = operators.gemm(129, 64, 128)  # 2·129·64·128 = 2113536 FLOPs: 2113536 ps at full efficiency
    assert _cost(dev, op).duration_ps == 2_113_536
    assert _cost(replace(dev, size_efficiency=True), op).duration_ps == 2_113_536 * 144 // 129
    assert level_times(op, replace(dev, size_efficiency=True)).size_efficiency == Fraction(129, 144)


def test_a_calibration_switches_size_efficiency_on() -> None:
    dev = _toy(peak_flops={compute_pb2.BF16: 10**12}, tiling=TILES)
    op = operators.gemm(129, 64, 128)
    calibration = compute_pb2.Calibration(size_efficiency=True)
    request = compute_pb2.EstimateRequest(device="toy", ops=[op], calibration=calibration)
    assert RooflineCompute([dev]).estimate(request).costs[0].duration_ps == 2_113_536 * 144 // 129
    untiled = RooflineCompute([_toy()]).estimate(request)
    assert untiled.error.where == "calibration" and "size_efficiency needs a tiling" in untiled.error.message


def test_only_presets_fitted_with_it_turn_size_efficiency_on() -> None:
    assert {name for name, dev in FITTED.items() if dev.size_efficiency} == {"a100", "h100", "h200", "tpuv4", "tpuv5p"}
    assert not any(dev.size_efficiency for dev in PRESETS.values())


def test_size_efficiency_needs_a_tiling_and_tilings_are_validated() -> None:
    with pytest.raises(ValueError, match="size_efficiency needs a tiling"):
        _toy(size_efficiency=True)
    with pytest.raises(ValueError, match=r"tiling.units must be a positive integer, got 0"):
        _toy(tiling=Tiling(tile_m=1, tile_n=1, units=0))
    with pytest.raises(ValueError, match=r"sram.capacity must be a positive integer"):
        _toy(sram=Sram(capacity=0))
    with pytest.raises(ValueError, match=r"sram.bandwidth must be positive or None"):
        _toy(sram=Sram(capacity=1, bandwidth=0))
