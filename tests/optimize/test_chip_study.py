"""``stratasim optimize`` on DFModel's chips: a dataflow study whose compute backend is ``dataflow_chip`` gets the two
passes (dataflow against kernel-by-kernel execution), its inter-chip mapping simulated; a generated graph optimises
as its file does; the dataflow flags reach the optimiser, and each misuse is one clear message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, RunCli

OPTIMIZE = ROOT / "examples" / "optimize"
SN10 = str(OPTIMIZE / "gpt3_sn10.yaml")


def _optimize(run_cli: RunCli, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("optimize", *args, "--json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def test_gpt3_on_sn10s_streams_faster_than_kernel_by_kernel_and_is_simulated(run_cli: RunCli) -> None:
    result = _optimize(run_cli, SN10, "--time-limit", "3")
    plan, details = result["plan"], result["details"]
    assert plan["workload.mapping.tp"] * plan["workload.mapping.pp"] * plan["workload.mapping.dp"] == 8
    assert details["chip"] == "sn10" and details["execution"] == "dataflow"
    assert result["estimate_ps"] < details["kernel_by_kernel_estimate_ps"]  # fusion pays on a dataflow chip
    assert details["fusion_gain"] == pytest.approx(details["kernel_by_kernel_estimate_ps"] / result["estimate_ps"])
    assert sum(result["estimate_terms_ns"].values()) == pytest.approx(result["estimate_ns"], rel=1e-9)
    # the engine runs kernels one by one: its time is the kernel-by-kernel baseline's, not fusion's
    assert result["total_time_ps"] > result["estimate_ps"]
    assert any("simulated time is the kernel-by-kernel baseline" in note for note in result["notes"])


def test_kernel_by_kernel_execution_is_the_baseline_of_the_dataflow_run(run_cli: RunCli) -> None:
    alone = _optimize(run_cli, SN10, "--execution", "kernel_by_kernel", "--no-simulate")
    assert alone["details"]["execution"] == "kernel_by_kernel" and alone["details"]["fusion_gain"] == 1
    assert alone["estimate_ps"] == alone["details"]["kernel_by_kernel_estimate_ps"]
    assert alone["total_time_ps"] is None


def test_a_generated_graph_optimises_as_its_file(run_cli: RunCli) -> None:
    generated = _optimize(run_cli, str(OPTIMIZE / "hpl_generated.yaml"))
    written = _optimize(run_cli, str(OPTIMIZE / "hpl.yaml"))
    for result in (generated, written):
        result.pop("solver_seconds")
    assert generated == written


def test_hpl_runs_on_an_sn30_through_the_two_passes(run_cli: RunCli) -> None:
    chip = ("--set", "compute.backend=dataflow_chip", "--set", "compute.device=sn30")
    result = _optimize(run_cli, str(OPTIMIZE / "hpl_generated.yaml"), *chip)
    assert result["details"]["chip"] == "sn30" and result["total_time_ps"] > 0


def test_the_inter_chip_options_reach_the_optimiser(run_cli: RunCli) -> None:
    kept = _optimize(run_cli, str(OPTIMIZE / "hpl.yaml"), "--keep-degrees", "--no-simulate")
    assert kept["plan"]["workload.mapping.tp"] == 16  # the study's degrees
    overlapped = _optimize(run_cli, str(OPTIMIZE / "hpl.yaml"), "--overlap", "--no-simulate")
    assert any(note.startswith("overlap:") for note in overlapped["notes"])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((SN10, "--overlap"), "the two passes always overlap a stage's work"),
        ((SN10, "--keep-degrees"), "--overlap and --keep-degrees are for the inter-chip pass on a roofline device"),
        ((SN10, "--objective", "perf_per_dollar"), "DFModel's two passes minimise the iteration time"),
        ((str(OPTIMIZE / "hpl.yaml"), "--execution", "dataflow"), "set compute.backend: dataflow_chip"),
        ((SN10, "--execution", "streaming"), "invalid choice: 'streaming'"),
        (
            (str(ROOT / "examples" / "explore" / "gpt3_1t_splits.yaml"), "--overlap"),
            "options of a kind: dataflow study's optimiser",
        ),
        ((SN10, "--set", "compute.device=sn40"), "compute.device: unknown dataflow chip 'sn40': the presets are h100"),
    ],
)
def test_a_misused_option_is_one_clear_message(run_cli: RunCli, args: tuple[str, ...], said: str) -> None:
    code, out, err = run_cli("optimize", *args, "--no-simulate")
    assert code == 2 and said in err and "Traceback" not in err, err


def test_every_example_here_is_a_file() -> None:
    assert Path(SN10).is_file() and (OPTIMIZE / "hpl_generated.yaml").is_file()


def test_the_chips_overrides_reach_the_two_passes(run_cli: RunCli) -> None:
    args = (SN10, "--execution", "kernel_by_kernel", "--no-simulate")
    preset = _optimize(run_cli, *args)
    halved = _optimize(run_cli, *args, "--set", "compute.chip={tiles: 320}")
    assert halved["estimate_ps"] > preset["estimate_ps"]
