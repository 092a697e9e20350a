"""Device presets (datasheet numbers), lookup, and validation of user-described devices."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.device_presets import PRESETS, device
from stratasim.compute_layer.devices import Device, catalog, datasheet
from stratasim.kernel.errors import BackendError
from stratasim.v1 import compute_pb2

T = 10**12


def _device(**overrides: object) -> Device:
    fields: dict[str, object] = {
        "name": "toy",
        "peak_flops": {compute_pb2.BF16: 1e12},
        "memory_bandwidth": 1e12,
        "memory_capacity": 2**30,
        "tdp_w": 100,
        "source": "test",
    }
    fields.update(overrides)
    return Device(**fields)  # type: ignore[arg-type]


def test_preset_names() -> None:
    assert sorted(PRESETS) == ["a100", "b200", "gaudi3", "h100", "h200", "mi300x", "tpuv4", "tpuv5p"]


def test_a100_datasheet_numbers() -> None:
    a100 = PRESETS["a100"]
    assert a100.peak_flops[compute_pb2.BF16] == 312 * T
    assert a100.peak_flops[compute_pb2.FP16] == 312 * T
    assert a100.peak_flops[compute_pb2.TF32] == 156 * T
    assert a100.peak_flops[compute_pb2.FP32] == 19.5 * T
    assert a100.peak_flops[compute_pb2.FP64] == 19.5 * T
    assert a100.peak_flops[compute_pb2.INT8] == 624 * T
    assert compute_pb2.FP8 not in a100.peak_flops
    assert a100.memory_bandwidth == 2039 * 10**9
    assert a100.memory_capacity == 80 * 2**30
    assert a100.tdp_w == 400


def test_h100_datasheet_numbers() -> None:
    h100 = PRESETS["h100"]
    assert h100.peak_flops[compute_pb2.BF16] == 989_400 * 10**9
    assert h100.peak_flops[compute_pb2.FP8] == 1_978_900 * 10**9
    assert h100.peak_flops[compute_pb2.INT8] == 1_978_900 * 10**9
    assert h100.peak_flops[compute_pb2.TF32] == 494_700 * 10**9
    assert h100.peak_flops[compute_pb2.FP32] == 66_900 * 10**9
    assert h100.peak_flops[compute_pb2.FP64] == 66_900 * 10**9  # tensor-core FP64
    assert h100.memory_bandwidth == 3350 * 10**9
    assert h100.memory_capacity == 80 * 2**30
    assert h100.tdp_w == 700


def test_tpuv4_numbers_and_supported_dtypes() -> None:
    tpu = PRESETS["tpuv4"]
    assert dict(tpu.peak_flops) == {compute_pb2.BF16: 275 * T, compute_pb2.INT8: 275 * T}
    assert tpu.supported_dtypes() == ["bf16", "int8"]
    assert tpu.memory_bandwidth == 1200 * 10**9
    assert tpu.memory_capacity == 32 * 2**30
    assert tpu.tdp_w == 192


def test_presets_cite_sources_and_their_datasheet_form_is_the_bare_roofline() -> None:
    for dev in PRESETS.values():
        bare = datasheet(dev)
        assert (bare.compute_efficiency, bare.memory_efficiency, bare.launch_overhead_ps) == (1.0, 1.0, 0)
        assert dev.source
        assert (dev.compute_efficiency < 1) == bool(dev.calibration_source)


@pytest.mark.parametrize("name", ["h100", "H100", " h100 "])
def test_lookup_is_case_insensitive(name: str) -> None:
    assert device(name) is PRESETS["h100"]


def test_unknown_device_lists_known_ones() -> None:
    with pytest.raises(
        BackendError,
        match=r"unknown device 'v100'; did you mean 'h100'\? known devices: a100, b200, gaudi3, h100, h200, mi300x, tpuv4, tpuv5p",
    ):
        device("v100")


def test_lookup_in_a_catalog() -> None:
    toy = _device(name="Toy")
    table = catalog([toy])
    assert device("TOY", table) is toy
    with pytest.raises(BackendError, match="known devices: toy"):
        device("h100", table)


def test_catalog_rejects_duplicate_names() -> None:
    with pytest.raises(ValueError, match="two devices are named 'TOY'"):
        catalog([_device(), _device(name="TOY")])


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"name": ""}, "name must not be empty"),
        ({"peak_flops": {}}, "at least one dtype"),
        ({"peak_flops": {compute_pb2.DTYPE_UNSPECIFIED: 1.0}}, "dtype_unspecified, which no operator can have"),
        ({"peak_flops": {compute_pb2.BF16: 0}}, r"peak_flops\[bf16\] must be positive"),
        ({"memory_bandwidth": 0}, "memory_bandwidth must be positive"),
        ({"memory_capacity": -1}, "memory_capacity must be positive"),
        ({"compute_efficiency": 0}, r"compute_efficiency must be in \(0, 1\]"),
        ({"memory_efficiency": 1.5}, r"memory_efficiency must be in \(0, 1\]"),
        ({"launch_overhead_ps": -1}, "launch_overhead_ps must be a non-negative integer"),
        ({"launch_overhead_ps": 1.5}, "launch_overhead_ps must be a non-negative integer"),
        ({"tdp_w": -1}, "tdp_w cannot be negative"),
    ],
)
def test_device_validation_names_the_field(overrides: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        _device(**overrides)


def test_device_is_frozen_and_does_not_alias_the_callers_mapping() -> None:
    peaks = {compute_pb2.BF16: 1e12}
    dev = _device(peak_flops=peaks)
    peaks[compute_pb2.FP32] = 1e12
    assert compute_pb2.FP32 not in dev.peak_flops
    with pytest.raises(TypeError):
        dev.peak_flops[compute_pb2.FP32] = 1e12  # type: ignore[index]
    assert hash(dev) == hash(_device())
    assert dev == _device()


def test_on_chip_levels_from_the_datasheets() -> None:
    a100, h100, tpu = PRESETS["a100"], PRESETS["h100"], PRESETS["tpuv4"]
    # A100: 40,960 KB of L2 read at 5,120 bytes/clk at 1,410 MHz; 108 SMs.
    assert a100.sram is not None and (a100.sram.capacity, a100.sram.bandwidth) == (40 * 2**20, 5120 * 1410e6)
    assert a100.tiling is not None and a100.tiling.units == 108
    # H100 SXM5: 51,200 KB of L2; its bandwidth is an estimate (A100's bytes/clk at 1,830 MHz), said so in source.
    assert h100.sram is not None and (h100.sram.capacity, h100.sram.bandwidth) == (50 * 2**20, 5120 * 1830e6)
    assert "estimated" in h100.source and "L2" in h100.source
    # TPU v4: 128 MiB of CMEM, bandwidth unpublished, so a capacity-only level; eight 128x128 MXUs.
    assert tpu.sram is not None and (tpu.sram.capacity, tpu.sram.bandwidth) == (128 * 2**20, None)
    assert tpu.tiling is not None and (tpu.tiling.tile_m, tpu.tiling.tile_n, tpu.tiling.units) == (128, 128, 8)
    assert "CMEM" in tpu.source
