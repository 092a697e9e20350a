"""A roofline device described rather than named: the study's mapping, the wire message, the backend pricing on it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from pydantic import ValidationError

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.device_wire import device_from_message, device_message
from stratasim.compute_layer.devices import Device, datasheet
from stratasim.compute_layer.roofline import RooflineCompute, level_times
from stratasim.kernel import operators
from stratasim.kernel.units import parse_bandwidth, parse_bytes
from stratasim.v1 import common_pb2, compute_pb2

# 2^26 bf16 elements read and written: 256 MiB of DRAM traffic for 2^26 FLOPs, memory-bound on every preset.
ADD = operators.elementwise([1 << 26], dtype=compute_pb2.BF16, flops_per_element=1, name="add")
H100 = PRESETS["h100"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_crosses_the_wire_unchanged(name: str) -> None:
    assert device_from_message(device_message(PRESETS[name])) == PRESETS[name]


def test_new_presets_carry_their_datasheet_figures() -> None:
    tera = 10**12
    assert PRESETS["h200"].peak_flops == H100.peak_flops
    assert (PRESETS["h200"].memory_bandwidth, PRESETS["h200"].memory_capacity) == (4.8 * tera, 141 * 10**9)
    b200 = PRESETS["b200"]
    assert (b200.peak_flops[compute_pb2.BF16], b200.peak_flops[compute_pb2.FP8]) == (2250 * tera, 4500 * tera)
    assert (b200.memory_bandwidth, b200.memory_capacity, b200.tdp_w) == (7.7 * tera, 180 * 10**9, 1000)
    mi300x = PRESETS["mi300x"]
    assert mi300x.peak_flops[compute_pb2.BF16] == 1307.4 * tera and mi300x.memory_capacity == 192 * 10**9
    assert (mi300x.memory_bandwidth, mi300x.tdp_w) == (5.3 * tera, 750)
    v5p = PRESETS["tpuv5p"]
    assert dict(v5p.peak_flops) == {compute_pb2.BF16: 459 * tera} and v5p.memory_bandwidth == 2765 * 10**9
    assert v5p.tdp_w is None and "TDP" in v5p.source  # not published: left out, and the source says so
    gaudi3 = PRESETS["gaudi3"]
    assert gaudi3.supported_dtypes() == ["bf16", "fp8"] and gaudi3.peak_flops[compute_pb2.FP8] == 1835 * tera
    assert gaudi3.sram is not None and gaudi3.sram.bandwidth == 12.8 * tera
    # On-demand list rates per device-hour (Oracle Cloud's for the GPUs, Google Cloud's for the TPUs), each cited in
    # the source; no purchase prices.
    rates = {name: dev.usd_per_hour for name, dev in PRESETS.items() if dev.usd_per_hour is not None}
    assert rates == {"a100": 4.0, "h100": 10.0, "h200": 10.0, "b200": 14.0, "mi300x": 6.0, "tpuv4": 3.22, "tpuv5p": 4.2}
    assert all(
        "oracle.com/cloud/price-list" in PRESETS[name].source for name in ("a100", "h100", "h200", "b200", "mi300x")
    )
    assert all("Google Cloud's price for the chip" in PRESETS[name].source for name in ("tpuv4", "tpuv5p"))
    assert all("no price" in dev.source for name, dev in PRESETS.items() if name not in rates)
    assert all(dev.price_usd is None for dev in PRESETS.values())


def test_a_preset_overridden_key_by_key() -> None:
    section = DeviceSection.model_validate(
        {
            "preset": "h100",
            "memory_bandwidth": "4TB/s",
            "peak": {"bf16": "1000TFLOPS"},
            "sram": {"capacity": "60MiB"},
            "usd_per_hour": 2.5,
            "tdp": "0.8kW",
        }
    )
    dev = section.device()
    assert dev.memory_bandwidth == 4e12 and dev.peak_flops[compute_pb2.BF16] == 1e15
    assert dev.peak_flops[compute_pb2.FP8] == H100.peak_flops[compute_pb2.FP8]  # other dtypes kept
    assert dev.sram is not None and H100.sram is not None
    assert (dev.sram.capacity, dev.sram.bandwidth) == (parse_bytes("60MiB"), H100.sram.bandwidth)
    assert (dev.tdp_w, dev.usd_per_hour, dev.tiling, dev.name) == (800, 2.5, H100.tiling, "h100")
    assert dev.source.endswith("the study overrides memory_bandwidth, peak, sram, tdp, usd_per_hour")


def test_a_complete_description_is_the_preset_it_copies() -> None:
    assert H100.sram is not None and H100.tiling is not None
    written = {
        "name": "h100",
        "peak": {operators.dtype_name(dtype): f"{int(peak)}FLOPS" for dtype, peak in H100.peak_flops.items()},
        "memory_bandwidth": "3.35TB/s",
        "memory_capacity": "80GiB",
        "tdp": "700W",
        "sram": {"capacity": "50MiB", "bandwidth": "9369.6GB/s"},
        "tiling": {"tile_m": 256, "tile_n": 256, "tile_k": 64, "units": 66},
        "usd_per_hour": 10.0,
        "source": H100.source,
    }
    # Without ``preset:`` nothing says the description is an H100, so it has the datasheet's figures (and no
    # collective footprint: nothing describes its SMs and links).
    assert DeviceSection.model_validate(written).device() == replace(datasheet(H100), comm=None)
    assert (
        DeviceSection.model_validate({**written, "preset": "h100"})
        .device()
        .calibration_source.endswith("(the h100 preset's model)")
    )


def test_halving_memory_bandwidth_doubles_a_memory_bound_operator_exactly() -> None:
    slow = DeviceSection.model_validate({"preset": "h100", "memory_bandwidth": "1.675TB/s"}).device()
    backend = RooflineCompute()
    fast_cost = backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=[ADD])).costs[0]
    request = compute_pb2.EstimateRequest(device="h100", ops=[ADD], roofline_device=device_message(slow))
    slow_cost = backend.estimate(request).costs[0]
    assert fast_cost.bound == slow_cost.bound == compute_pb2.MEMORY
    # dram_ps = bytes x 10^12 / bandwidth, exactly: half the bandwidth, twice the time, before the one ceil.
    exact = level_times(ADD, H100).dram_ps
    assert (fast_cost.duration_ps, slow_cost.duration_ps) == (math.ceil(exact), math.ceil(2 * exact))
    assert level_times(ADD, slow).dram_ps == 2 * exact


def test_describe_answers_for_a_described_device_its_capacity_and_price() -> None:
    dev = replace(H100, name="mychip", memory_capacity=parse_bytes("96GiB"), usd_per_hour=4.0, price_usd=25000.0)
    request = compute_pb2.DescribeRequest(devices=["h100", "mychip"], roofline_devices=[device_message(dev)])
    h100, mine = RooflineCompute().describe(request).devices
    assert (h100.memory_capacity_bytes, h100.usd_per_hour, h100.HasField("price_usd")) == (80 * 2**30, 10.0, False)
    assert (mine.memory_capacity_bytes, mine.usd_per_hour, mine.price_usd) == (96 * 2**30, 4.0, 25000.0)


def test_a_described_device_the_backend_cannot_build_is_an_error_naming_it() -> None:
    backend = RooflineCompute()
    bad = device_message(H100)
    bad.memory_bandwidth_bytes_per_s = 0
    response = backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=[ADD], roofline_device=bad))
    assert response.error.code == common_pb2.Error.INVALID_ARGUMENT and response.error.where == "roofline_device"
    assert "memory_bandwidth must be positive" in response.error.message
    other = compute_pb2.EstimateRequest(device="a100", ops=[ADD], roofline_device=device_message(H100))
    assert "named 'h100', not 'a100'" in backend.estimate(other).error.message


@pytest.mark.parametrize(
    ("written", "where", "fragment"),
    [
        ({"preset": "h100", "bandwith": "1TB/s"}, ("bandwith",), "Extra inputs are not permitted"),
        ({"preset": "h100", "memory_bandwidth": "-1TB/s"}, ("memory_bandwidth",), "a bandwidth must be positive"),
        ({"preset": "h100", "memory_bandwidth": "4TB"}, ("memory_bandwidth",), "unknown bandwidth unit 'TB'"),
        ({"preset": "v100"}, ("preset",), "unknown preset 'v100'; did you mean 'h100'? expected one of a100, b200"),
        ({"preset": "h100", "peak": {"bf17": "10TFLOPS"}}, ("peak",), "unknown dtype 'bf17'"),
        ({"preset": "h100", "peak": {"bf16": "10TB/s"}}, ("peak", "bf16"), "unknown throughput unit"),
        ({"preset": "h100", "memory_capacity": "0B"}, ("memory_capacity",), "greater than 0"),
        ({"preset": "h100", "tdp": "hot"}, ("tdp",), "cannot read 'hot' as a power"),
        ({"name": "mychip", "peak": {"bf16": "100TFLOPS"}}, (), "needs memory_bandwidth, memory_capacity"),
        ({"preset": "b200", "tiling": {"tile_m": 128}}, (), "tiling needs tile_n, units"),
    ],
)
def test_bad_descriptions_name_the_key(written: dict[str, object], where: tuple[str, ...], fragment: str) -> None:
    with pytest.raises(ValidationError) as raised:
        DeviceSection.model_validate(written)
    (error,) = raised.value.errors()
    assert tuple(error["loc"]) == where and fragment in error["msg"]


def test_a_device_without_a_published_tdp_prices_no_energy() -> None:
    cost = RooflineCompute().estimate(compute_pb2.EstimateRequest(device="tpuv5p", ops=[ADD])).costs[0]
    assert cost.duration_ps > 0 and cost.energy_pj == 0


def test_sram_bandwidth_override_keeps_a_flat_device_flat_otherwise() -> None:
    dev = DeviceSection.model_validate(
        {"preset": "b200", "sram": {"capacity": "126MiB", "bandwidth": "20TB/s"}}
    ).device()
    assert dev.sram is not None and dev.sram.bandwidth == parse_bandwidth("20TB/s") and dev.tiling is None
    assert isinstance(dev, Device)


def _whole_h100(**keys: object) -> DeviceSection:
    """The H100 described whole, from its datasheet figures, without naming the preset."""
    return DeviceSection.model_validate(
        {"name": "my-h100", "peak": {"bf16": "989.4TFLOPS"}, "memory_bandwidth": "3.35TB/s"}
        | {"memory_capacity": "80GB", **keys}
    )


def test_a_whole_device_borrows_a_presets_calibration() -> None:
    borrowed = _whole_h100(calibration_from="h100").device()
    for key in ("compute_efficiency", "memory_efficiency", "launch_overhead_ps", "size_efficiency", "tiling"):
        assert getattr(borrowed, key) == getattr(H100, key), key
    assert "the h100 preset's model" in borrowed.calibration_source
    backend = RooflineCompute()
    gemm = operators.gemm(4096, 4096, 4096)
    request = compute_pb2.EstimateRequest(device="my-h100", roofline_device=device_message(borrowed), ops=[gemm])
    priced = backend.estimate(request).costs[0]
    preset = backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=[gemm])).costs[0]
    datasheet_only = compute_pb2.EstimateRequest(
        device="my-h100", roofline_device=device_message(_whole_h100().device()), ops=[gemm]
    )
    # H100's datasheet figures with its fitted model: priced as the preset, and slower than at datasheet speed.
    assert priced.duration_ps == preset.duration_ps > backend.estimate(datasheet_only).costs[0].duration_ps
    assert priced.basis == compute_pb2.FITTED_TO_RUNS


def test_calibration_from_is_for_a_whole_device_only() -> None:
    with pytest.raises(ValidationError, match=r"calibration_from: a device from 'preset: h100' is priced with"):
        DeviceSection.model_validate({"preset": "h100", "calibration_from": "a100"})
    with pytest.raises(ValidationError, match=r"unknown preset 'h1000'; did you mean"):
        _whole_h100(calibration_from="h1000")
