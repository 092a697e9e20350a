"""The first-order model's choice among the 153 plans of examples/explore/gpt3_plans.yaml (GPT-3 175B on 1024
A100s) against the event simulation of each, stored in gpt3_plans_simulated.csv (how it was made: its header).

Measured when written: Kendall's tau 1.0, median relative error 2.7e-6, largest 8.0e-6, the same best plan.
The bounds below leave a margin for small changes of the engine's semantics; the sweep itself is not rerun.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stratasim.config.study_file import load_study
from stratasim.optimize import MEMORY_TERMS, TERMS, FirstOrderModel, PlanEstimates
from stratasim.workload_layer.transformer.workload import TransformerWorkload

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("gpt3_plans_simulated.csv")
KEYS = ("tp", "pp", "dp", "schedule", "virtual_stages", "micro_batch", "recompute", "zero", "sequence_parallel")


def _rows() -> list[dict[str, str]]:
    with FIXTURE.open() as stream:
        return list(csv.DictReader(line for line in stream if not line.startswith("#")))


def _plan(row: dict[str, str]) -> dict[str, Any]:
    plan: dict[str, Any] = {key: row[key] for key in ("schedule", "recompute")}
    plan |= {key: int(row[key]) for key in ("tp", "pp", "dp", "virtual_stages", "micro_batch", "zero")}
    plan["sequence_parallel"] = row["sequence_parallel"] == "True"
    return {f"workload.parallelism.{key}": plan[key] for key in KEYS}


def _kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-a of two rankings: concordant minus discordant pairs over all pairs."""
    signs = np.sign(a[:, None] - a[None, :]) * np.sign(b[:, None] - b[None, :])
    return float(signs.sum() / (len(a) * (len(a) - 1)))


@pytest.fixture(scope="module")
def measured() -> Iterator[tuple[list[dict[str, Any]], np.ndarray, PlanEstimates, FirstOrderModel]]:
    rows = _rows()
    plans = [_plan(row) for row in rows]
    simulated = np.array([int(row["total_time_ps"]) for row in rows], dtype=np.int64)
    model = FirstOrderModel(load_study(ROOT / "examples" / "gpt3_175b.yaml"))
    try:
        yield plans, simulated, model.estimate(plans), model
    finally:
        model.close()


def test_the_models_best_plan_is_the_simulations_best_within_two_percent(measured: Any) -> None:
    plans, simulated, estimates, _ = measured
    assert len(plans) == 153
    chosen = estimates.best()
    assert simulated[chosen] <= 1.02 * simulated.min()


def test_the_model_ranks_and_times_the_plans_as_the_simulation_does(measured: Any) -> None:
    _, simulated, estimates, _ = measured
    error = np.abs(estimates.iteration_ps - simulated) / simulated
    assert _kendall_tau(estimates.iteration_ps, simulated) >= 0.98
    assert np.median(error) <= 1e-4
    assert error.max() <= 1e-3


def test_terms_sum_to_the_iteration_and_memory_terms_to_the_peak(measured: Any) -> None:
    _, _, estimates, _ = measured
    assert set(estimates.terms) == set(TERMS) and set(estimates.memory_terms) == set(MEMORY_TERMS)
    assert (sum(estimates.terms.values()) == estimates.iteration_ps).all()
    assert (sum(estimates.memory_terms.values()) == estimates.memory_bytes).all()
    assert all((estimates.terms[term] >= 0).all() for term in TERMS)


def test_memory_is_the_builders_peak_over_every_stage(measured: Any) -> None:
    plans, _, estimates, model = measured
    for index in range(0, len(plans), 10):
        config = model.config(plans[index])
        workload = TransformerWorkload(config)
        peak = max(workload.stage_memory(stage).total_bytes for stage in range(config.parallelism.pp))
        assert estimates.memory_bytes[index] == peak
