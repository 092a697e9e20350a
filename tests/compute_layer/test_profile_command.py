"""``stratasim profile`` without a GPU: one line when PyTorch or a CUDA GPU is missing, and what it writes from a
profile (the reference H100's, standing for a measurement) — a device file holding the fit the shipped parameters
came from (a study on it: test_measured_device_file.py), and a table the ``profile`` backend replays exactly."""

from __future__ import annotations

import csv
import json
import sys
import types
from pathlib import Path

import pytest
import yaml

from stratasim.cli import main
from stratasim.compute_layer.measured.cuda_timing import NEEDS_TORCH, NO_GPU
from stratasim.compute_layer.measured.gpu_profile import ProfileOutputs, default_name, structure
from stratasim.compute_layer.measured.parameters import PARAMETERS, profile_path
from stratasim.compute_layer.measured.profile_rows import read_profile
from stratasim.compute_layer.profile import ProfileCompute
from stratasim.kernel import operators
from stratasim.kernel.errors import ConfigError
from stratasim.system_layer.operators import OperatorPricer
from tests.compute_layer.reference_profile import reference_rows, save_measurement
from tools.fit_operators import report


def test_without_pytorch_it_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch then raises ImportError
    assert main(["profile", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {NEEDS_TORCH}\n" and captured.out == ""
    assert NEEDS_TORCH == "stratasim profile needs PyTorch: pip install 'stratasim[profile]'"
    assert list(tmp_path.iterdir()) == []


def test_without_a_cuda_gpu_it_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert main(["profile", "--out", str(tmp_path), "--name", "mine"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {NO_GPU}\n" and "no CUDA GPU" in NO_GPU and captured.out == ""


def test_the_fit_structure_and_name_follow_the_gpus_name() -> None:
    assert structure("NVIDIA H200").name == "h200"
    assert structure("NVIDIA H100 80GB HBM3").name == "h100"
    assert structure("Some Future GPU").name == "h100"
    assert structure("NVIDIA H200", "a100").name == "a100"
    assert default_name("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> ProfileOutputs:
    """The reference H100 profile saved as the command saves a measurement (its cells as read, unchanged)."""
    return save_measurement(tmp_path_factory.mktemp("profile"), "h100", provenance={"device": "NVIDIA H100 80GB HBM3"})


def test_the_saved_profile_is_the_measurement_byte_for_byte(saved: ProfileOutputs) -> None:
    assert saved.profile.name == "h100.csv"
    assert saved.profile.read_bytes() == profile_path("h100").read_bytes()


def test_the_fit_reproduces_the_shipped_h100_parameters(saved: ProfileOutputs) -> None:
    written = yaml.safe_load(saved.device.read_text(encoding="utf-8"))
    shipped = json.loads(PARAMETERS.read_text(encoding="utf-8"))
    theirs = shipped["devices"]["h100"]
    assert saved.device.name == "h100.device.yaml"
    assert written["classes"] == theirs["classes"] and written["sha256"] == theirs["sha256"]
    assert written["structure"] == "h100" and written["profile"] == saved.profile.name
    assert written["provenance"]["fit"].endswith(shipped["provenance"]["fit"].split(": ", 1)[1])


def test_the_held_out_table_is_the_shipped_reports(saved: ProfileOutputs) -> None:
    shipped = report().splitlines()
    assert saved.held_out.splitlines() == shipped[:2] + [line for line in shipped if line.startswith("| h100 |")]


def test_the_profile_backend_replays_a_measured_gemm_exactly(saved: ProfileOutputs) -> None:
    measured = next(
        row.us
        for row in read_profile(profile_path("h100"))
        if row.kind == "gemm" and (row.dim("M"), row.dim("K"), row.dim("N")) == (4096, 8192, 28672)
    )
    backend = ProfileCompute(saved.table)
    assert backend.devices() == ["h100"]
    [duration] = OperatorPricer(backend, "h100").durations_ps([operators.gemm(4096, 8192, 28672)])
    assert duration == round(measured * 10**6)
    [batched] = OperatorPricer(backend, "h100").durations_ps([operators.gemm(2048, 128, 2048, batch=96)])
    assert batched > 0


def test_the_profile_table_holds_the_gemms_and_the_adds(saved: ProfileOutputs) -> None:
    reference = read_profile(profile_path("h100"))
    with open(saved.table, newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    expected = sum(row.kind in ("gemm", "bmm", "add") for row in reference)
    assert len(table) == expected
    assert {row["kind"] for row in table} == {"gemm", "elementwise"}


def test_a_profile_without_some_kinds_is_one_error_naming_the_file_and_the_classes(tmp_path: Path) -> None:
    rows = [row for row in reference_rows() if row["kind"] not in ("attention_decode", "softmax")]
    with pytest.raises(ConfigError) as raised:
        save_measurement(tmp_path, "partial", rows, {})
    message = str(raised.value)
    assert str(tmp_path / "partial.csv") in message
    assert "kind: no rows of attention_decode, softmax: a fit needs rows of every class" in message
    assert not (tmp_path / "partial.device.yaml").exists()
