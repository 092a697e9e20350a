"""A study's trace paths are relative to the study file's folder, as ``compute.profile`` and device files are, so a
study runs from any folder and ``import astra -o`` writes a study that finds its trace (issue 27)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stratasim.cli import main
from stratasim.config import load_study
from stratasim.study.run import check_study
from tests.data import ASTRA_INPUTS

ALL_REDUCE = ASTRA_INPUTS / "workload" / "microbenchmarks" / "all_reduce_8npus_1MB" / "all_reduce"
NETWORK = "network:\n  topology: [{kind: switch, size: 8, bandwidth: 50GB/s, latency: 500ns}]\n"


def _copy_trace(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(8):
        shutil.copy(f"{ALL_REDUCE}.{rank}.et", folder / f"all_reduce.{rank}.et")


@pytest.mark.parametrize("relative", [True, False])
def test_a_trace_is_read_from_the_study_s_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool
) -> None:
    _copy_trace(tmp_path / "study" / "traces")
    path = "traces/all_reduce" if relative else str(tmp_path / "study" / "traces" / "all_reduce")
    (tmp_path / "study" / "s.yaml").write_text(f"workload: {{kind: chakra, path: {path}}}\n{NETWORK}")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    study = load_study(tmp_path / "study" / "s.yaml")
    assert study.workload.config.path == str(tmp_path / "study" / "traces" / "all_reduce")
    check_study(study)


def test_a_request_trace_is_read_from_the_study_s_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "serving" / "llama3_70b_h100_disaggregated.yaml"
    text = example.read_text(encoding="utf-8")
    start, end = text.index("    count: 2000"), text.index("  slo:")
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "s.yaml").write_text(text[:start] + "    trace: {path: requests.csv}\n" + text[end:])
    (tmp_path / "study" / "requests.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n")
    monkeypatch.chdir(tmp_path)
    study = load_study(tmp_path / "study" / "s.yaml")
    assert study.workload.config.requests.trace.path == str(tmp_path / "study" / "requests.csv")


def test_import_astra_output_finds_its_trace_from_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_trace(tmp_path / "traces")
    monkeypatch.chdir(tmp_path)
    network = ASTRA_INPUTS / "network" / "Ring_8npus.yml"
    system = ASTRA_INPUTS / "system" / "HGX-H100-validated.json"
    args = ["import", "astra", "--network", str(network), "--system", str(system), "--workload", "traces/all_reduce"]
    assert main([*args, "-o", "studies/ring.yaml"]) == 2  # no folder studies/ yet: one error, no traceback
    (tmp_path / "studies").mkdir()
    assert main([*args, "-o", "studies/ring.yaml"]) == 0
    assert "path: ../traces/all_reduce" in (tmp_path / "studies" / "ring.yaml").read_text()
    monkeypatch.chdir(tmp_path / "studies")
    check_study(load_study("ring.yaml"))
    monkeypatch.chdir("/")
    check_study(load_study(tmp_path / "studies" / "ring.yaml"))


def test_a_job_s_trace_is_read_from_the_study_s_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_trace(tmp_path / "study" / "traces")
    trace = "{kind: chakra, path: traces/all_reduce}"
    (tmp_path / "study" / "s.yaml").write_text(
        "workload:\n  kind: jobs\n  jobs:\n"
        f"    - {{name: a, npus: 8, workload: {{kind: collective, collective: all_reduce, size: 1MiB}}}}\n"
        f"    - {{name: b, npus: 8, workload: {trace}}}\n"
        "network:\n  topology: [{kind: switch, size: 16, bandwidth: 50GB/s, latency: 500ns}]\n"
    )
    monkeypatch.chdir(tmp_path)
    study = load_study(tmp_path / "study" / "s.yaml")
    assert study.workload.config.jobs[1].workload.path == str(tmp_path / "study" / "traces" / "all_reduce")
    assert study.workload.config.jobs[1].kind == "chakra"
    assert check_study(study) == 16
