"""The share of the operators' time each kind takes: runs times duration summed per kind, most first."""

from __future__ import annotations

from stratasim.report.operator_table import kind_rows, operator_lines
from stratasim.system_layer.result import OperatorStats


def _op(kind: str, count: int, duration_ps: int) -> OperatorStats:
    return OperatorStats((kind or "op",), kind, (1,), "bf16", 1, 1, count, duration_ps, 0.0, "compute")


ROWS = (_op("gemm", 3, 2_000_000), _op("attention", 1, 3_000_000), _op("gemm", 1, 1_000_000), _op("", 2, 500_000))


def test_each_kind_totals_its_runs_and_the_shares_add_up() -> None:
    # gemm 3 x 2 us + 1 x 1 us = 7 us, attention 3 us, an operator of no kind 2 x 0.5 us = 1 us: 11 us in all.
    assert kind_rows(ROWS) == [
        {"kind": "gemm", "total_ns": 7000.0, "share": 7 / 11},
        {"kind": "attention", "total_ns": 3000.0, "share": 3 / 11},
        {"kind": "other", "total_ns": 1000.0, "share": 1 / 11},
    ]


def test_the_text_table_ends_with_the_shares_by_kind() -> None:
    assert operator_lines(ROWS)[-1] == "  time by kind: gemm 63.6%, attention 27.3%, other 9.1%"


def test_no_operators_no_kinds() -> None:
    assert kind_rows(()) == [] and operator_lines(()) == []
