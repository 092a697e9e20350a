"""``stratasim bench`` runs each case in a child process and prints one table row per case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratasim import cli
from stratasim.bench.collectives import BenchCase, format_table, shape_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("npus", "dims", "shape"),
    [(8, 1, (8,)), (8, 2, (4, 2)), (8, 3, (2, 2, 2)), (64, 3, (4, 4, 4)), (1024, 3, (16, 8, 8)), (4096, 2, (64, 64))],
)
def test_shapes_split_npus_into_near_equal_powers_of_two(npus: int, dims: int, shape: tuple[int, ...]) -> None:
    assert shape_of(npus, dims) == shape


def test_npu_counts_must_be_powers_of_two() -> None:
    with pytest.raises(ValueError, match="powers of two"):
        shape_of(12, 1)


def test_bench_prints_a_row_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bench", "--npus", "8", "--dims", "1,2", "--modes", "in-process,remote", "--size", "1MiB"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].split()[:5] == ["NPUs", "shape", "mode", "agg", "simulated"]
    rows = out[2:]
    assert [row.split()[:4] for row in rows] == [
        ["8", "8", "in-process", "on"],
        ["8", "8", "remote", "on"],
        ["8", "4x2", "in-process", "on"],
        ["8", "4x2", "remote", "on"],
    ]
    # The same study gives the same simulated time in-process and remote.
    assert rows[0].split()[4:6] == rows[1].split()[4:6]


def test_list_options_take_spaces_or_commas(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 14's defect: ``--npus 8 16`` was refused (it wanted ``8,16``); both forms, and a mix, now work."""
    code = cli.main(["bench", "--npus", "8", "16,32", "--dims", "1", "--modes", "in-process", "--size", "1MiB"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert code == 0 and [row.split()[:2] for row in rows] == [["8", "8"], ["16", "16"], ["32", "32"]]
    assert cli.main(["bench", "--npus", "8", "x"]) == 2
    assert "expected whole numbers such as 8,64 or 8 64, got 'x'" in capsys.readouterr().err


def test_bench_can_simulate_every_npu(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["bench", "--npus", "8", "--dims", "2", "--modes", "in-process", "--size", "1MiB", "--no-aggregate"]
    )
    row = capsys.readouterr().out.splitlines()[2].split()
    assert code == 0 and row[:4] == ["8", "4x2", "in-process", "off"]


def test_a_failed_case_is_reported_in_its_row() -> None:
    case = BenchCase("all_reduce", 1, (8,), remote=False)
    table = format_table([(case, {"error": "timeout after 1 s"})])
    assert table.splitlines()[-1].split()[-4:] == ["timeout", "after", "1", "s"]


def test_bench_can_use_another_network_and_topology_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "bench",
            "--npus",
            "8",
            "--dims",
            "1",
            "--modes",
            "in-process",
            "--size",
            "1MiB",
            "--backend",
            "congestion_aware",
            "--kind",
            "switch",
            "--algorithm",
            "direct",
            "--collective",
            "all_to_all",
        ]
    )
    row = capsys.readouterr().out.splitlines()[2].split()
    assert code == 0 and row[:4] == ["8", "8", "in-process", "on"]
    # Direct all-to-all through a switch: each down-link carries 7 shares of 1 MiB/8 one after another.
    assert row[4:6] == ["19.3501", "us"]


def test_bench_times_study_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\n")
    assert cli.main(["bench", "--study", str(EXAMPLES / "transformer.yaml"), str(broken), "--json"]) == 0
    good, bad = json.loads(capsys.readouterr().out)
    assert good["npus"] == 32 and good["simulated_npus"] == 2 and good["total_time_ps"] > 0
    assert good["wall_seconds"] >= good["simulation_seconds"] > 0 and good["peak_bytes"] > 0
    assert "problem" in bad["error"]


def test_bench_study_repeated_times_every_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\n")
    assert cli.main(["bench", "--study", str(EXAMPLES / "transformer.yaml"), "--study", str(broken), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2  # the second --study adds to the first, not replaces it
