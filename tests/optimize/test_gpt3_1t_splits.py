"""DFModel's Fig. 8 (GPT-3 1T on 3072 A100s, the TP x PP x DP split swept; docs/validation/gpt3-1t-splits.md): the
first-order model's choice over the whole split space is the event simulation's best split, or within 2 % of it,
read from the measured fixture gpt3_1t_splits_simulated.csv (no simulation); one split simulated for real checks
that the fixture is still what the engine gives. (The plan program's choice on the same space is tested in
test_plans.py against the same fixture.)"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from stratasim.config.study_file import parse_study
from stratasim.explore.optimize import plan_points, sweep_plan_space
from stratasim.explore.sweep_file import load_sweep
from stratasim.optimize.first_order import estimate_plans, plan_keys
from stratasim.study.run import run_study

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "examples" / "explore" / "gpt3_1t_splits.yaml"
FIXTURE = Path(__file__).with_name("gpt3_1t_splits_simulated.csv")
SPLIT = ("tp", "pp", "dp", "zero")


def fixture() -> dict[tuple[int, ...], dict[str, str]]:
    """The fixture's rows keyed by their split (tp, pp, dp, zero)."""
    with FIXTURE.open(encoding="utf-8") as file:
        rows = csv.DictReader(line for line in file if not line.startswith("#"))
        return {tuple(int(row[name]) for name in SPLIT): row for row in rows}


def test_the_first_order_choice_is_the_simulated_best_split_or_within_2_percent() -> None:
    """Of the 56 valid splits the first-order model keeps the 7 that fit in 80 GiB, which are the fixture's; its
    fastest is within 2 % of the fixture's best, and each estimate is its simulated time within 1e-4."""
    sweep = load_sweep(SWEEP)
    study = parse_study(sweep.base, sweep.base_source)
    listed = plan_points(study, sweep_plan_space(sweep))
    estimates = estimate_plans(study, listed.points)
    simulated = {split: int(row["total_time_ps"]) for split, row in fixture().items()}
    fits = {
        tuple(plan_keys(plan)[name] for name in SPLIT): int(time)
        for plan, time, memory in zip(estimates.plans, estimates.iteration_ps, estimates.memory_bytes, strict=True)
        if memory <= listed.capacity
    }
    assert len(listed.points) == 56 and fits.keys() == simulated.keys()
    chosen = tuple(plan_keys(estimates.plans[estimates.best(listed.capacity)])[name] for name in SPLIT)
    assert simulated[chosen] <= 1.02 * min(simulated.values())
    for split, time in simulated.items():
        assert fits[split] == pytest.approx(time, rel=1e-4), split


def test_the_fixture_is_current() -> None:
    """TP 8, PP 16, DP 24, ZeRO 1 (the best split, 16 NPUs simulated, some 5 s) simulated now gives the fixture's
    row to the picosecond, and its breakdown: compute and exposed TP, PP and DP communication of the critical NPU."""
    row = fixture()[(8, 16, 24, 1)]
    sweep = load_sweep(SWEEP)
    base = json.loads(json.dumps(sweep.base))
    base["workload"]["parallelism"].update(pp=16, dp=24, zero=1)
    report = json.loads(run_study(parse_study(base, sweep.base_source)).to_json())
    npu = next(stats for stats in report["per_npu"] if stats["npu"] == report["critical_npu"])
    exposed = npu["exposed_comm_ns_by_kind"]
    assert report["total_time_ps"] == int(row["total_time_ps"])
    assert round(npu["compute_ns"]) == int(row["compute_ns"])
    assert [round(exposed[kind]) for kind in ("tp", "pp", "dp")] == [
        int(row[f"exposed_{kind}_ns"]) for kind in ("tp", "pp", "dp")
    ]
    assert round(report["pipeline_bubble_fraction"], 6) == float(row["bubble_fraction"])
