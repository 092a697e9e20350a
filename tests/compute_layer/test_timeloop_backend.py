"""The ``timeloop`` compute backend: registration, presets, exact durations, caching and errors on the wire."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.timeloop import PRESETS, TimeloopCompute, accelerator, search, systolic
from stratasim.compute_layer.timeloop.backend import problem_of
from stratasim.kernel import operators, registry
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError
from stratasim.v1 import common_pb2, compute_pb2


def _estimate(backend: TimeloopCompute, device: str, *ops: compute_pb2.OperatorDesc) -> compute_pb2.EstimateResponse:
    return backend.estimate(compute_pb2.EstimateRequest(device=device, ops=ops))


def test_is_a_compute_backend_registered_as_timeloop() -> None:
    backend = TimeloopCompute()
    assert isinstance(backend, ComputeBackend) and backend.name == "timeloop"
    assert isinstance(registry.load("compute", "timeloop")(), TimeloopCompute)
    assert backend.devices() == sorted(PRESETS)
    assert {"tpu-like", "eyeriss-like", "gemmini", "systolic-32x32-os", "systolic-128x128-ws"} <= set(PRESETS)


def test_scalesim_like_presets_match_their_configuration() -> None:
    acc = accelerator("systolic-32x32-os")
    assert (acc.rows, acc.cols, acc.dataflow, acc.clock_hz) == (32, 32, "os", 10**9)
    sram = acc.levels[1]
    assert dict(sram.partitions) == {"inputs": 65536, "weights": 65536, "outputs": 65536}
    # Any size and dataflow can be named, not only the listed presets.
    assert accelerator("SYSTOLIC-16x8-is") == systolic(16, 8, "is")


def test_a_systolic_gemm_lasts_scalesim_cycles_at_the_clock() -> None:
    # 64x64x64 on a 32x32 output-stationary array: (32 + 32 + 64 - 2) · 2 · 2 = 504 cycles at 1 GHz.
    response = _estimate(TimeloopCompute(), "systolic-32x32-os", operators.gemm(64, 64, 64, dtype=compute_pb2.INT8))
    assert not response.HasField("error"), response.error.message
    (cost,) = response.costs
    assert cost.duration_ps == 504_000 and cost.bound == compute_pb2.COMPUTE
    assert [t.level for t in cost.traffic] == ["sram", "dram"] and cost.energy_pj > 0


def test_gemmini_duration_is_the_cycles_at_700_mhz() -> None:
    op = operators.gemm(128, 128, 128, dtype=compute_pb2.INT8)
    best = TimeloopCompute().best_mapping("gemmini", op)
    (cost,) = _estimate(TimeloopCompute(), "gemmini", op).costs
    assert cost.duration_ps == -(-best.cycles * 10**12 // (700 * 10**6))


def test_batched_gemm_and_elementwise_are_priced() -> None:
    ops = [operators.gemm(64, 32, 64, batch=4), operators.elementwise([1024], inputs=2)]
    response = _estimate(TimeloopCompute(), "eyeriss-like", *ops)
    assert not response.HasField("error"), response.error.message
    assert all(cost.duration_ps > 0 and cost.energy_pj > 0 for cost in response.costs)
    assert problem_of(ops[1]).dims == (("T", 2), ("E", 1024))


def test_a_convolution_on_the_wire_lasts_scalesim_cycles() -> None:
    # 3x3 conv, 16->32 channels, 8x8 outputs on a 32x32 OS array: Nofmap 64, Nfilter 32, Wconv 144,
    # so (32 + 32 + 144 - 2) · 2 · 1 = 412 cycles at 1 GHz.
    op = operators.conv2d(1, 32, 16, 8, 8, 3, 3, dtype=compute_pb2.INT8)
    (cost,) = _estimate(TimeloopCompute(), "systolic-32x32-os", op).costs
    assert cost.duration_ps == 412_000
    assert problem_of(op) == problem_of(operators.conv2d(1, 32, 16, 8, 8, 3, 3, stride=1, dtype=compute_pb2.INT8))


def test_results_are_cached_and_deterministic() -> None:
    backend, op = TimeloopCompute(seed=3), operators.gemm(300, 200, 100)
    first = _estimate(backend, "tpu-like", op)
    assert _estimate(backend, "tpu-like", op) == first
    assert _estimate(TimeloopCompute(seed=3), "tpu-like", op) == first


def test_energy_objective_never_spends_more_energy() -> None:
    op = operators.gemm(32, 32, 32)
    fast, frugal = (TimeloopCompute(objective=o).best_mapping("gemmini", op) for o in ("latency", "energy"))
    assert frugal.energy_pj <= fast.energy_pj and frugal.cycles >= fast.cycles
    with pytest.raises(ValueError, match="unknown objective"):
        TimeloopCompute(objective="fastest")


def test_unsupported_operator_kind_names_the_operator() -> None:
    ops = [operators.gemm(8, 8, 8), compute_pb2.OperatorDesc(name="conv1")]
    response = _estimate(TimeloopCompute(), "gemmini", *ops)
    assert not response.costs
    assert response.error.code == common_pb2.Error.UNSUPPORTED and response.error.where == "ops[1].shape"
    assert "ops[1] ('conv1')" in response.error.message and "OPERATOR_KIND_UNSPECIFIED" in response.error.message


@pytest.mark.parametrize(
    ("op", "where", "text"),
    [
        (
            compute_pb2.OperatorDesc(gemm=compute_pb2.GemmShape(m=4, k=4), dtype=compute_pb2.BF16),
            "ops[0].gemm.n",
            "gemm.n must be a positive size, got 0",
        ),
        (
            compute_pb2.OperatorDesc(conv=compute_pb2.ConvShape(n=1, k=2, c=3), dtype=compute_pb2.BF16),
            "ops[0].conv.p",
            "conv.p must be a positive size, got 0",
        ),
        (
            compute_pb2.OperatorDesc(elementwise=compute_pb2.ElementwiseShape(elements=4), bytes=8),
            "ops[0].dtype",
            "dtype_unspecified has no element size",
        ),
    ],
)
def test_malformed_operators_come_back_as_errors(op: compute_pb2.OperatorDesc, where: str, text: str) -> None:
    response = _estimate(TimeloopCompute(), "gemmini", op)
    assert response.error.where == where and text in response.error.message


def test_unknown_device_and_calibration_are_errors() -> None:
    response = _estimate(TimeloopCompute(), "h100", operators.gemm(8, 8, 8))
    assert response.error.where == "device" and "systolic-<R>x<C>" in response.error.message
    request = compute_pb2.EstimateRequest(device="gemmini", calibration=compute_pb2.Calibration(compute_efficiency=0.5))
    assert TimeloopCompute().estimate(request).error.where == "calibration"
    with pytest.raises(BackendError, match="unknown device"):
        accelerator("systolic-0x4-os")


def test_custom_accelerators_replace_the_presets() -> None:
    custom = systolic(8, 8, "ws")
    backend = TimeloopCompute([custom])
    assert backend.devices() == ["systolic-8x8-ws"]
    assert backend.best_mapping("systolic-8x8-ws", operators.gemm(16, 16, 16)) == search(
        problem_of(operators.gemm(16, 16, 16)), custom, samples=300
    )
