"""The screening rung of a fidelity ladder: a first level with ``estimate: first_order`` prices its trials with the
first-order model in one call, simulates those the model declines, and the next level's trials carry the
estimate's error."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.cli import main
from stratasim.config.study_file import parse_study
from stratasim.explore import ResultStore, load_sweep, run_sweep, screening
from stratasim.explore.ladder import kept
from stratasim.explore.ranking import ranked
from stratasim.explore.space import expand, resolve
from stratasim.explore.sweep_file import Sweep
from stratasim.kernel.errors import ConfigError
from stratasim.optimize import FirstOrderModel
from tests.optimize.test_first_order_engine import BASE

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
DECLINED = "gradient buckets (parallelism.dp_bucket) under the interleaved or a split schedule are not modelled"


def _sweep(tmp_path: Path, **changes: Any) -> Path:
    """A ladder over 12 plans of a tiny transformer on 32 NPUs with gradient buckets, 4 of them (zb_h1) ones the model
    declines;
    ``changes`` replace its keys (None: removes one)."""
    study = copy.deepcopy(BASE)
    study["workload"]["parallelism"] = {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "dp_bucket": "64MiB"}
    document: dict[str, Any] = {
        "study": study,
        "space": {
            "workload.parallelism.schedule": ["1f1b", "gpipe", "zb_h1"],
            "workload.parallelism.micro_batch": [1, 2],
            "workload.parallelism.recompute": ["none", "selective"],
        },
        "objectives": [{"metric": "total_time_ns", "goal": "min"}],
        "fidelity": [{"name": "screen", "estimate": "first_order", "keep": {"top": 4}}, {"name": "simulate"}],
    }
    document |= changes
    document = {key: value for key, value in document.items() if value is not None}
    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _run(path: Path, db: Path) -> tuple[Sweep, ResultStore, Any]:
    sweep = load_sweep(path)
    store = ResultStore(db, sweep.section.model_dump_json())
    return sweep, store, run_sweep(sweep, store)


def test_screened_trials_are_estimated_declined_ones_simulated_and_the_next_level_carries_the_error(
    tmp_path: Path,
) -> None:
    sweep, store, outcome = _run(_sweep(tmp_path), tmp_path / "s.db")
    screen, simulate = outcome.levels
    assert len(screen.evaluated) == 12 and len(screen.kept) == 4 and simulate.evaluated == screen.kept
    first = store.finished(0)
    estimated = [r for r in first.values() if "first_order.pipeline_bubble_ns" in r.metrics]
    simulated = [r for r in first.values() if "events_processed" in r.metrics]
    assert len(estimated) == 8 and len(simulated) == 4
    assert {r.params["workload.parallelism.schedule"] for r in simulated} == {"zb_h1"}
    assert f"screen: 4 trials simulated, not estimated (the first-order model declines them): {DECLINED}" in (
        outcome.notes
    )
    # An estimated trial holds the model's figures, named as the report names them, and its share of the call.
    study = parse_study(sweep.base, "tiny.yaml")
    with FirstOrderModel(study) as model:
        figures = model.estimate([r.params for r in estimated])
    for record, ps in zip(estimated, figures.iteration_ps):
        assert record.metrics["total_time_ps"] == ps and record.metrics["total_time_ns"] == ps / 1000
        assert record.metrics["npus"] == 32 and record.wall_seconds > 0 and record.fidelity == 0
    # Every trial the next level simulated carries screen_error = (estimate - simulated) / simulated.
    errors = []
    for record in store.finished(1).values():
        estimate = next(r for r in first.values() if r.params == record.params).metrics["total_time_ns"]
        simulated_ns = record.metrics["total_time_ns"]
        assert record.metrics["screen_error"] == (estimate - simulated_ns) / simulated_ns
        errors.append(record.metrics["screen_error"])
    assert simulate.screen_error == (min(errors), max(errors)) and max(map(abs, errors)) < 1e-3
    assert simulate.tau is not None


def test_a_resumed_ladder_reuses_the_screened_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _sweep(tmp_path)
    _, _, before = _run(path, tmp_path / "s.db")

    def refuse(*args: object) -> None:
        raise AssertionError("the screening level ran again")

    monkeypatch.setattr(screening, "FirstOrderModel", refuse)
    _, _, again = _run(path, tmp_path / "s.db")
    assert again.ran == 0 and [r.number for r in again.trials] == [r.number for r in before.trials]
    assert [r.metrics for r in again.trials] == [r.metrics for r in before.trials]


def test_memory_constraints_and_the_command_line_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A memory figure of the report constrains estimated and simulated trials alike; the summary gives the range
    of the screening error."""
    path = _sweep(tmp_path, constraints=[{"metric": "memory_per_npu_bytes.0", "max": 80e9}])
    assert main(["sweep", str(path), "--db", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "screen: 12 trials" in out and "simulate: 4 trials" in out and "screening error" in out
    assert DECLINED in out
    store = ResultStore(tmp_path / "s.db", load_sweep(path).section.model_dump_json())
    assert all("memory_per_npu_bytes.0" in r.metrics for r in store.finished(0).values())


@pytest.mark.parametrize(
    ("fidelity", "where", "expected"),
    [
        (
            [{"name": "a", "estimate": "calculon", "keep": {"top": 1}}, {"name": "b"}],
            "fidelity[0].estimate",
            "first_order",
        ),
        (
            [{"name": "a", "estimate": "first_order", "set": {"system.splits": 2}, "keep": {"top": 1}}, {"name": "b"}],
            "fidelity[0].estimate",
            "give estimate or set, not both",
        ),
        (
            [{"name": "a", "keep": {"top": 1}}, {"name": "b", "estimate": "first_order"}],
            "fidelity[1].estimate",
            "only the first level estimates",
        ),
    ],
)
def test_a_bad_estimate_names_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fidelity: list[Any], where: str, expected: str
) -> None:
    path = _sweep(tmp_path, fidelity=fidelity)
    with pytest.raises(ConfigError) as caught:
        load_sweep(path)
    assert any(place == where and expected in message for place, message in caught.value.problems), (
        caught.value.problems
    )
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and where in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"search": {"method": "tpe", "trials": 3}}, "a ladder screens a grid or random search"),
        ({"search": {"method": "milp"}}, "no fidelity ladder"),
    ],
)
def test_screening_needs_a_grid_or_random_search(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_sweep(_sweep(tmp_path, **changes))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"study": None, "base": str(QUICKSTART), "space": {"system.splits": [1, 2]}},
            "prices transformer training plans, not a",
        ),
        ({"objectives": [{"metric": "exposed_comm_ns"}]}, "also name exposed_comm_ns"),
    ],
)
def test_what_the_model_cannot_price_is_one_error_before_any_trial_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], expected: str
) -> None:
    path = _sweep(tmp_path, **changes)
    sweep = load_sweep(path)
    store = ResultStore(tmp_path / "s.db", sweep.section.model_dump_json())
    with pytest.raises(ConfigError) as caught:
        run_sweep(sweep, store)
    assert [place for place, _ in caught.value.problems] == ["fidelity[0].estimate"]
    assert expected in str(caught.value) and not store.finished(0)
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "fidelity[0].estimate" in err and "Traceback" not in err


GPT3_LADDER = Path(__file__).resolve().parents[2] / "examples" / "explore" / "gpt3_plans_ladder.yaml"
# Simulating all 153 plans of examples/explore/gpt3_plans.yaml (docs/validation/explore-gpt3-plans.md): the best
# five trials by total_time_ps, the best first.
SIMULATED_TOP5 = {
    40: 20_689_824_647_772,  # TP 4, PP 8, DP 32, interleaved with 4 chunks, micro-batch 1, selective, ZeRO 1
    115: 20_725_310_616_974,
    114: 20_771_788_289_017,
    93: 20_784_876_193_178,
    109: 20_808_956_980_898,
}


def test_the_gpt3_screening_rung_keeps_the_simulated_best_five() -> None:
    """Screening the 153 GPT-3 plans (no simulation: about a second) passes on every plan of the simulated top 5,
    and ranks the simulated best first."""
    sweep = load_sweep(GPT3_LADDER)
    trials = list(enumerate(expand(sweep, resolve(sweep))))
    screened = screening.screen_trials(sweep, trials, ["total_time_ns"], 0, "screen")
    assert len(screened.records) == 153 and not screened.declined and not screened.notes
    passed = kept(sweep, sweep.section.fidelity[0], screened.records)
    assert len(passed) == 10 and set(SIMULATED_TOP5) <= {r.number for r in passed}
    assert ranked(sweep, screened.records)[0].number == 40


@pytest.mark.slow
def test_the_gpt3_ladder_finds_the_best_plan_of_simulating_all_153(tmp_path: Path) -> None:
    """The whole ladder (153 estimated, 10 simulated: tens of seconds) ends on the best plan simulating all 153
    finds, to the picosecond, with the simulated top 5 in the same order."""
    _, _, outcome = _run(GPT3_LADDER, tmp_path / "gpt3.db")
    best = ranked(load_sweep(GPT3_LADDER), outcome.trials)[:5]
    assert {r.number: r.metrics["total_time_ps"] for r in best} == SIMULATED_TOP5
    assert list(SIMULATED_TOP5) == [r.number for r in best]
    low, high = outcome.levels[1].screen_error or (1.0, 1.0)
    assert -1e-4 < low <= high < 1e-4
