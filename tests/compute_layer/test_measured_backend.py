"""The measured compute backend: the fitted model's times through the one operator pricer, never under the
measured floor, never faster for more work of one shape family, and one clear error for what it has no model of."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.cli import main
from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.measured.backend import MeasuredCompute
from stratasim.compute_layer.measured.parameters import load_parameters, profile_path
from stratasim.compute_layer.measured.profile_rows import read_profile
from stratasim.config.study_file import load_study
from stratasim.kernel import operators
from stratasim.study.run import run_study
from stratasim.system_layer.operators import OperatorPricer
from stratasim.v1 import common_pb2, compute_pb2

DEVICES = ("h100", "h200")


@pytest.fixture(scope="module")
def backend() -> MeasuredCompute:
    return MeasuredCompute()


def _us(backend: MeasuredCompute, device: str, op: compute_pb2.OperatorDesc) -> float:
    return OperatorPricer(backend, device).durations_ps([op])[0] / 1e6


@pytest.mark.parametrize("device", DEVICES)
def test_a_large_gemm_through_the_pricer_is_near_its_measurement(backend: MeasuredCompute, device: str) -> None:
    measured = next(
        row.us
        for row in read_profile(profile_path(device))
        if row.kind == "gemm" and (row.dim("M"), row.dim("K"), row.dim("N")) == (4096, 8192, 28672)
    )
    assert _us(backend, device, operators.gemm(4096, 8192, 28672)) == pytest.approx(measured, rel=0.15)


@pytest.mark.parametrize("device", DEVICES)
def test_no_operator_is_faster_than_the_measured_floor(backend: MeasuredCompute, device: str) -> None:
    tiny = next(row.us for row in read_profile(profile_path(device)) if row.kind == "tiny_kernel")
    gemm_floor = load_parameters().classes[device]["gemm"]["floor_s"] * 1e6
    assert _us(backend, device, operators.gemm(1, 1, 1)) >= max(tiny, gemm_floor)
    small = [operators.elementwise([1], flops_per_element=0), operators.attention(1, 1, 1, 64)]
    small.append(operators.attention(1, 2, 2, 64, causal=True, backward=True))
    assert all(_us(backend, device, op) >= tiny for op in small)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("k", "n"), [(4096, 4096), (8192, 28672), (1536, 12288), (5120, 5120)])
def test_a_gemm_with_more_rows_is_never_faster(backend: MeasuredCompute, device: str, k: int, n: int) -> None:
    times = [_us(backend, device, operators.gemm(m, k, n)) for m in range(1, 20000, 97)]
    assert times == sorted(times)


@pytest.mark.parametrize("device", DEVICES)
def test_longer_attention_and_more_elements_are_never_faster(backend: MeasuredCompute, device: str) -> None:
    for backward in (False, True):
        fused = [operators.attention(32, s, s, 128, causal=True, backward=backward) for s in range(128, 9000, 128)]
        times = [_us(backend, device, op) for op in fused]
        assert times == sorted(times)
    decode = [_us(backend, device, operators.attention(256, 1, c, 128, group=4)) for c in range(64, 20000, 256)]
    assert decode == sorted(decode)
    added = [_us(backend, device, operators.elementwise([e], inputs=2)) for e in (2**i for i in range(4, 30))]
    assert added == sorted(added)


def test_an_unmodelled_kind_or_dtype_is_one_error_naming_it(backend: MeasuredCompute) -> None:
    conv = operators.conv2d(n=1, k=4, c=3, p=8, q=8, r=3, s=3)
    response = backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=[operators.gemm(8, 8, 8), conv]))
    assert response.error.code == common_pb2.Error.UNSUPPORTED and response.error.where == "ops[1].shape"
    assert "CONV" in response.error.message and "measured" in response.error.message
    fp8 = operators.gemm(8, 8, 8, dtype=compute_pb2.FP8)
    response = backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=[fp8]))
    assert response.error.code == common_pb2.Error.UNSUPPORTED and "fp8" in response.error.message.lower()
    unknown = backend.estimate(compute_pb2.EstimateRequest(device="a100", ops=[operators.gemm(8, 8, 8)]))
    assert unknown.error.where == "device" and "a100" in unknown.error.message


def test_the_devices_are_the_presets(backend: MeasuredCompute) -> None:
    assert backend.devices() == list(DEVICES)
    facts = backend.describe(compute_pb2.DescribeRequest(devices=list(DEVICES))).devices
    assert [f.memory_capacity_bytes for f in facts] == [PRESETS[name].memory_capacity for name in DEVICES]
    assert all("PyTorch 2.11" in f.calibration for f in facts)


TRAINING = Path(__file__).resolve().parents[2] / "examples" / "training_loop.yaml"


def test_a_study_and_the_cost_command_run_on_it(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_study(load_study(TRAINING, ["compute.backend=measured"]))
    assert "measured" in report.backends["compute"] and report.total_time_ps > 0
    assert main(["cost", "--backend", "measured", "--device", "h100", "gemm", "M=4096", "K=4096", "N=4096"]) == 0
    assert "measured" in capsys.readouterr().out
