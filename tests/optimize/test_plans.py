"""The plan program: the same optimum as enumerating the plans (hypothesis), GPT-3 175B's plan space solved to a
proved optimum that is the sweep's simulated best or within 2 % of it (the simulated times are the fixture
gpt3_plans_simulated.csv, so no plan is simulated here but one), and one clear message for each bad input."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.config.study_file import load_study, parse_study
from stratasim.explore.optimize import optimize_study, plan_points, sweep_plan_space
from stratasim.explore.sweep_file import Sweep, load_sweep, parse_sweep
from stratasim.optimize.first_order import estimate_plans, plan_keys
from stratasim.optimize.milp import Milp, MilpSolution
from stratasim.optimize.plans import OptimizeError, choose_plan
from stratasim.optimize.result import OptimizeResult

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("gpt3_plans_simulated.csv")
FIGURE_8 = Path(__file__).with_name("gpt3_1t_splits_simulated.csv")
PLAN = ("tp", "pp", "dp", "schedule", "virtual_stages", "micro_batch", "recompute", "zero", "sequence_parallel")
GPT3_SPACE = {
    "generator": "parallelism",
    "tp": [1, 2, 4, 8],
    "max_pp": 32,
    "schedule": ["1f1b", "interleaved"],
    "virtual_stages": [2, 3, 4],
    "micro_batch": [1, 2],
    "recompute": ["selective", "full"],
    "zero": [0, 1],
    "sequence_parallel": [False],
}
"""The space of examples/explore/gpt3_plans.yaml."""
ONE_PLAN = {**GPT3_SPACE, "tp": [4], "pp": [8], "schedule": ["interleaved"], "virtual_stages": [4],
            "micro_batch": [1], "recompute": ["selective"], "zero": [1]}  # fmt: skip


def gpt3_sweep(space: dict[str, Any], **section: Any) -> Sweep:
    """A sweep over examples/gpt3_175b.yaml with ``space`` as its one generator entry."""
    data = {"base": "../gpt3_175b.yaml", "space": {"plan": space}, **section}
    return parse_sweep(data, "gpt3_sweep.yaml", ROOT / "examples" / "explore")


def simulated() -> dict[tuple[str, ...], int]:
    """The fixture's simulated iteration time (ps) of each plan, keyed by its plan keys as strings."""
    with FIXTURE.open(encoding="utf-8") as file:
        rows = csv.DictReader(line for line in file if not line.startswith("#"))
        return {tuple(row[name] for name in PLAN): int(row["total_time_ps"]) for row in rows}


def key(plan: dict[str, Any]) -> tuple[str, ...]:
    keys = plan_keys(plan)
    return tuple(str(keys[name]) for name in PLAN)


@pytest.fixture(scope="module")
def gpt3() -> OptimizeResult:
    return optimize_study(gpt3_sweep(GPT3_SPACE), simulate=False)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.1, 100.0, allow_nan=False), st.integers(1, 100)), min_size=1, max_size=12),
    st.integers(1, 100) | st.none(),
)
def test_the_program_equals_enumeration(plans: list[tuple[float, int]], capacity: int | None) -> None:
    """min over the plans whose memory <= capacity of their cost, or None when none fits."""
    costs, memory = [cost for cost, _ in plans], [bytes_ for _, bytes_ in plans]
    fitting = [cost for cost, bytes_ in plans if capacity is None or bytes_ <= capacity]
    choice = choose_plan(costs, memory, capacity, time_limit_s=10)
    if not fitting:
        assert choice is None
        return
    assert choice is not None and choice.status == "optimal"
    assert memory[choice.index] <= (capacity or math.inf)
    assert costs[choice.index] == pytest.approx(min(fitting), rel=1e-6)


def test_gpt3_175b_is_a_proved_optimum_within_2_percent_of_the_sweep(gpt3: OptimizeResult) -> None:
    """Over the 153 plans that fit (416 valid, 263 cut by the memory row) the program proves its optimum; the plan's
    simulated time is the fixture's best or within 2 % of it."""
    times = simulated()
    assert gpt3.status == "optimal" and gpt3.gap == 0
    assert gpt3.candidates == 416 and gpt3.details["unfit"] == 263 and len(times) == 153
    assert times[key(dict(gpt3.plan))] <= 1.02 * min(times.values())
    assert gpt3.estimate_ps == pytest.approx(times[key(dict(gpt3.plan))], rel=1e-4)
    assert sum(gpt3.estimate_terms.values()) == gpt3.estimate_ps


def test_megatron_sharding_is_the_inter_chip_optimum_for_each_tp(gpt3: OptimizeResult) -> None:
    """The inter-chip pass, roles fixed to TP and DP, picks column, row, column, row for TP 2, 4 and 8."""
    checks = [note for note in gpt3.notes if note.startswith("TP ")]
    assert [note.split(":")[0] for note in checks] == ["TP 2", "TP 4", "TP 8"]
    assert all("picks Megatron's sharding" in note and "4 all-reduces" in note for note in checks)


def test_the_chosen_plan_is_simulated_beside_its_estimate() -> None:
    """The plan's event simulation is the fixture's; the difference is explained from the terms."""
    result = optimize_study(gpt3_sweep(ONE_PLAN))
    assert result.simulated_ps == simulated()[key(dict(result.plan))]
    assert abs(result.to_json()["difference"]) < 1e-4
    assert any(note.startswith("estimate ") and "compute terms" in note for note in result.notes)


def test_perf_per_dollar_is_throughput_per_system_dollar() -> None:
    """With every plan on all NPUs the ordering is time's; the figures are the system's price and the estimate."""
    result = optimize_study(gpt3_sweep(ONE_PLAN), objective="perf_per_dollar", simulate=False)
    economics = result.economics
    assert economics is not None
    samples = 1536 / (result.estimate_ps / 1e12)
    assert economics["estimated_perf_per_dollar"] == pytest.approx(samples / economics["system_price_usd"])
    assert any("orders the plans as their time does" in note for note in result.notes)


def test_no_plan_fits_names_the_memory_row() -> None:
    with pytest.raises(OptimizeError, match=r"no plan fits: the memory row binds — the least memory any of the 1 "
                       r"plans needs is [\d.]+ GiB per NPU \(tp=4, pp=8.*over the capacity of 1 GiB"):  # fmt: skip
        optimize_study(gpt3_sweep({**ONE_PLAN, "memory": "1GiB"}), simulate=False)


def test_a_time_out_returns_the_best_plan_found_and_its_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solver's time-out path (as :class:`Milp` reports it): the incumbent, status time_limit, its gap."""

    def timed_out(self: Milp, time_limit_s: float = 60.0, gap: float = 1e-6, presolve: bool = True) -> MilpSolution:
        values = (1.0,) + (0.0,) * (self.variables - 1)
        return MilpSolution("time_limit", 1.0, 0.9, 0.1, values, time_limit_s)

    monkeypatch.setattr(Milp, "solve", timed_out)
    result = optimize_study(gpt3_sweep(ONE_PLAN), time_limit_s=0.01, simulate=False)
    assert (result.status, result.gap) == ("time_limit", 0.1)
    assert any(
        "stopped at its time limit: the best plan found, within 10.00% of the optimum" in n for n in result.notes
    )


def test_a_bad_time_limit_is_refused() -> None:
    with pytest.raises(OptimizeError, match="the time limit must be a positive number of seconds, not 0"):
        optimize_study(gpt3_sweep(ONE_PLAN), time_limit_s=0, simulate=False)


def test_an_unsupported_kind_says_what_optimize_handles() -> None:
    study = load_study(ROOT / "examples" / "quickstart.yaml")
    with pytest.raises(
        OptimizeError, match="optimize finds the best plan of a kind: transformer study .* not of kind: collective"
    ):
        optimize_study(study)


def test_gpt3_1t_fig8_the_choice_is_the_simulated_best_split() -> None:
    """DFModel's Fig. 8 (examples/explore/gpt3_1t_splits.yaml, 3072 A100s): of 56 splits 7 fit; the program's choice
    is the event simulation's best (gpt3_1t_splits_simulated.csv) or within 2 % of it, and every fitting split's
    estimate is its simulated time within 1e-4."""
    result = optimize_study(load_sweep(ROOT / "examples" / "explore" / "gpt3_1t_splits.yaml"), simulate=False)
    with FIGURE_8.open(encoding="utf-8") as file:
        rows = list(csv.DictReader(line for line in file if not line.startswith("#")))
    times = {tuple(int(row[name]) for name in ("tp", "pp", "dp", "zero")): int(row["total_time_ps"]) for row in rows}
    keys = plan_keys(dict(result.plan))
    chosen = times[(keys["tp"], keys["pp"], keys["dp"], keys["zero"])]
    assert result.status == "optimal" and result.candidates == 56 and result.details["unfit"] == 49 == 56 - len(times)
    assert chosen <= 1.02 * min(times.values())
    assert result.estimate_ps == pytest.approx(chosen, rel=1e-4)


def test_the_program_equals_enumerating_a_real_space() -> None:
    """On the Fig. 8 space, the program's plan is the fastest that fits by enumerating the same estimates."""
    sweep = load_sweep(ROOT / "examples" / "explore" / "gpt3_1t_splits.yaml")
    study = parse_study(sweep.base, sweep.base_source)
    listed = plan_points(study, sweep_plan_space(sweep))
    estimates = estimate_plans(study, listed.points)
    result = optimize_study(sweep, simulate=False)
    assert dict(result.plan) == estimates.plans[estimates.best(listed.capacity)]
