"""``system.slowdown``, ``system.variability`` and ``run --samples``: bad input is one clear message naming the key;
a Monte-Carlo run reports its step-time distribution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import RunCli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STRAGGLERS = str(EXAMPLES / "clusters" / "stragglers.yaml")
QUICKSTART = str(EXAMPLES / "quickstart.yaml")


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["system.slowdown=[{npus: [3], factor: -1.5}]"], ("system.slowdown[0].factor", "greater than 0", "-1.5")),
        (["system.slowdown=[{npus: [3], factor: 0}]"], ("system.slowdown[0].factor", "greater than 0")),
        (
            ["system.slowdown=[{npus: ['x'], factor: 2}]"],
            ("system.slowdown[0].npus", "cannot read 'x' as an NPU id or a range"),
        ),
        (["system.slowdown=[{npus: ['2-99'], factor: 2}]"], ("system.slowdown", "names NPU 99", "has 8 NPUs")),
        (["system.slowdown=[{npus: [1], factor: 2, from: -1ms}]"], ("system.slowdown[0].from", "negative")),
        (["system.variability.npu.distribution=gamma"], ("system.variability.npu.distribution", "lognormal")),
        (["system.variability.npu.sigma=-0.1"], ("system.variability.npu.sigma", "greater than or equal to 0")),
        (["system.variability.operator.cv=0.5"], ("system.variability.operator", "at or below 0", "use lognormal")),
        (
            ["system.variability.npu={distribution: uniform, low: -1, high: 2}"],
            ("system.variability.npu.low", "greater than 0"),
        ),
        (
            ["system.variability.npu={distribution: uniform, low: 2, high: 1}"],
            ("system.variability.npu", "low (2.0) is above high (1.0)"),
        ),
        (["system.variability.npu={distribution: uniform, low: 1}"], ("system.variability.npu", "uniform needs high")),
        (
            ["system.variability.npu={distribution: straggler, probability: 0.1, factor: 2, sigma: 1}"],
            ("system.variability.npu", "straggler takes probability and factor, not sigma"),
        ),
        (
            ["system.variability.npu={distribution: empirical, values: [1.0, -0.5]}"],
            ("system.variability.npu", "every value is a factor above 0"),
        ),
        (["system.variability.network.jitter.mean=-1us"], ("system.variability.network.jitter.mean", "negative")),
        (["system.variability.samples=0"], ("system.variability.samples", "greater than or equal to 1")),
    ],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_bad_variability_input(run_cli: RunCli, command: str, overrides: list[str], fragments: tuple[str, ...]) -> None:
    code, _, err = run_cli(command, STRAGGLERS, *(arg for o in overrides for arg in ("--set", o)))
    assert code == 2
    assert err.startswith("error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


def test_samples_must_be_a_positive_count(run_cli: RunCli) -> None:
    code, _, err = run_cli("run", STRAGGLERS, "--samples", "0")
    assert code == 2 and "--samples: expected a number of samples, at least 1, got '0'" in err


def test_a_monte_carlo_run_reports_the_distribution(run_cli: RunCli) -> None:
    """Without variability every sample is the deterministic run; the main figures are the first sample's."""
    code, out, _ = run_cli("run", QUICKSTART, "--samples", "3", "--json")
    assert code == 0
    report = json.loads(out)
    samples = report["samples"]
    assert samples["count"] == 3 and samples["seed"] == 0
    assert samples["times_ns"] == [report["total_time_ns"]] * 3
    assert samples["p50_ns"] == samples["p99_ns"] == samples["min_ns"] == samples["max_ns"] == report["total_time_ns"]
    assert samples["stdev_ns"] == 0 and samples["slowest_rank_share"] == 0


def test_the_stragglers_example_runs_its_samples(run_cli: RunCli) -> None:
    code, out, _ = run_cli("run", STRAGGLERS, "--samples", "5")
    assert code == 0
    assert "samples          5 from seed 7: p50 " in out
    assert "warning: system.slowdown/variability make the NPUs differ, so the symmetry shortcut is off" in out


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("check", ["--set", "system.slowdown=[{npus: [1], factor: 2}]"]),
        ("run", ["--set", "system.variability.npu={distribution: lognormal, sigma: 0.1}"]),
        ("run", ["--samples", "2"]),
    ],
)
def test_a_request_level_serving_study_refuses_variability(run_cli: RunCli, command: str, args: list[str]) -> None:
    """The request-level loop prices its iterations without the engine, so nothing would apply the factors."""
    serving = str(EXAMPLES / "serving" / "llama3_70b_h100_tp8.yaml")
    code, _, err = run_cli(command, serving, "--set", "workload.requests.count=10", *args)
    assert code == 2
    assert err.startswith("error: system.slowdown, system.variability and --samples apply to studies the engine runs")


def test_zero_variance_with_every_shortcut_off_keeps_the_transformer_figure(run_cli: RunCli) -> None:
    """examples/transformer.yaml runs on representatives, whole blocks and fused compute; zero-spread variability turns
    all three off (every NPU, node and message on its own) and the iteration stays 79,842,170,750 ps to the ps."""
    zero = "{operator: {distribution: normal, cv: 0}, network: {jitter: {distribution: constant, value: 0ns}}}"
    code, out, _ = run_cli("run", str(EXAMPLES / "transformer.yaml"), "--set", f"system.variability={zero}", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["total_time_ps"] == 79_842_170_750 and report["simulated_npus"] == 32
    assert report["samples"]["times_ns"] == [79_842_170.75]
