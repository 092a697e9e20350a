"""The HiGHS wrapper: optimal, infeasible and timed-out solves, silence and determinism."""

from __future__ import annotations

import random

import pytest

from stratasim.optimize.milp import Milp, SolverError


def _knapsack() -> tuple[Milp, list[int]]:
    """Maximise 5a + 4b + 3c (as minimising its negative) with 2a + 3b + c <= 5 over binaries: a and c, or a
    and b; a + b gives 9 at weight 5, the optimum."""
    milp = Milp()
    items = [milp.add_var(name, "binary", cost=-value) for name, value in (("a", 5), ("b", 4), ("c", 3))]
    milp.add_row(zip(items, (2.0, 3.0, 1.0)), upper=5.0)
    return milp, items


def _market_split(rows: int = 4, columns: int = 30) -> Milp:
    """Cornuejols and Dawande's market split: rows of random weights each to be halved by one choice of binaries,
    the slack minimised. Setting every binary to 0 is feasible at once, and proving the optimum takes branch and
    bound far longer than a fraction of a second."""
    rng = random.Random(1)
    milp = Milp()
    chosen = [milp.add_var(f"x{j}", "binary") for j in range(columns)]
    for i in range(rows):
        weights = [rng.randint(0, 99) for _ in range(columns)]
        over, under = milp.add_var(f"over{i}", cost=1.0), milp.add_var(f"under{i}", cost=1.0)
        half = sum(weights) // 2
        milp.add_row([*zip(chosen, map(float, weights)), (over, 1.0), (under, -1.0)], half, half)
    return milp


def test_optimal() -> None:
    milp, (a, b, c) = _knapsack()
    solution = milp.solve(10)
    assert solution.status == "optimal" and solution.objective == pytest.approx(-9) and solution.gap == 0
    assert [solution.chosen(v) for v in (a, b, c)] == [True, True, False]
    assert solution.value(a) == pytest.approx(1.0)


def test_infeasible() -> None:
    milp = Milp()
    x = milp.add_var("x", "binary")
    milp.add_row([(x, 1.0)], lower=2.0)
    solution = milp.solve(10)
    assert solution.status == "infeasible" and solution.values == ()


def test_a_time_out_returns_the_incumbent_and_its_gap() -> None:
    solution = _market_split().solve(time_limit_s=0.2)
    assert solution.status == "time_limit"
    assert solution.bound <= solution.objective and solution.gap > 0
    assert len(solution.values) == _market_split().variables


def test_a_time_out_without_a_solution_is_an_error() -> None:
    with pytest.raises(SolverError, match="no solution within its time limit of 0 s"):
        _market_split().solve(time_limit_s=0)


def test_rows_must_name_existing_variables() -> None:
    milp = Milp()
    with pytest.raises(ValueError, match="row names variable 3, but the program has 0"):
        milp.add_row([(3, 1.0)], upper=1.0)


def test_solves_print_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    _knapsack()[0].solve(10)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_solves_are_deterministic() -> None:
    first, second = _market_split(3, 16).solve(30), _market_split(3, 16).solve(30)
    assert first.values == second.values and first.objective == second.objective
