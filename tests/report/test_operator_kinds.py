"""The share of the operators' time each kind takes: runs times duration summed per kind, most first, with where
that time comes from (its basis, or each basis's share of it when the kind's operators come from several)."""

from __future__ import annotations

from stratasim.report.operator_table import kind_rows, operator_lines
from stratasim.system_layer.result import OperatorStats


def _op(kind: str, count: int, duration_ps: int, basis: str = "fitted_to_runs") -> OperatorStats:
    return OperatorStats((kind or "op",), kind, (1,), "bf16", 1, 1, count, duration_ps, 0.0, "compute", basis=basis)


ROWS = (
    _op("gemm", 3, 2_000_000, "measured"),
    _op("attention", 1, 3_000_000),
    _op("gemm", 1, 1_000_000, "datasheet"),
    _op("", 2, 500_000),
)


def test_each_kind_totals_its_runs_and_the_shares_add_up() -> None:
    # gemm 3 x 2 us + 1 x 1 us = 7 us, attention 3 us, an operator of no kind 2 x 0.5 us = 1 us: 11 us in all.
    # gemm's 7 us: 6 us measured, 1 us on datasheet figures.
    assert kind_rows(ROWS) == [
        {
            "kind": "gemm",
            "total_ns": 7000.0,
            "share": 7 / 11,
            "basis": "mixed",
            "bases": {"measured": 6 / 7, "datasheet": 1 / 7},
        },
        {
            "kind": "attention",
            "total_ns": 3000.0,
            "share": 3 / 11,
            "basis": "fitted_to_runs",
            "bases": {"fitted_to_runs": 1.0},
        },
        {
            "kind": "other",
            "total_ns": 1000.0,
            "share": 1 / 11,
            "basis": "fitted_to_runs",
            "bases": {"fitted_to_runs": 1.0},
        },
    ]


def test_the_text_table_ends_with_the_shares_and_bases_by_kind() -> None:
    assert operator_lines(ROWS)[-1] == (
        "  time by kind: gemm 63.6% (measured 85.7%, datasheet 14.3%), attention 27.3% (fitted to runs), "
        "other 9.1% (fitted to runs)"
    )


def test_a_backend_that_does_not_say_gives_an_unknown_basis() -> None:
    (row,) = kind_rows((OperatorStats(("op",), "gemm", (1,), "bf16", 1, 1, 1, 1000, 0.0, "compute"),))
    assert (row["basis"], row["bases"]) == ("unknown", {"unknown": 1.0})


def test_no_operators_no_kinds() -> None:
    assert kind_rows(()) == [] and operator_lines(()) == []
