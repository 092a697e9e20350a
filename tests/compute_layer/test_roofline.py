"""The roofline backend: exact durations to the picosecond, bound, energy, traffic, errors and caching.

Every expected duration follows duration_ps = ceil(max(F·10^12 / peak, B·10^12 / bandwidth)) + launch overhead,
with F the FLOPs, B the bytes, peak in FLOP/s and bandwidth in bytes/s.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.compute_layer.device_presets import PRESETS as FITTED
from stratasim.compute_layer.devices import Device, datasheet
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel import operators, registry
from stratasim.kernel.contracts import ComputeBackend
from stratasim.v1 import common_pb2, compute_pb2

# The datasheet roofline: these tests check the roofline's arithmetic; the presets' fitted efficiency models are
# tested in tests/report/test_calibration_line.py.
PRESETS = {name: datasheet(dev) for name, dev in FITTED.items()}

# 4096³ BF16 GEMM: F = 2·4096³ = 137438953472 FLOPs, B = 3·4096²·2 = 100663296 bytes.
SQUARE = operators.gemm(4096, 4096, 4096)


def _estimate(
    device: str, *ops: compute_pb2.OperatorDesc, backend: RooflineCompute | None = None
) -> list[compute_pb2.OperatorCost]:
    response = (backend or RooflineCompute(PRESETS.values())).estimate(
        compute_pb2.EstimateRequest(device=device, ops=ops)
    )
    assert not response.HasField("error"), response.error.message
    return list(response.costs)


def _toy(**overrides: object) -> Device:
    fields: dict[str, object] = {
        "name": "toy",
        "peak_flops": {compute_pb2.BF16: 10**12},
        "memory_bandwidth": 10**12,
        "memory_capacity": 2**30,
        "tdp_w": 100,
        "source": "test",
    }
    fields.update(overrides)
    return Device(**fields)  # type: ignore[arg-type]


def test_is_a_compute_backend_registered_as_roofline() -> None:
    backend = RooflineCompute(PRESETS.values())
    assert isinstance(backend, ComputeBackend)
    assert backend.name == "roofline"
    assert isinstance(registry.load("compute", "roofline")(), RooflineCompute)
    assert backend.devices() == ["a100", "b200", "gaudi3", "h100", "h200", "mi300x", "tpuv4", "tpuv5p"]


@pytest.mark.parametrize(
    ("device", "duration_ps", "sram_bytes"),
    [
        # ceil(137438953472·10^12 / 312·10^12) = ceil(440509466.256...) (memory: 49368954 ps); 128x256 tiles
        # read A 4096/256 = 16 times and B 4096/128 = 32 times from L2: (16 + 32 + 1)·4096²·2 bytes (227750 ns).
        ("a100", 440_509_467, 49 * 4096**2 * 2),
        # ceil(137438953472·10^12 / 989.4·10^12) = ceil(138911414.465...) (memory: 30048746 ps); 256x256
        # cluster tiles: (16 + 16 + 1)·4096²·2 bytes from L2 (118180 ns at 9.3696 TB/s).
        ("h100", 138_911_415, 33 * 4096**2 * 2),
        # ceil(137438953472·10^12 / 275·10^12) = ceil(499778012.625) (memory: 83886080 ps); 128x128 MXU tiles.
        ("tpuv4", 499_778_013, 65 * 4096**2 * 2),
    ],
)
def test_square_gemm_is_compute_bound_to_the_picosecond(device: str, duration_ps: int, sram_bytes: int) -> None:
    (cost,) = _estimate(device, SQUARE)
    assert cost.duration_ps == duration_ps
    assert cost.bound == compute_pb2.COMPUTE
    # TDP (W) × duration (ps) = pJ.
    assert cost.energy_pj == PRESETS[device].tdp_w * duration_ps
    # The output (4096² elements) fits in every preset's SRAM, so DRAM sees the minimum traffic.
    assert [(t.level, t.bytes) for t in cost.traffic] == [("dram", 100_663_296), ("sram", sram_bytes)]


@pytest.mark.parametrize(
    ("device", "duration_ps"),
    [
        # B = 2^20 elements · (1 input + 1 output) · 2 bytes = 4194304; ceil(4194304·10^12 / 3.35·10^12)
        ("h100", 1_252_032),
        # ceil(4194304·10^12 / 1200·10^9) = ceil(3495253.33...)
        ("tpuv4", 3_495_254),
    ],
)
def test_elementwise_is_memory_bound(device: str, duration_ps: int) -> None:
    (cost,) = _estimate(device, operators.elementwise([2**20]))
    assert cost.duration_ps == duration_ps
    assert cost.bound == compute_pb2.MEMORY
    assert cost.traffic[0].bytes == 4_194_304


def test_bound_follows_arithmetic_intensity() -> None:
    # A GEMV (M=1) on the H100: compute ceil(134217728·10^12 / 989.4·10^12) = 135656 ps,
    # memory ceil(134250496·10^12 / 3.35·10^12) = 40074775 ps.
    gemv, square = _estimate("h100", operators.gemm(1, 8192, 8192), SQUARE)
    assert (gemv.duration_ps, gemv.bound) == (40_074_775, compute_pb2.MEMORY)
    assert square.bound == compute_pb2.COMPUTE


def test_efficiencies_and_launch_overhead() -> None:
    backend = RooflineCompute([_toy(compute_efficiency=0.5, memory_efficiency=0.25, launch_overhead_ps=1000)])
    # 10³ GEMM: F = 2000, B = 600. compute = 2000·10^12 / (10^12·0.5) = 4000 ps;
    # memory = 600·10^12 / (10^12·0.25) = 2400 ps; duration = 4000 + 1000.
    (cost,) = _estimate("toy", operators.gemm(10, 10, 10), backend=backend)
    assert (cost.duration_ps, cost.bound, cost.energy_pj) == (5000, compute_pb2.COMPUTE, 100 * 5000)


def test_empty_operator_costs_the_launch_overhead_only() -> None:
    backend = RooflineCompute([_toy(launch_overhead_ps=7)])
    (cost,) = _estimate("toy", compute_pb2.OperatorDesc(dtype=compute_pb2.BF16), backend=backend)
    assert (cost.duration_ps, cost.bound) == (7, compute_pb2.COMPUTE)
    (preset,) = _estimate("a100", compute_pb2.OperatorDesc(dtype=compute_pb2.BF16))
    assert preset.duration_ps == 0


def test_partial_picoseconds_round_up_and_ties_are_compute_bound() -> None:
    # One FLOP on the A100: 10^12 / 312·10^12 = 0.0032 ps, rounded up to 1 ps.
    (tiny,) = _estimate("a100", compute_pb2.OperatorDesc(dtype=compute_pb2.BF16, flops=1))
    assert (tiny.duration_ps, tiny.bound) == (1, compute_pb2.COMPUTE)
    backend = RooflineCompute([_toy()])
    (tie,) = _estimate("toy", compute_pb2.OperatorDesc(dtype=compute_pb2.BF16, flops=1000, bytes=1000), backend=backend)
    assert (tie.duration_ps, tie.bound) == (1000, compute_pb2.COMPUTE)


def test_costs_follow_op_order_and_device_name_is_case_insensitive() -> None:
    ops = [operators.elementwise([2**20]), SQUARE, operators.elementwise([2**20])]
    costs = _estimate("H100", *ops)
    assert [c.duration_ps for c in costs] == [1_252_032, 138_911_415, 1_252_032]
    assert _estimate("h100") == []


def test_unknown_device_is_an_invalid_argument() -> None:
    response = RooflineCompute(PRESETS.values()).estimate(compute_pb2.EstimateRequest(device="v100", ops=[SQUARE]))
    assert response.error.code == common_pb2.Error.INVALID_ARGUMENT
    assert response.error.where == "device"
    assert "'v100'" in response.error.message
    assert "a100, b200, gaudi3, h100, h200, mi300x, tpuv4, tpuv5p" in response.error.message
    assert len(response.costs) == 0


def test_unsupported_dtype_names_the_op_and_dtype() -> None:
    ops = [SQUARE, operators.gemm(8, 8, 8, dtype=compute_pb2.FP32, name="head")]
    response = RooflineCompute(PRESETS.values()).estimate(compute_pb2.EstimateRequest(device="tpuv4", ops=ops))
    assert response.error.code == common_pb2.Error.UNSUPPORTED
    assert response.error.where == "ops[1].dtype"
    assert response.error.message == "ops[1] ('head'): device 'tpuv4' cannot compute in fp32; it supports bf16, int8"
    assert len(response.costs) == 0


def test_unspecified_dtype_is_rejected() -> None:
    response = RooflineCompute(PRESETS.values()).estimate(
        compute_pb2.EstimateRequest(device="h100", ops=[compute_pb2.OperatorDesc()])
    )
    assert response.error.where == "ops[0].dtype"
    assert "dtype_unspecified" in response.error.message


def test_duration_beyond_int64_is_an_error() -> None:
    backend = RooflineCompute([_toy(memory_efficiency=0.5)])
    op = compute_pb2.OperatorDesc(dtype=compute_pb2.BF16, bytes=2**63, name="huge")
    response = backend.estimate(compute_pb2.EstimateRequest(device="toy", ops=[op]))
    assert response.error.code == common_pb2.Error.INVALID_ARGUMENT
    assert response.error.where == "ops[0]"
    assert "ops[0] ('huge'): takes 18446744073709551616 ps" in response.error.message


def test_cache_is_per_instance() -> None:
    slow = RooflineCompute([_toy(peak_flops={compute_pb2.BF16: 10**12})])
    fast = RooflineCompute([_toy(peak_flops={compute_pb2.BF16: 2 * 10**12})])
    op = compute_pb2.OperatorDesc(dtype=compute_pb2.BF16, flops=10**6)
    assert _estimate("toy", op, backend=slow)[0].duration_ps == 10**6
    assert _estimate("toy", op, backend=fast)[0].duration_ps == 5 * 10**5
    assert _estimate("toy", op, op, backend=slow)[1].duration_ps == 10**6
    slow.close()


_PRESET_DTYPES = [(name, dtype) for name, dev in PRESETS.items() for dtype in dev.peak_flops]
_COUNTS = st.integers(min_value=0, max_value=2**63)


@given(st.sampled_from(_PRESET_DTYPES), _COUNTS, _COUNTS, _COUNTS)
def test_duration_is_monotone_in_flops_and_bytes(
    device_dtype: tuple[str, compute_pb2.DType.ValueType], a: int, b: int, other: int
) -> None:
    device, dtype = device_dtype
    low, high = sorted((a, b))
    by_flops = _estimate(
        device,
        compute_pb2.OperatorDesc(dtype=dtype, flops=low, bytes=other),
        compute_pb2.OperatorDesc(dtype=dtype, flops=high, bytes=other),
    )
    by_bytes = _estimate(
        device,
        compute_pb2.OperatorDesc(dtype=dtype, flops=other, bytes=low),
        compute_pb2.OperatorDesc(dtype=dtype, flops=other, bytes=high),
    )
    assert by_flops[0].duration_ps <= by_flops[1].duration_ps
    assert by_bytes[0].duration_ps <= by_bytes[1].duration_ps


def test_calibration_scales_the_datasheet_roofline() -> None:
    backend = RooflineCompute([_toy()])
    gemm = operators.gemm(1000, 1000, 1000)  # 2e9 FLOPs: 2 ms at 1 TFLOP/s; 6e6 bytes: 6 us
    copy = operators.elementwise([10**6], flops_per_element=0)  # 4e6 bytes: 4 us at 1 TB/s
    calibration = compute_pb2.Calibration(compute_efficiency=0.5, memory_efficiency=0.8, launch_overhead_ps=7)
    request = compute_pb2.EstimateRequest(device="toy", ops=[gemm, copy], calibration=calibration)
    costs = backend.estimate(request).costs
    assert [c.duration_ps for c in costs] == [4_000_000_000 + 7, 5_000_000 + 7]
    # The uncalibrated device is priced as before, from its own cache entry.
    assert [c.duration_ps for c in _estimate("toy", gemm, copy, backend=backend)] == [2_000_000_000, 4_000_000]


def test_out_of_range_calibration_is_an_error_naming_it() -> None:
    request = compute_pb2.EstimateRequest(
        device="a100", ops=[SQUARE], calibration=compute_pb2.Calibration(compute_efficiency=1.5)
    )
    response = RooflineCompute(PRESETS.values()).estimate(request)
    assert response.error.where == "calibration" and "compute_efficiency" in response.error.message
