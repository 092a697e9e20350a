"""The wafer model: Table VI preset, splits, edge contention, hand-computed plans and monotone properties."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.compute_layer.wafer import (
    PALM_WAFER,
    Elementwise,
    Gemm,
    Strategy,
    Wafer,
    edge_load,
    evaluate,
    palm_wafer,
    plan,
    splits,
    wafer,
)
from stratasim.compute_layer.wafer.contention import layers
from stratasim.compute_layer.wafer.split import degrees
from stratasim.kernel.errors import BackendError
from stratasim.v1 import compute_pb2

FP16 = compute_pb2.FP16


def tiny(cores: tuple[int, int] = (2, 1), link: int = 10**9, **changes: int) -> Wafer:
    """One tile: 10^12 FLOP/s and 1000 bytes of SRAM per core, 10^9 B/s per DRAM channel, ``link`` B/s links."""
    count = cores[0] * cores[1]
    channels = cores[1] * min(cores[0], 2)
    base = Wafer("tiny", (1, 1), cores, ((FP16, count * 10**12),), 1000 * count, channels * 10**9, link)
    return replace(base, **changes)


def test_table_vi_preset() -> None:
    assert PALM_WAFER.name == "palm-wafer"
    assert (PALM_WAFER.tiles, PALM_WAFER.cores) == ((5, 4), (4, 4))
    assert PALM_WAFER.core_count == 320
    assert PALM_WAFER.core_peak(FP16) == (256 * 10**12, 16)  # 16 TFLOP/s per core
    assert PALM_WAFER.core_sram_bytes == 60 * 2**20 // 16
    assert PALM_WAFER.channels_per_tile == 8  # 256 GB/s per tile over 8 edge channels of 32 GB/s
    assert PALM_WAFER.core_peak(compute_pb2.FP32) is None


def test_sized_names_and_unknown_devices() -> None:
    assert wafer("PALM-Wafer") is PALM_WAFER
    assert wafer("palm-wafer-5x4") == PALM_WAFER  # the paper's size is the preset itself
    assert wafer("palm-wafer-2x3").tiles == (2, 3)
    with pytest.raises(ValueError, match="tiles must be two positive integers"):
        wafer("palm-wafer-0x4")
    with pytest.raises(BackendError, match="unknown device 'h100'; known devices: palm-wafer, palm-wafer-1x1"):
        wafer("h100")


def test_malformed_wafers_are_refused_with_every_problem() -> None:
    with pytest.raises(ValueError, match=r"wafer 'bad': cores must .*; sram_bytes must .*; link_latency_ps must"):
        Wafer("bad", (1, 1), (0, 4), ((FP16, 1),), 0, 1, 1, link_latency_ps=-1)
    with pytest.raises(ValueError, match="peak_flops must pair dtypes with positive FLOP/s"):
        Wafer("bad", (1, 1), (1, 1), (), 1, 1, 1)


def test_degrees_keep_the_least_degree_of_each_share() -> None:
    assert degrees(10, 100) == [1, 2, 3, 4, 5, 10]  # shares 10, 5, 4, 3, 2, 1
    assert degrees(4096, 3) == [1, 2, 3]
    assert sorted(splits([2, 3], 3)) == [(1, 1), (1, 2), (1, 3), (2, 1)]


def test_edge_layers_and_loads() -> None:
    assert layers(PALM_WAFER) == [160, 160]  # 20 tiles x 4 rows x (west, east), twice: two cores deep
    assert layers(tiny((3, 2))) == [4, 2]  # three-core rows: the third core reaches only the west channel
    load = edge_load(PALM_WAFER, 161, 1000)
    assert (load.depth, load.byte_hops) == (2, 1000)  # the 161st core sits one hop in from its channel
    assert load.channel_ps == 2 * 1000 * 10**12 // (32 * 10**9)
    with pytest.raises(ValueError, match="a group of 321 cores does not fit the 320"):
        edge_load(PALM_WAFER, 321, 1)


def test_hand_computed_gemm() -> None:
    # GEMM 10x10x10 in FP16 on two cores sharing a tile: splitting m gives each core I = O = 5·10·2 = 100 and
    # W = 200 bytes; W < 1000 so activation stream, T = 200 bytes over its own 10^9 B/s channel: 200 ns. Split
    # n (T = 300) or one core (T = 400) is slower; compute, 1000 FLOPs at 10^12 FLOP/s, is 1 ns.
    best = plan(tiny(), Gemm(1, 10, 10, 10, 2), (10**12, 1))
    assert best.degrees == (("b", 1), ("m", 2), ("n", 1))
    assert best.allocation.strategy is Strategy.ACTIVATION_STREAM
    assert (best.compute_ps, best.edge.channel_ps, best.duration_ps) == (1000, 200_000, 200_000)
    with_latency = plan(tiny(dram_latency_ps=1000, link_latency_ps=500), Gemm(1, 10, 10, 10, 2), (10**12, 1))
    assert with_latency.duration_ps == 201_000  # the edge cores are on their channels: no link hops


def test_hand_computed_network_bound_plan() -> None:
    # Four cores in a row, 10^8 B/s links, one channel at each end. 4 elements, 30000 FLOPs each, 16 bytes:
    # on four cores each moves 2 + 2 bytes; the inner cores' 4 bytes cross one link each: 40 ns, plus
    # 1 ns DRAM and 0.5 ns link latency, against 30 ns of compute. Two cores compute for 60 ns, one for 120.
    op = Elementwise(4, 4 * 30_000, 16, 2)
    chosen = plan(tiny((4, 1), link=10**8, dram_latency_ps=1000, link_latency_ps=500), op, (10**12, 1))
    assert chosen.cores == 4
    assert (chosen.compute_ps, chosen.edge.link_ps, chosen.edge.channel_ps) == (30_000, 40_000, 8_000)
    assert chosen.duration_ps == 41_500
    two = evaluate(tiny((4, 1), link=10**8), op, (2,), (10**12, 1))
    assert two.duration_ps == 60_000


bandwidths = st.integers(min_value=10**9, max_value=10**12)
gemms = st.tuples(*(st.integers(min_value=1, max_value=3000) for _ in range(3)))
sram_sizes = st.integers(min_value=2**10, max_value=2**24)


@settings(max_examples=30, deadline=None)
@given(gemms, bandwidths, st.integers(min_value=1, max_value=10**12), sram_sizes)
def test_more_dram_bandwidth_is_never_slower(mkn: tuple[int, int, int], slow: int, extra: int, sram: int) -> None:
    shape = Gemm(1, *mkn, 2)
    base = tiny((4, 2), sram_bytes=sram * 8, dram_bandwidth=slow)
    faster = replace(base, dram_bandwidth=slow + extra)
    assert plan(faster, shape, (10**12, 1)).duration_ps <= plan(base, shape, (10**12, 1)).duration_ps


@settings(max_examples=20, deadline=None)
@given(gemms, st.integers(min_value=1, max_value=3), st.integers(min_value=1, max_value=3))
def test_more_tiles_are_never_slower(mkn: tuple[int, int, int], tiles_x: int, tiles_y: int) -> None:
    shape = Gemm(1, *mkn, 2)
    peak = PALM_WAFER.core_peak(FP16)
    assert peak is not None
    small = plan(palm_wafer(tiles_x, tiles_y), shape, peak).duration_ps
    assert plan(palm_wafer(tiles_x + 1, tiles_y), shape, peak).duration_ps <= small
    assert plan(palm_wafer(tiles_x, tiles_y + 1), shape, peak).duration_ps <= small


def test_more_tiles_speed_up_a_big_gemm() -> None:
    peak = PALM_WAFER.core_peak(FP16)
    assert peak is not None
    times = [
        plan(palm_wafer(x, y), Gemm(1, 4096, 4096, 4096, 2), peak).duration_ps
        for x, y in ((1, 1), (2, 1), (2, 2), (4, 2), (5, 4))
    ]
    assert times == sorted(times, reverse=True) and times[-1] < times[0] / 10
