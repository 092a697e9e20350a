"""Studies on a described device: the same report as the preset it copies, in-process or spawned; a device file;
cost per iteration from an hourly rate; a sweep over a device key; bad descriptions, one clear error each."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from tests.helpers import stratasim_process

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMER = ROOT / "examples" / "transformer.yaml"
TRAINING_LOOP = ROOT / "examples" / "training_loop.yaml"
# The h100 preset written out in full, as a user describing a new chip would.
H100_IN_FULL = (
    "{name: h100, peak: {fp64: 66.9TFLOPS, fp32: 66.9TFLOPS, tf32: 494.7TFLOPS, fp16: 989.4TFLOPS, "
    "bf16: 989.4TFLOPS, fp8: 1978.9TFLOPS, int8: 1978.9TOPS}, memory_bandwidth: 3.35TB/s, memory_capacity: 80GiB, "
    "tdp: 700W, sram: {capacity: 50MiB, bandwidth: 9369.6GB/s}, tiling: {tile_m: 256, tile_n: 256, tile_k: 64, "
    "units: 66}, usd_per_hour: 10}"
)


def _numbers(report: Any) -> dict[str, Any]:
    """The report as JSON without what may differ run to run (wall time) or names where a layer ran."""
    data = report.to_dict()
    for key in ("wall_seconds", "backends"):
        data.pop(key)
    return dict(data)


def _figures(report: Any) -> dict[str, Any]:
    """The report's numbers alone: without its calibration line and warnings either."""
    data = _numbers(report)
    for key in ("calibration", "warnings"):
        data.pop(key, None)
    return data


@pytest.mark.parametrize("study", [TRANSFORMER, TRAINING_LOOP])
def test_a_described_device_gives_the_report_of_the_preset(study: Path) -> None:
    preset = run_study(load_study(study, ["compute.device=h100"]))
    described = run_study(load_study(study, ["compute.device={preset: h100}"]))
    assert _figures(described) == _figures(preset) and described.warnings == preset.warnings
    assert described.calibration == f"{preset.calibration} (the h100 preset's model)"
    # Written out without ``preset:``, the chip is not the h100 and has no fitted model: its datasheet figures.
    in_full = run_study(load_study(study, [f"compute.device={H100_IN_FULL}"]))
    assert _figures(in_full) == _figures(
        run_study(load_study(study, ["compute.device=h100", "compute.calibration={basis: datasheet}"]))
    )
    assert any("'h100' runs uncalibrated" in warning for warning in in_full.warnings)


def test_a_spawned_compute_server_prices_the_described_device_as_in_process() -> None:
    slow = "compute.device={preset: h100, memory_bandwidth: 1TB/s, usd_per_hour: 3.6}"
    local = run_study(load_study(TRANSFORMER, [slow]))
    spawned = run_study(load_study(TRANSFORMER, [slow, "compute.spawn=true"]))
    assert "(spawned)" in spawned.backends["compute"]
    assert _numbers(spawned) == _numbers(local)
    assert local.total_time_ps > run_study(load_study(TRANSFORMER)).total_time_ps  # the bandwidth did count


def test_a_device_file_relative_to_the_study_with_keys_the_study_overrides(tmp_path: Path) -> None:
    (tmp_path / "chips").mkdir()
    (tmp_path / "chips" / "mychip.yaml").write_text(f"{H100_IN_FULL}\n".replace("name: h100", "name: mychip"))
    study = tmp_path / "study.yaml"
    study.write_text(TRANSFORMER.read_text().replace("device: h100", "device: {file: chips/mychip.yaml}"))
    assert "{file: chips/mychip.yaml}" in study.read_text()
    from_file = run_study(load_study(study))
    datasheet = run_study(load_study(TRANSFORMER, ["compute.calibration={basis: datasheet}"]))
    assert _figures(from_file) == _figures(datasheet)
    halved = run_study(load_study(study, ["compute.device.memory_bandwidth=1.675TB/s"]))
    assert halved.total_time_ps > from_file.total_time_ps


def test_cost_per_iteration_is_npus_times_time_times_the_hourly_rate() -> None:
    report = run_study(load_study(TRANSFORMER, ["compute.device={preset: h100, usd_per_hour: 3.6}"]))
    data = report.to_dict()
    npus, total_ps = data["npus"], data["total_time_ps"]
    assert (npus, total_ps) == (32, 79842170750)
    # 32 NPUs x 79,842,170,750 ps x $3.6/h / (3.6 x 10^15 ps/h) = $0.002554949464, to the float's last digits: the study's rate wins
    # over the preset's.
    assert data["cost_usd_per_iteration"] == pytest.approx(float(Fraction(32 * 79842170750, 10**15)), rel=1e-12)
    assert "cost             $0.00255495 per iteration" in report.to_text()
    assert "cost_usd_per_iteration" not in run_study(load_study(TRANSFORMER, ["compute.device=gaudi3"])).to_dict()


def test_the_h100_preset_prices_an_iteration_at_its_published_rate() -> None:
    # examples/transformer.yaml names the preset alone: its rate, Oracle's $10 per H100-hour, prices the iteration.
    data = run_study(load_study(TRANSFORMER)).to_dict()
    assert (data["npus"], data["total_time_ps"]) == (32, 79842170750)
    # By hand: 32 x 79.84217075 ms x $10 / 3600 s = $0.00709708, to the float's last digits.
    by_hand = 32 * 79.84217075e-3 * 10.0 / 3600
    assert data["cost_usd_per_iteration"] == pytest.approx(by_hand, rel=1e-12)
    assert data["cost_usd_per_iteration"] == pytest.approx(float(Fraction(32 * 79842170750 * 10, 36 * 10**14)))


def test_a_sweep_varies_a_key_of_the_described_device(tmp_path: Path) -> None:
    study = tmp_path / "study.yaml"
    study.write_text(TRANSFORMER.read_text().replace("device: h100", "device: {preset: h100, usd_per_hour: 3.6}"))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "base: study.yaml\nspace:\n  compute.device.memory_bandwidth: [1TB/s, 4TB/s]\n"
        "objectives: [{metric: cost_usd_per_iteration, goal: min}]\nsearch: {method: grid}\n"
    )
    swept = stratasim_process(
        "sweep", str(sweep), "--db", str(tmp_path / "s.db"), "--workers", "1", "--json", timeout=300, check=True
    )
    done = json.loads(swept.stdout)
    trials = {t["params"]["compute.device.memory_bandwidth"]: t["metrics"] for t in done["trials"]}
    for bandwidth, metrics in trials.items():
        alone = run_study(load_study(study, [f"compute.device.memory_bandwidth={bandwidth}"])).to_dict()
        assert (metrics["total_time_ps"], metrics["cost_usd_per_iteration"]) == (
            alone["total_time_ps"],
            alone["cost_usd_per_iteration"],
        )
    best = [t["params"] for t in done["trials"] if t["number"] in done["pareto"]]
    assert best == [{"compute.device.memory_bandwidth": "4TB/s"}]


@pytest.mark.parametrize(
    ("device", "fragment"),
    [
        ("{preset: h100, bandwith: 4TB/s}", "compute.device.bandwith: unknown key; did you mean 'memory_bandwidth'?"),
        ("{preset: h100, memory_bandwidth: -4TB/s}", "compute.device.memory_bandwidth: a bandwidth must be positive"),
        ("{preset: h999}", "compute.device.preset: unknown preset 'h999'; expected one of a100, b200"),
        ("{file: nowhere.yaml}", "compute.device.file: examples/nowhere.yaml: no such file"),
        ("{preset: h100, memory_bandwidth: 4TB}", "compute.device.memory_bandwidth: unknown bandwidth unit 'TB'"),
        ("{preset: h100, peak: {bf16: fast}}", "compute.device.peak.bf16: cannot read 'fast' as a throughput"),
        ("{name: mychip}", "compute.device: a device without a preset needs peak, memory_bandwidth, memory_capacity"),
        ("[h100]", "compute.device: expected a device name (h100) or a mapping describing one"),
    ],
)
def test_bad_descriptions_are_one_clear_error(device: str, fragment: str) -> None:
    done = stratasim_process("check", "examples/training_loop.yaml", "--set", f"compute.device={device}", timeout=120)
    code, stderr = done.returncode, done.stderr
    assert code == 2 and fragment in stderr and "Traceback" not in stderr, stderr


def test_a_described_device_is_for_the_roofline_backend() -> None:
    done = stratasim_process(
        "check",
        "examples/training_loop.yaml",
        "--set",
        "compute.device={preset: h100}",
        "--set",
        "compute.per_kind={gemm: timeloop}",
        timeout=120,
    )
    code, stderr = done.returncode, done.stderr
    assert code == 2 and "priced by the roofline backend; timeloop takes a preset's name" in stderr, stderr
