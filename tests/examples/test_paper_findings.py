"""The ASTRA-sim paper's qualitative findings, as ``examples/paper/astra_findings.py`` reproduces them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "paper" / "astra_findings.py"


@pytest.fixture(scope="module")
def findings() -> ModuleType:
    spec = importlib.util.spec_from_file_location("astra_findings", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fig10_two_and_three_dimensions_beat_one_and_4x4x4_wins_small(findings: ModuleType) -> None:
    table = findings.fig10(("64KiB", "1MiB", "4MiB", "64MiB"))
    one_d, two_d, hybrid, three_d = (1, 64, 1), (1, 8, 8), (2, 8, 4), (4, 4, 4)
    for size in ("64KiB", "1MiB", "4MiB"):
        row = table[size]
        assert row[two_d] < row[one_d]  # fewer hops beat more data per node
        assert row[three_d] < row[hybrid]  # 4x4x4 shortens the worst ring of 2x8x4
        assert row[three_d] < row[two_d]  # ... and beats 1x8x8 for small messages
    assert table["1MiB"][hybrid] > table["1MiB"][two_d]  # 2x8x4 sends more data for the same worst ring
    assert table["64MiB"][two_d] < table["64MiB"][three_d]  # large messages: less data per node wins


def test_fig11_enhanced_order_exploits_the_fast_local_dimension(findings: ModuleType) -> None:
    table = findings.fig11(("1MiB", "16MiB"))
    for row in table.values():
        assert row["asymmetric enhanced"] < row["asymmetric baseline"] < row["symmetric baseline"]
        assert row["symmetric enhanced"] < row["symmetric baseline"]
    big = table["16MiB"]
    assert big["asymmetric baseline"] / big["asymmetric enhanced"] > 3


def test_fig9_alltoall_wins_all_to_all_and_the_torus_wins_large_all_reduces(findings: ModuleType) -> None:
    table = findings.fig9(("64KiB", "1MiB", "16MiB", "64MiB"))
    for row in table.values():
        assert row["all_to_all alltoall"] < row["all_to_all torus"]  # the alltoall topology always wins A2A
    small, large = table["64KiB"], table["64MiB"]
    # ... by less and less, relatively, as messages grow
    assert (
        large["all_to_all torus"] / large["all_to_all alltoall"]
        < small["all_to_all torus"] / small["all_to_all alltoall"]
    )
    assert small["all_reduce alltoall"] < small["all_reduce torus"]  # small all-reduces: fewer steps win
    assert large["all_reduce torus"] < large["all_reduce alltoall"]  # large ones: all 8 links, no queueing
    assert table["16MiB"]["all_reduce torus"] < table["16MiB"]["all_reduce alltoall"]
