"""The chips of DFModel's Table V and Sec. VII as the intra-chip pass sees them, their memory options and overrides,
and the compute model (array quantisation, element-wise streaming, a fixed utilisation)."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.dataflow_chips import DATAFLOW_CHIPS, MEMORIES, DataflowChip, dataflow_chip
from stratasim.compute_layer.device_presets import PRESETS
from stratasim.kernel import operators
from stratasim.v1 import compute_pb2

MiB = 2**20


@pytest.mark.parametrize(
    ("name", "tflops", "sram_mib", "execution"),
    [
        ("h100", 993, 113, "kernel_by_kernel"),
        ("tpuv4", 275, 160, "kernel_by_kernel"),
        ("sn30", 614, 640, "dataflow"),
        ("wse2", 7500, 40_020, "dataflow"),
        ("sn10", 307.2, 320, "dataflow"),
    ],
)
def test_the_presets_are_the_papers_chips(name: str, tflops: float, sram_mib: int, execution: str) -> None:
    """Table V's throughput within 0.5 % (h100 takes the h100 preset's 989.4 TFLOPS, the paper rounds DFModel's
    clock to 993) and its SRAM as DFModel's code counts it (MB = MiB; WSE-2's 41,964,011,520 bytes)."""
    chip = DATAFLOW_CHIPS[name]
    assert chip.peak_flops == pytest.approx(tflops * 1e12, rel=5e-3)
    assert chip.sram_bytes == sram_mib * MiB
    assert chip.execution == execution
    assert chip.source


def test_gpu_and_tpu_reuse_the_roofline_presets_facts() -> None:
    for name in ("h100", "tpuv4"):
        chip, device = DATAFLOW_CHIPS[name], PRESETS[name]
        assert chip.peak_flops == pytest.approx(device.peak_flops[compute_pb2.BF16])
        assert (chip.dram_bandwidth, chip.dram_capacity) == (device.memory_bandwidth, device.memory_capacity)


def test_memory_options_and_overrides() -> None:
    """Sec. VI.C's DDR4 (200 GB/s) and HBM3 (3000 GB/s); any field replaced key by key, checked."""
    assert MEMORIES["ddr4"].bandwidth == 200e9 and MEMORIES["hbm3"].bandwidth == 3000e9
    sn30 = dataflow_chip("SN30", memory="hbm3", sram_bytes=300 * MiB)
    assert (sn30.dram_bandwidth, sn30.sram_bytes, sn30.tiles) == (3000e9, 300 * MiB, 1280)
    with pytest.raises(ValueError, match="unknown dataflow chip 'sn40'"):
        dataflow_chip("sn40")
    with pytest.raises(ValueError, match="unknown key\\(s\\) sram"):
        dataflow_chip("sn30", sram=1)
    with pytest.raises(ValueError, match="unknown memory 'hbm2'"):
        dataflow_chip("sn30", memory="hbm2")
    with pytest.raises(ValueError, match="tiles must be a positive integer, got 0"):
        dataflow_chip("sn30", tiles=0)
    with pytest.raises(ValueError, match="execution must be"):
        dataflow_chip("sn30", execution="streaming")
    with pytest.raises(ValueError, match="utilisation must be in"):
        dataflow_chip("sn30", utilisation=1.5)


def test_tile_options_are_powers_of_two_and_the_whole_chip() -> None:
    assert DATAFLOW_CHIPS["sn10"].tile_options() == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 640)
    assert DATAFLOW_CHIPS["tpuv4"].tile_options() == (1, 2, 4, 8)


def _chip(**changes: object) -> DataflowChip:
    base = {"name": "toy", "tiles": 4, "lanes": 8, "stages": 4, "clock_hz": 1e9, "sram_bytes": 1, "dram_bandwidth": 1.0}
    return DataflowChip(**(base | {"dram_capacity": 1, "execution": "dataflow"} | changes))  # type: ignore[arg-type]


def test_a_gemm_pays_for_the_array_passes_it_needs() -> None:
    """64 x 64 output rows over 8 lanes and columns over 4 stages: a 2 x 2 grid of tiles covers it in
    (64/16)·(64/8) passes of K = 32 cycles = 1.024 us (full use); 60 rows take as many passes (15/16 used)."""
    chip = _chip()
    assert chip.kernel_seconds(operators.gemm(64, 32, 64), 4) == pytest.approx(4 * 8 * 32 / 1e9)
    assert chip.kernel_seconds(operators.gemm(60, 32, 64), 4) == pytest.approx(4 * 8 * 32 / 1e9)


def test_element_wise_streams_lanes_elements_a_cycle_and_a_fixed_utilisation_scales_peak() -> None:
    """1000 elements on 2 tiles of 8 lanes: ceil(1000 / 16) = 63 cycles; at utilisation 0.5 a GEMM takes its
    FLOPs over half the tiles' peak."""
    assert _chip().kernel_seconds(operators.elementwise([1000]), 2) == pytest.approx(63e-9)
    gemm = operators.gemm(60, 32, 64)
    assert _chip(utilisation=0.5).kernel_seconds(gemm, 4) == pytest.approx(gemm.flops / (4 * 64e9 * 0.5))
