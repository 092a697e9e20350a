"""``compute.launch`` on the measured backend: ``graph`` (the default) leaves every figure as it was, bit for bit;
``eager`` prices each operator at ``max(modelled time, kernels x host time)`` — small operators rise to the host's
issue time (``silu_mul`` to twice it: two kernels), large ones are unchanged — with the host time from the study or
from the device file ``stratasim profile`` measured it into, in-process and in a spawned server alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.compute_layer.backend_section import BackendSection
from stratasim.compute_layer.measured.backend import MeasuredCompute, from_section
from stratasim.compute_layer.measured.launch import Launch
from stratasim.kernel import operators
from stratasim.system_layer.operators import OperatorPricer
from stratasim.v1 import common_pb2, compute_pb2
from tests.compute_layer.reference_profile import reference_rows, save_measurement
from tests.conftest import RunCli

HOST_US = 8.0
MEASURED_HOST_US = 9.5
MEASURED_S = 9.5e-06
LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama3_8b_h100_measured.yaml"

OPS = [
    operators.gemm(1, 64, 64),
    operators.gemm(4096, 8192, 28672),
    operators.gemm(1, 4096, 28672),
    operators.attention(32, 2048, 2048, 128, causal=True),
    operators.attention(32, 2048, 2048, 128, causal=True, backward=True),
    operators.elementwise([4096], function=compute_pb2.RMSNORM),
    operators.elementwise([2**28], function=compute_pb2.ADD),
    operators.elementwise([14336], function=compute_pb2.SILU_MUL),
]


def _durations(backend: MeasuredCompute, device: str = "h100") -> list[int]:
    return OperatorPricer(backend, device).durations_ps(OPS)


def test_graph_launch_is_the_model_as_fitted_bit_for_bit() -> None:
    fitted = _durations(MeasuredCompute())
    assert _durations(from_section(BackendSection(launch="graph"))) == fitted
    assert _durations(from_section(None)) == fitted
    assert _durations(MeasuredCompute(launch=Launch())) == fitted


def test_eager_launch_raises_small_operators_to_the_host_time_and_leaves_large_ones() -> None:
    graph = _durations(MeasuredCompute())
    eager = _durations(from_section(BackendSection.model_validate({"launch": {"eager": f"{HOST_US}us"}})))
    host_ps = round(HOST_US * 10**6)
    for op, before, after in zip(OPS, graph, eager):
        kernels = 2 if op.elementwise.function == compute_pb2.SILU_MUL else 1
        assert after == max(before, kernels * host_ps), op
    small = [index for index, before in enumerate(graph) if before < host_ps]
    large = [index for index, before in enumerate(graph) if before > 2 * host_ps]
    assert len(small) >= 3 and len(large) >= 4  # both regimes are exercised
    assert eager[-1] == 2 * host_ps  # silu_mul: SiLU, then the product


def test_eager_without_a_host_time_on_a_shipped_device_is_one_error() -> None:
    backend = MeasuredCompute(launch=Launch(eager=True))
    response = backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=OPS[:1]))
    assert response.error.code == common_pb2.Error.INVALID_ARGUMENT and response.error.where == "launch"
    assert "'launch: eager' needs the host's time to issue one kernel" in response.error.message
    assert "'h100'" in response.error.message and "stratasim profile" in response.error.message
    described = backend.describe(compute_pb2.DescribeRequest(devices=["h100"]))
    assert "stratasim profile" in described.error.message


def _report(run_cli: RunCli, study: Path, *overrides: str) -> dict[str, Any]:
    code, out, err = run_cli("run", str(study), "--json", *(arg for key in overrides for arg in ("--set", key)))
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


Row = tuple[str, tuple[int, ...], int]
"""An operator row by its kind, shape and duration in ps (a row's names grow when two phases share it)."""


def _rows(report: dict[str, Any]) -> dict[Row, tuple[int, bool]]:
    """Each operator row's count and whether it is SwiGLU's SiLU-times-gate (two kernels eagerly)."""
    return {
        (op["kind"], tuple(op["shape"]), op["duration_ps"]): (op["count"], "swiglu" in op["names"])
        for op in report["operators"]
    }


def _added(rows: dict[Row, tuple[int, bool]], counts: dict[Row, int]) -> int:
    """What eager launch adds to ``counts`` calls of each row: per call ``max(0, kernels x host - modelled)``, the
    host's issue time less the part of it hidden behind the kernel."""
    host_ps = round(HOST_US * 10**6)
    return sum(count * max(0, (1 + rows[row][1]) * host_ps - row[2]) for row, count in counts.items())


def test_a_llama_decode_step_slows_by_its_kernels_issue_time_and_prefill_barely(run_cli: RunCli) -> None:
    eager = f"compute.launch={{eager: {HOST_US}us}}"
    graph, slow = _report(run_cli, LLAMA), _report(run_cli, LLAMA, eager)
    prefill_only = _report(run_cli, LLAMA, "workload.serving.generate=1")  # the decode step's operators are the rest
    rows, prefill = _rows(graph), {key: count for key, (count, _) in _rows(prefill_only).items()}
    decode = {key: count - prefill.get(key, 0) for key, (count, _) in rows.items() if count > prefill.get(key, 0)}
    assert sum(decode.values()) > 300  # 32 layers of about ten kernels each
    ttft, tpot = graph["serving"]["ttft_ns"], graph["serving"]["tpot_ns"]
    slow_ttft, slow_tpot = slow["serving"]["ttft_ns"], slow["serving"]["tpot_ns"]
    assert (slow_tpot - tpot) * 1000 == pytest.approx(_added(rows, decode), abs=1000)
    assert (slow_ttft - ttft) * 1000 == pytest.approx(_added(rows, prefill), abs=1000)
    assert slow_tpot / tpot - 1 > 0.15 and slow_ttft / ttft - 1 < 0.01  # decode pays, prefill barely
    assert slow["total_time_ps"] - graph["total_time_ps"] == _added(rows, {row: c for row, (c, _) in rows.items()})
    launched = (
        "; launched eagerly: each kernel at least the host's 8 us to issue it (given by compute.launch or --launch)"
    )
    assert launched in slow["calibration"] and slow["calibration"].replace(launched, "") == graph["calibration"]
    explicit = _report(run_cli, LLAMA, "compute.launch=graph")  # the default, said: every figure as it was
    assert {key: value for key, value in explicit.items() if key != "wall_seconds"} == {
        key: value for key, value in graph.items() if key != "wall_seconds"
    }


STUDY = """\
name: eager
workload:
  kind: transformer_inference
  model: {layers: 2, hidden: 1024, heads: 16, kv_heads: 4, seq_len: 1024, vocab: 32000, ffn: 2816,
          activation: swiglu, bias: false, norm: rmsnorm}
  serving: {batch: 1, prompt_len: 128, generate: 2}
  parallelism: {tp: 1, pp: 1}
  precision: bf16
network:
  topology: [{kind: ring, size: 1, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: measured, device: DEVICE}
"""


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference H100 profile with a measured eager launch added, saved as ``stratasim profile`` saves a
    measurement of ``mygpu``, and a study on its device file."""
    out = tmp_path_factory.mktemp("eager")
    save_measurement(out, rows=[*reference_rows(), {"kind": "launch_eager", "us": MEASURED_HOST_US}])
    (out / "file.yaml").write_text(STUDY.replace("DEVICE", "{file: mygpu.device.yaml}"), encoding="utf-8")
    return out


def test_the_fit_writes_the_measured_host_time_into_the_device_file(measured: Path) -> None:
    document = yaml.safe_load((measured / "mygpu.device.yaml").read_text(encoding="utf-8"))
    assert document["launch"] == {"eager_s": MEASURED_S}
    assert list(document)[-1] == "launch"


def _smallest(report: dict[str, Any]) -> int:
    return min(op["duration_ps"] for op in report["operators"])


@pytest.mark.parametrize("placement", ["in-process", "spawned"])
def test_eager_on_the_device_file_prices_at_its_measured_host_time(
    measured: Path, run_cli: RunCli, placement: str
) -> None:
    spawn = ("compute.spawn=true",) if placement == "spawned" else ()
    study = measured / "file.yaml"
    graph = _report(run_cli, study)
    eager = _report(run_cli, study, "compute.launch=eager", *spawn)
    given = _report(run_cli, study, f"compute.launch={{eager: {HOST_US}us}}", *spawn)
    assert _smallest(graph) < round(HOST_US * 10**6)
    assert _smallest(eager) == round(MEASURED_HOST_US * 10**6)  # the file's measured time
    assert _smallest(given) == round(HOST_US * 10**6)  # the study's time, over the file's
    assert (
        "; launched eagerly: each kernel at least the host's 9.5 us to issue it (measured by stratasim profile)"
        in eager["calibration"]
    )
    in_process = _report(run_cli, study, "compute.launch=eager")
    assert eager["operators"] == in_process["operators"] and eager["total_time_ps"] == in_process["total_time_ps"]


def test_a_spawned_server_prices_the_studys_host_time_as_in_process(run_cli: RunCli) -> None:
    eager = f"compute.launch={{eager: {HOST_US}us}}"
    local = _report(run_cli, LLAMA, eager)
    spawned = _report(run_cli, LLAMA, eager, "compute.spawn=true")
    assert spawned["operators"] == local["operators"] and spawned["total_time_ps"] == local["total_time_ps"]
    assert spawned["calibration"] == local["calibration"]


def test_a_host_time_on_the_wire_that_is_not_positive_is_one_error(measured: Path) -> None:
    from stratasim.config.study_file import load_study

    study = load_study(measured / "file.yaml")
    assert study.compute is not None
    message = study.compute.device_description()
    assert isinstance(message, compute_pb2.MeasuredDevice) and message.eager_launch_s == MEASURED_S
    message.eager_launch_s = -1.0
    request = compute_pb2.EstimateRequest(device="mygpu", ops=OPS[:1], measured_device=message)
    response = MeasuredCompute(launch=Launch(eager=True)).estimate(request)
    assert response.error.where == "measured_device" and "launch.eager_s" in response.error.message
