"""``search: {method: milp}``: the plan program's choice simulated as the sweep's one trial, kept in the store with the
program's estimate and gap, resumed like any trial; a sweep the program cannot solve is one error naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stratasim.explore import ResultStore, run_sweep
from stratasim.explore.results import read_results
from stratasim.explore.sweep_file import parse_sweep
from stratasim.kernel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ONE_PLAN = {"generator": "parallelism", "tp": [4], "pp": [8], "schedule": ["interleaved"], "virtual_stages": [4],
            "micro_batch": [1], "recompute": ["selective"], "zero": [1], "sequence_parallel": [False]}  # fmt: skip


def milp_sweep(**section: Any) -> Any:
    data = {"base": "../gpt3_175b.yaml", "space": {"plan": ONE_PLAN}, "search": {"method": "milp"}, **section}
    return parse_sweep(data, "milp.yaml", ROOT / "examples" / "explore")


def test_the_optimal_plan_is_one_trial_in_the_store(tmp_path: Path) -> None:
    sweep = milp_sweep()
    store = ResultStore(tmp_path / "s.db", sweep.section.model_dump_json())
    outcome = run_sweep(sweep, store)
    (trial,) = outcome.trials
    assert outcome.ran == 1 and trial.status == "done" and outcome.pareto == [trial]
    assert trial.params["workload.parallelism.tp"] == 4
    assert trial.metrics["milp_gap"] == 0
    assert trial.metrics["milp_estimate_ns"] == pytest.approx(trial.metrics["total_time_ns"], rel=1e-4)
    assert any(note.startswith("program: ") for note in outcome.notes)
    assert run_sweep(sweep, store).ran == 0  # resumed: the trial is in the store
    assert len(read_results(tmp_path / "s.db").trials) == 1


@pytest.mark.parametrize(
    ("section", "where", "fragment"),
    [
        ({"space": {"workload.parallelism.tp": [4, 8]}}, "space", "one {generator: parallelism} entry"),
        ({"space": {"plan": ONE_PLAN, "system.splits": [1, 2]}}, "space", "one {generator: parallelism} entry"),
        ({"objectives": [{"metric": "tflops_per_npu", "goal": "max"}]}, "objectives", "optimises one objective"),
        (
            {"objectives": [{"metric": "total_time_ns"}, {"metric": "cost.perf_per_watt", "goal": "max"}]},
            "objectives",
            "total_time_ns min, iteration_time_ns min, cost.perf_per_dollar max, cost.perf_per_watt max",
        ),
    ],
)
def test_a_sweep_the_program_cannot_solve_names_the_key(section: dict[str, Any], where: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        milp_sweep(**section)
    assert [path for path, _ in raised.value.problems] == [where]
    assert fragment in raised.value.problems[0][1]
