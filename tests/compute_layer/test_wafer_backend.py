"""The ``wafer`` compute backend: registration, exact costs on the wire, caching, errors and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from stratasim import cli
from stratasim.compute_layer.wafer import PRESETS, Wafer, WaferCompute, WaferEnergy
from stratasim.compute_layer.wafer import backend as wafer_backend
from stratasim.kernel import operators, registry
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError
from stratasim.study.compute_setup import build_compute
from stratasim.v1 import common_pb2, compute_pb2

FP16 = compute_pb2.FP16
# One tile of four cores in a row: 10^12 FLOP/s and 1000 bytes of SRAM each, a 10^9 B/s DRAM channel at each end
# of the row, 10^8 B/s NoC links, 1 ns DRAM and 0.5 ns link latency.
ROW = Wafer("row", (1, 1), (4, 1), ((FP16, 4 * 10**12),), 4000, 2 * 10**9, 10**8, 1000, 500)
# PALM's wafer, GEMM 4096^3 in BF16: split m 35 and n 9 ways over 315 cores, each gets 118 x 4096 x 456;
# W = 4096·456·2 = 3,735,552 < 3,932,160 bytes of SRAM: activation stream, T = I + O = 966,656 + 107,616 bytes.
# 315 cores fill both depths of the 160 edge channels: a channel carries 2 T at 32 GB/s = 67.142 us; the cores
# compute 2·118·4096·456 FLOPs at 16 TFLOP/s for 27.55 us.
GEMM_4096_PS = 2 * 1_074_272 * 10**12 * 8 // (256 * 10**9)


def _estimate(
    backend: WaferCompute, device: str, *ops: compute_pb2.OperatorDesc, **fields: object
) -> compute_pb2.EstimateResponse:
    return backend.estimate(compute_pb2.EstimateRequest(device=device, ops=ops, **fields))  # type: ignore[arg-type]


def test_is_a_compute_backend_registered_as_wafer() -> None:
    backend = WaferCompute()
    assert isinstance(backend, ComputeBackend) and backend.name == "wafer"
    assert isinstance(registry.load("compute", "wafer")(), WaferCompute)
    assert isinstance(build_compute("wafer"), WaferCompute)  # what `stratasim serve compute --backend wafer` builds
    assert backend.devices() == sorted(PRESETS) == ["palm-wafer", "palm-wafer-1x1"]
    assert WaferCompute([ROW]).devices() == ["row"]


def test_a_big_gemm_on_palm_wafer_is_exact() -> None:
    (cost,) = _estimate(WaferCompute(), "palm-wafer", operators.gemm(4096, 4096, 4096)).costs
    assert cost.duration_ps == GEMM_4096_PS == 67_142_000
    assert cost.bound == compute_pb2.MEMORY
    traffic = {entry.level: entry.bytes for entry in cost.traffic}
    assert traffic["dram"] == 315 * 1_074_272 and traffic["noc"] == (315 - 160) * 1_074_272
    assert traffic["sram"] == 315 * (966_656 + 3_735_552 + 107_616)
    # Horowitz's 45 nm rates: 0.75 pJ a FLOP, 12.5 pJ an SRAM byte, 162.5 pJ a DRAM byte, 1 pJ a NoC byte-hop.
    expected = 2 * 4096**3 * 0.75 + traffic["sram"] * 12.5 + traffic["dram"] * 162.5 + traffic["noc"] * 1.0
    assert cost.energy_pj == pytest.approx(expected, rel=1e-12)


def test_energy_follows_the_wafer_rates() -> None:
    free = replace(PRESETS["palm-wafer"], name="free", energy=WaferEnergy(0, 0, 0, 0))
    flops_only = replace(free, name="flops-only", energy=WaferEnergy(1.0, 0, 0, 0))
    op = operators.gemm(1024, 1024, 1024)
    assert _estimate(WaferCompute([free]), "free", op).costs[0].energy_pj == 0
    assert _estimate(WaferCompute([flops_only]), "flops-only", op).costs[0].energy_pj == op.flops
    with pytest.raises(ValueError, match="dram_byte_pj cannot be negative"):
        WaferEnergy(1.0, 0, -1, 0)


def test_a_noc_bound_operator_on_the_wire() -> None:
    # Four elements of 30000 FLOPs on four cores: the inner cores' 4 bytes cross a 10^8 B/s link (40 ns) while
    # the cores compute for 30 ns; plus 1 ns DRAM and one 0.5 ns hop.
    op = operators.elementwise([4], dtype=FP16, flops_per_element=30_000, inputs=1)
    (cost,) = _estimate(WaferCompute([ROW]), "row", op).costs
    assert (cost.duration_ps, cost.bound) == (41_500, compute_pb2.NETWORK)
    assert {entry.level: entry.bytes for entry in cost.traffic} == {"sram": 16, "dram": 16, "noc": 8}


def test_convolutions_and_batched_gemms_are_priced() -> None:
    ops = [operators.conv2d(8, 64, 64, 28, 28, 3, 3), operators.gemm(512, 128, 512, batch=16)]
    response = _estimate(WaferCompute(), "palm-wafer-1x1", *ops)
    assert not response.HasField("error"), response.error.message
    assert all(cost.duration_ps > 0 for cost in response.costs)


def test_more_tiles_make_the_gemm_faster() -> None:
    op = operators.gemm(4096, 4096, 4096)
    times = [
        _estimate(WaferCompute(), device, op).costs[0].duration_ps
        for device in ("palm-wafer-1x1", "palm-wafer-2x2", "palm-wafer")
    ]
    assert times[0] > times[1] > times[2]


def test_equal_operators_are_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = wafer_backend.plan

    def counting(*args: object) -> object:
        calls.append(args)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(wafer_backend, "plan", counting)
    backend = WaferCompute()
    op = operators.gemm(256, 256, 256)
    first = _estimate(backend, "palm-wafer", op, op)
    second = _estimate(backend, "palm-wafer", op)
    assert len(calls) == 1 and first.costs[0] == first.costs[1] == second.costs[0]


def test_best_plan_explains_the_cost() -> None:
    best = WaferCompute().best_plan("palm-wafer", operators.gemm(4096, 4096, 4096))
    assert best.degrees == (("b", 1), ("m", 35), ("n", 9)) and best.allocation.strategy.value == "activation_stream"
    with pytest.raises(BackendError, match="cannot cost operator kind OPERATOR_KIND_UNSPECIFIED"):
        WaferCompute().best_plan("palm-wafer", compute_pb2.OperatorDesc())


def _error(response: compute_pb2.EstimateResponse) -> common_pb2.Error:
    assert response.HasField("error") and not response.costs
    return response.error


def test_unknown_and_malformed_devices_are_errors_on_the_wire() -> None:
    error = _error(_estimate(WaferCompute(), "h100", operators.gemm(8, 8, 8)))
    assert (error.code, error.where) == (common_pb2.Error.INVALID_ARGUMENT, "device")
    assert "unknown device 'h100'; known devices: palm-wafer, palm-wafer-1x1" in error.message
    error = _error(_estimate(WaferCompute(), "palm-wafer-0x4", operators.gemm(8, 8, 8)))
    assert (error.code, error.where) == (common_pb2.Error.INVALID_ARGUMENT, "device")
    assert "wafer 'palm-wafer-0x4': tiles must be two positive integers, got (0, 4)" in error.message


def test_operators_the_backend_cannot_cost_are_errors_naming_them() -> None:
    good = operators.gemm(8, 8, 8)
    cases = [
        (
            compute_pb2.OperatorDesc(name="mystery"),
            common_pb2.Error.UNSUPPORTED,
            "ops[1].shape",
            "ops[1] ('mystery'): the wafer backend cannot cost operator kind OPERATOR_KIND_UNSPECIFIED (no shape)",
        ),
        (
            compute_pb2.OperatorDesc(gemm=compute_pb2.GemmShape(m=4, k=4), dtype=FP16),
            common_pb2.Error.INVALID_ARGUMENT,
            "ops[1].gemm.n",
            "ops[1]: gemm.n must be a positive size, got 0",
        ),
        (
            operators.gemm(8, 8, 8, dtype=compute_pb2.FP32),
            common_pb2.Error.UNSUPPORTED,
            "ops[1].dtype",
            "ops[1]: wafer 'palm-wafer' cannot compute in fp32; it supports fp16, bf16",
        ),
        (
            compute_pb2.OperatorDesc(gemm=compute_pb2.GemmShape(m=4, k=4, n=4)),
            common_pb2.Error.INVALID_ARGUMENT,
            "ops[1].dtype",
            "ops[1]: dtype_unspecified has no element size",
        ),
    ]
    for op, code, where, message in cases:
        error = _error(_estimate(WaferCompute(), "palm-wafer", good, op))
        assert (error.code, error.where) == (code, where)
        assert error.message.startswith(message), error.message


def test_a_duration_beyond_64_bits_and_a_calibration_are_refused() -> None:
    one = Wafer("one", (1, 1), (1, 1), ((FP16, 10**12),), 10, 10**9, 10**9)
    huge = compute_pb2.OperatorDesc(
        elementwise=compute_pb2.ElementwiseShape(elements=1), dtype=FP16, flops=2**64 - 1, bytes=4
    )
    error = _error(_estimate(WaferCompute([one]), "one", huge))
    assert (error.code, error.where) == (common_pb2.Error.INVALID_ARGUMENT, "ops[0]")
    assert "more than a 64-bit duration" in error.message
    calibrated = _estimate(
        WaferCompute(),
        "palm-wafer",
        operators.gemm(8, 8, 8),
        calibration=compute_pb2.Calibration(compute_efficiency=0.5),
    )
    assert _error(calibrated).where == "calibration"


def test_cli_cost_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cost", "gemm", "M=4096", "K=4096", "N=4096", "--backend", "wafer", "--device", "palm-wafer", "--json"]
    assert cli.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    (row,) = result["costs"]
    assert (row["backend"], row["duration_ps"], row["bound"]) == ("wafer", GEMM_4096_PS, "memory")
    assert set(row["traffic"]) == {"sram", "dram", "noc"}
