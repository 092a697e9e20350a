"""Issue 14's defect: the Timeloop-style mapper's energy and EDP objectives could not be chosen from a study or the
command line. ``compute.objective`` and ``--objective`` choose them, in-process and spawned alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratasim.cli.commands import main
from stratasim.config.study_file import load_study
from stratasim.kernel.errors import ConfigError
from stratasim.study.run import run_study
from tests.helpers import RunCli

TRAINING = Path(__file__).resolve().parents[2] / "examples" / "training_loop.yaml"
ROUTE = "compute.per_kind={gemm: {backend: timeloop, device: eyeriss-like}}"


def _cost(run_cli: RunCli, objective: str) -> dict[str, float]:
    code, out, _ = run_cli(
        "cost",
        "gemm",
        "M=512",
        "K=512",
        "N=512",
        "--backend",
        "timeloop",
        "--device",
        "eyeriss-like",
        "--objective",
        objective,
        "--json",
    )
    assert code == 0
    return json.loads(out)["costs"][0]


def test_cost_minimises_what_it_is_told(run_cli: RunCli, capsys: pytest.CaptureFixture[str]) -> None:
    fastest, frugal, edp = (_cost(run_cli, objective) for objective in ("latency", "energy", "edp"))
    assert fastest["duration_ps"] < frugal["duration_ps"] and frugal["energy_pj"] < fastest["energy_pj"]
    assert edp["duration_ps"] * edp["energy_pj"] <= min(r["duration_ps"] * r["energy_pj"] for r in (fastest, frugal))
    assert (
        main(
            [
                "cost",
                "gemm",
                "M=8",
                "K=8",
                "N=8",
                "--backend",
                "timeloop",
                "--device",
                "eyeriss-like",
                "--objective",
                "speed",
            ]
        )
        == 2
    )
    assert "--objective: unknown objective 'speed'" in capsys.readouterr().err


def test_a_study_chooses_the_objective_in_process_and_spawned() -> None:
    latency = run_study(load_study(TRAINING, [ROUTE]))
    energy = run_study(load_study(TRAINING, [ROUTE, "compute.objective=energy"]))
    assert latency.total_time_ps < energy.total_time_ps
    assert energy.compute_energy_pj < latency.compute_energy_pj
    spawned = run_study(load_study(TRAINING, [ROUTE, "compute.objective=energy", "compute.spawn=true"]))
    assert spawned.result.total_time_ps == energy.result.total_time_ps
    assert spawned.compute_energy_pj == energy.compute_energy_pj


def test_an_objective_without_the_mapper_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="chooses what the timeloop backend's mapper minimises"):
        load_study(TRAINING, ["compute.objective=energy"])
    with pytest.raises(ConfigError, match="compute.objective"):
        load_study(TRAINING, [ROUTE, "compute.objective=speed"])
    assert main(["serve", "compute", "--backend", "roofline", "--objective", "energy"]) == 2
    assert "--objective chooses what the timeloop compute backend's mapper minimises" in capsys.readouterr().err
