"""A device fitted by ``stratasim profile`` priced by the measured backend (``compute.device: {file: ...}``), in-process
and in a spawned server: the reference H100 profile saved as a measurement fits the shipped H100's parameters, so
every operator costs what it costs on the shipped ``h100``; and a device description the backend is sent whole is
checked as a study checks it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.measured.backend import MeasuredCompute
from stratasim.kernel import operators
from stratasim.v1 import common_pb2, compute_pb2
from tests.compute_layer.reference_profile import PROVENANCE, save_measurement
from tests.conftest import RunCli

STUDY = """\
name: fitted
workload:
  kind: transformer
  model: {layers: 2, hidden: 1024, heads: 16, seq_len: 512, vocab: 32000}
  parallelism: {tp: 1, pp: 1, dp: 1, micro_batch: 1, global_batch: 1}
  precision: bf16
network:
  topology: [{kind: ring, size: 1, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: measured, device: DEVICE}
"""


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the reference H100 profile saved as ``stratasim profile`` saves a measurement of ``mygpu``,
    and two studies beside it: ``file.yaml`` on the fitted device file, ``h100.yaml`` on the shipped h100."""
    out = tmp_path_factory.mktemp("fitted")
    save_measurement(out / "gpu", provenance={**PROVENANCE, "device": "NVIDIA H100 80GB HBM3"})
    (out / "file.yaml").write_text(STUDY.replace("DEVICE", "{file: gpu/mygpu.device.yaml}"), encoding="utf-8")
    (out / "h100.yaml").write_text(STUDY.replace("DEVICE", "h100"), encoding="utf-8")
    return out


def _report(run_cli: RunCli, study: Path, *overrides: str) -> dict[str, Any]:
    code, out, err = run_cli("run", str(study), "--json", *(arg for key in overrides for arg in ("--set", key)))
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def _times(report: dict[str, Any]) -> list[tuple[str, list[int], int]]:
    return [(op["kind"], op["shape"], op["duration_ps"]) for op in report["operators"]]


def test_the_device_file_is_a_study_device(fitted: Path) -> None:
    document = yaml.safe_load((fitted / "gpu" / "mygpu.device.yaml").read_text(encoding="utf-8"))
    assert list(document) == ["name", "structure", "sha256", "profile", "provenance", "classes"]
    assert document["name"] == "mygpu" and document["structure"] == "h100" and document["profile"] == "mygpu.csv"
    assert document["provenance"]["date"] == "2026-11-28"  # a string, not a date YAML would read


@pytest.mark.parametrize("placement", ["in-process", "spawned"])
def test_a_study_on_the_fitted_file_prices_as_the_shipped_h100(fitted: Path, run_cli: RunCli, placement: str) -> None:
    overrides = ("compute.spawn=true",) if placement == "spawned" else ()
    on_file = _report(run_cli, fitted / "file.yaml", *overrides)
    shipped = _report(run_cli, fitted / "h100.yaml")
    assert len(on_file["operators"]) > 10
    assert _times(on_file) == _times(shipped)
    assert on_file["total_time_ps"] == shipped["total_time_ps"]
    assert on_file["memory_per_npu_bytes"] == shipped["memory_per_npu_bytes"]
    assert on_file["calibration"] == (
        "operator-level model fitted to kernel times measured with PyTorch 2.11 on 2026-11-28 (CUDA-graph replay medians)"
        "; collectives slow the compute they overlap (system.contention): 32 of 132 SMs, 0.90 of 3.35 TB/s of memory "
        "bandwidth"
    )


def test_the_cost_command_reads_the_device_file(fitted: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fitted)
    gemm = ("gemm", "M=4096", "K=4096", "N=4096", "--backend", "measured", "--json")
    code, on_file, err = run_cli("cost", *gemm, "--device", "{file: gpu/mygpu.device.yaml}")
    assert code == 0, err
    _, shipped, _ = run_cli("cost", *gemm, "--device", "h100")
    [ours], [theirs] = json.loads(on_file)["costs"], json.loads(shipped)["costs"]
    assert ours["device"] == "mygpu" and ours["duration_ps"] == theirs["duration_ps"]


def test_its_facts_are_its_structures_unless_the_study_says(fitted: Path) -> None:
    from stratasim.config.study_file import load_study

    study = load_study(fitted / "file.yaml", ["compute.device.memory_capacity=96GiB"])
    assert study.compute is not None
    message = study.compute.device_description()
    assert isinstance(message, compute_pb2.MeasuredDevice)
    request = compute_pb2.DescribeRequest(devices=["mygpu"], measured_devices=[message])
    [facts] = MeasuredCompute().describe(request).devices
    assert facts.memory_capacity_bytes == 96 * 2**30 and not facts.HasField("price_usd")
    message.ClearField("memory_capacity_bytes")
    request = compute_pb2.DescribeRequest(devices=["mygpu"], measured_devices=[message])
    [facts] = MeasuredCompute().describe(request).devices
    assert facts.memory_capacity_bytes == PRESETS["h100"].memory_capacity


def _description(fitted: Path) -> compute_pb2.MeasuredDevice:
    from stratasim.config.study_file import load_study

    study = load_study(fitted / "file.yaml")
    assert study.compute is not None
    message = study.compute.device_description()
    assert isinstance(message, compute_pb2.MeasuredDevice)
    return message


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (lambda m: m.classes.pop("softmax"), "classes.softmax: Field required"),
        (lambda m: m.classes["gemm"].parameters.pop("sharpness"), "classes.gemm.sharpness: Field required"),
        (lambda m: m.classes["add"].parameters.__setitem__("bandwidth", 0.0), "classes.add.bandwidth: Input should be"),
        (
            lambda m: m.classes["add"].parameters.__setitem__("floor_s", float("inf")),
            "classes.add.floor_s: Input should",
        ),
        (lambda m: setattr(m, "structure", "mychip"), "structure: expected a preset whose tiling and L2"),
    ],
    ids=["class", "parameter", "zero", "infinite", "structure"],
)
def test_a_malformed_description_on_the_wire_is_one_error(fitted: Path, spoil: Any, said: str) -> None:
    message = _description(fitted)
    spoil(message)
    request = compute_pb2.EstimateRequest(device="mygpu", ops=[operators.gemm(64, 64, 64)], measured_device=message)
    response = MeasuredCompute().estimate(request)
    assert response.error.code == common_pb2.Error.INVALID_ARGUMENT and response.error.where == "measured_device"
    assert said in response.error.message and "'mygpu'" in response.error.message
