"""The profile grid is the reference profiles' grid: every measured shape is in it, in the same order, and it holds
nothing the reference did not measure but the optional eager launch at its end; the runner turns timings into the
reference CSV, which reads back."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from stratasim.compute_layer.measured.grid import L2_SIZES, Case, grid, reference_grid
from stratasim.compute_layer.measured.parameters import profile_path
from stratasim.compute_layer.measured.profile_rows import LAUNCH_EAGER, ProfileRow, read_profile
from stratasim.compute_layer.measured.runner import COLUMNS, CaseTimer, measure, write_rows

DEVICES = ("h100", "h200")


def _reference_grid() -> list[Case]:
    """The grid without what it measures beyond the reference profiles: element-wise kinds at two sizes between
    L2 and HBM, and the eager launch."""
    cases = grid()
    assert cases[: len(reference_grid())] == reference_grid() and cases[-1] == Case(LAUNCH_EAGER, {})
    beyond = cases[len(reference_grid()) : -1]
    assert {case.shape["elements"] for case in beyond} == set(L2_SIZES) and len(beyond) == 2 * 7
    return reference_grid()


def _key(kind: str, shape: object) -> tuple[str, tuple[tuple[str, int | str], ...]]:
    assert isinstance(shape, dict)
    return kind, tuple(sorted(shape.items()))


@pytest.mark.parametrize("device", DEVICES)
def test_the_grid_is_the_reference_profiles_shapes_in_their_order(device: str) -> None:
    reference = [_key(row.kind, row.shape) for row in read_profile(profile_path(device))]
    measured = [_key(case.kind, dict(case.shape)) for case in _reference_grid()]
    assert set(reference) == set(measured)
    assert measured == reference
    assert len(set(measured)) == len(measured)


def _replaying(rows: list[ProfileRow]) -> tuple[list[Case], CaseTimer]:
    """A fake timer answering each case with the reference row of the same shape, and the cases it saw."""
    times = {_key(row.kind, row.shape): row.us for row in rows}
    seen: list[Case] = []

    def timer(case: Case) -> float:
        seen.append(case)
        return times[_key(case.kind, dict(case.shape))]

    return seen, timer


def test_the_runner_writes_the_reference_csv_with_a_fake_timer(tmp_path: Path) -> None:
    reference = read_profile(profile_path("h100"))
    seen, timer = _replaying(reference)
    heard: list[int] = []
    rows = measure(_reference_grid(), timer, heard.append)
    assert seen == _reference_grid() and heard == list(range(len(reference)))
    written = write_rows(rows, tmp_path / "gpu.csv")
    assert [(row.kind, row.us, row.shape) for row in read_profile(written)] == [
        (row.kind, row.us, row.shape) for row in reference
    ]
    with open(written, newline="") as ours, open(profile_path("h100"), newline="") as theirs:
        mine, shipped = list(csv.DictReader(ours)), list(csv.DictReader(theirs))
    assert tuple(mine[0]) == COLUMNS == tuple(shipped[0])
    for row, expected in zip(mine, shipped):  # every cell as shipped; tflops from the rounded time, so to 0.1 %
        assert {k: v for k, v in row.items() if k != "tflops"} == {k: v for k, v in expected.items() if k != "tflops"}
        if expected["tflops"]:
            assert float(row["tflops"]) == pytest.approx(float(expected["tflops"]), rel=1e-3, abs=0.01)
