"""Studies on a described wafer: the same report as the preset it copies, in-process or spawned; a device file whose
keys the study overrides; a sweep over a wafer key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from stratasim.config.study_file import load_study
from stratasim.study.run import run_study

ROOT = Path(__file__).resolve().parents[2]
# The training loop's GEMMs on PALM's wafer: every one of them bound by the edge DRAM.
STUDY = (
    (ROOT / "examples" / "training_loop.yaml")
    .read_text()
    .replace("backend: roofline\n  device: h100", "backend: wafer\n  device: palm-wafer")
)


def _study(tmp_path: Path, text: str = STUDY) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _numbers(report: Any) -> dict[str, Any]:
    """The report as JSON without what may differ run to run (wall time) or names where a layer ran."""
    data = report.to_dict()
    for key in ("wall_seconds", "backends"):
        data.pop(key)
    return dict(data)


def test_a_described_wafer_gives_the_report_of_the_preset(tmp_path: Path) -> None:
    study = _study(tmp_path)
    assert "backend: wafer" in study.read_text()
    preset = _numbers(run_study(load_study(study)))
    assert _numbers(run_study(load_study(study, ["compute.device={preset: palm-wafer}"]))) == preset


def test_a_spawned_compute_server_prices_the_described_wafer_as_in_process(tmp_path: Path) -> None:
    study = _study(tmp_path)
    slow = "compute.device={preset: palm-wafer, dram_bandwidth: 64GB/s, energy: {dram_byte_pj: 100}}"
    local = run_study(load_study(study, [slow]))
    spawned = run_study(load_study(study, [slow, "compute.spawn=true"]))
    assert "(spawned)" in spawned.backends["compute"]
    assert _numbers(spawned) == _numbers(local)
    assert local.total_time_ps > run_study(load_study(study)).total_time_ps  # the bandwidth did count


def test_a_wafer_file_relative_to_the_study_with_keys_the_study_overrides(tmp_path: Path) -> None:
    (tmp_path / "chips").mkdir()
    (tmp_path / "chips" / "wafer.yaml").write_text("{preset: palm-wafer, tiles: {x: 10}, dram_bandwidth: 128GB/s}\n")
    study = _study(tmp_path, STUDY.replace("device: palm-wafer", "device: {file: chips/wafer.yaml}"))
    from_file = run_study(load_study(study))
    inline = "compute.device={preset: palm-wafer, tiles: {x: 10}, dram_bandwidth: 128GB/s}"
    assert _numbers(from_file) == _numbers(run_study(load_study(study, [inline])))
    doubled = run_study(load_study(study, ["compute.device.dram_bandwidth=256GB/s"]))
    assert doubled.total_time_ps < from_file.total_time_ps


def test_a_sweep_varies_the_dram_bandwidth_of_the_described_wafer(tmp_path: Path) -> None:
    study = _study(tmp_path, STUDY.replace("device: palm-wafer", "device: {preset: palm-wafer}"))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "base: study.yaml\nspace:\n  compute.device.dram_bandwidth: [128GB/s, 512GB/s]\n"
        "objectives: [{metric: total_time_ns, goal: min}]\nsearch: {method: grid}\n"
    )
    argv = [
        sys.executable,
        "-m",
        "stratasim",
        "sweep",
        str(sweep),
        "--db",
        str(tmp_path / "s.db"),
        "--workers",
        "1",
        "--json",
    ]
    done = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT, check=True).stdout)
    trials = {t["params"]["compute.device.dram_bandwidth"]: t["metrics"] for t in done["trials"]}
    assert sorted(trials) == ["128GB/s", "512GB/s"]
    for bandwidth, metrics in trials.items():
        alone = run_study(load_study(study, [f"compute.device.dram_bandwidth={bandwidth}"])).to_dict()
        assert metrics["total_time_ps"] == alone["total_time_ps"]
    best = [t["params"] for t in done["trials"] if t["number"] in done["pareto"]]
    assert best == [{"compute.device.dram_bandwidth": "512GB/s"}]
