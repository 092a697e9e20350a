"""``stratasim bench --suite``: issue 12's cases as data, selected by name, timed next to their peers' figures.

The big cases are not run here (they take minutes); a fake measurement, an 8-NPU collective and ASTRA-sim's own 8-NPU
inputs stand in for them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import stratasim.bench
from stratasim import cli
from stratasim.bench import peers
from stratasim.bench.collectives import BenchCase, run_child
from stratasim.bench.peers import AstraRun, import_case
from stratasim.bench.suite import (
    SUITE,
    Peer,
    StudyRun,
    SuiteCase,
    Target,
    format_suite_table,
    measure,
    path_of,
    peer_of,
    run_suite,
    select,
)
from stratasim.bench.sweep_runs import SweepRun
from stratasim.config.study_file import load_study, parse_study
from stratasim.explore import load_sweep
from stratasim.kernel.errors import StrataSimError

ROOT = Path(__file__).resolve().parents[2]
TINY = BenchCase("all_reduce", 1 << 20, (8,), remote=False, aggregate=False)


def _fake(figures: dict[str, dict[str, Any]]) -> Any:
    """A measurement that returns canned figures by case name instead of running a child process."""
    return lambda case, timeout_s, memory_bytes: figures[case.name]


def _figures(wall_s: float, peak_mb: float) -> dict[str, Any]:
    return {"wall_seconds": wall_s, "peak_bytes": int(peak_mb * 1e6), "total_time_ps": 37_588_000_000}


def test_every_study_file_of_the_suite_exists_and_validates() -> None:
    for case in SUITE:
        if isinstance(case.run, StudyRun):
            assert path_of(case.run).is_file(), case.name
            load_study(path_of(case.run), case.run.overrides)
        elif isinstance(case.run, SweepRun):
            load_sweep(ROOT / case.run.path)
        elif isinstance(case.run, BenchCase):
            parse_study(case.run.study(), case.name)


def test_every_astra_sim_row_runs_astra_sims_inputs_next_to_its_figures_on_them() -> None:
    astra = [case for case in SUITE if isinstance(case.run, AstraRun)]
    assert [case.name for case in astra] == [case.name for case in SUITE if "ASTRA-sim" in (_peer_name(case) or "")]
    assert len(astra) == 7
    for case in astra:
        assert isinstance(case.run, AstraRun)
        files = {path.name for path in case.run.folder.iterdir()}
        assert files == {"network.yml", "system.json", "remote_memory.json", "case.json", "peer.json"}, case.name
        peer = peer_of(case)
        assert peer is not None and peer.simulated_ps and peer.wall_s > 0, case.name
        assert case.run.case in peer.source and "AstraSim_Analytical" in peer.source


def _peer_name(case: SuiteCase) -> str | None:
    peer = peer_of(case)
    return None if peer is None else peer.name


def test_the_suite_runs_from_the_package_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file a row runs is the package's own (package data), so nothing of a checkout is needed: from a folder
    outside the repository a study row still finds its file."""
    package = Path(stratasim.bench.__file__).resolve().parent
    for case in SUITE:
        if isinstance(case.run, StudyRun):
            assert path_of(case.run).is_relative_to(package) and path_of(case.run).is_file(), case.name
        elif isinstance(case.run, AstraRun):
            assert case.run.folder.is_relative_to(package) and case.run.folder.is_dir(), case.name
    monkeypatch.chdir(tmp_path)
    (row,) = run_suite(select(SUITE, ["transformer"]), 300, 8 << 30, lambda line: None)
    assert "error" not in row and row["total_time_ps"] > 0


def test_the_shipped_inputs_are_the_repositorys() -> None:
    from tools.sync_bench_data import DATA, ROOT, originals

    shipped = sorted(str(path.relative_to(DATA)) for path in DATA.rglob("*") if path.is_file())
    assert shipped == originals(), "python tools/sync_bench_data.py"
    stale = [path for path in shipped if (DATA / path).read_bytes() != (ROOT / path).read_bytes()]
    assert not stale, f"{stale} differ from the originals: python tools/sync_bench_data.py"


def _ring_8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binary: str) -> AstraRun:
    """ASTRA-sim's 8-NPU ring (its Ring_8npus.yml, Ring_4chunks.json, a 1 MiB all-reduce microbenchmark) as a peer
    case run by ``binary``, with the 64440 cycles ASTRA-sim reported for it."""
    reference = Path(__file__).resolve().parents[2] / "tests" / "data" / "astra-sim-inputs"
    folder = tmp_path / peers.ASTRA_CASES / "ring-8"
    folder.mkdir(parents=True)
    shutil.copyfile(reference / "network" / "Ring_8npus.yml", folder / "network.yml")
    shutil.copyfile(reference / "system" / "Ring_4chunks.json", folder / "system.json")
    workload = {"collective": "all_reduce", "comm_size": 1 << 20, "npus": 8}
    (folder / "case.json").write_text(json.dumps({"binary": binary, "workload": workload}))
    measured = {"simulated_ns": 64440, "wall_s": 0.01, "machine": "m", "date": "d", "load": "quiet"}
    (folder / "peer.json").write_text(json.dumps(measured))
    monkeypatch.setattr(peers, "DATA", tmp_path)
    return AstraRun("ring-8")


def test_an_astra_sim_case_runs_its_inputs_to_astra_sims_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row replays the traces written at bench time and lands on ASTRA-sim's 64440 cycles."""
    binary = "AstraSim_Analytical_Congestion_Unaware"
    run = _ring_8(tmp_path, monkeypatch, binary)
    (row,) = run_suite([SuiteCase("ring-8", run)], 120, 8 << 30, lambda line: None)
    assert row["total_time_ps"] == row["peer_simulated_ps"] == 64_440_000 and "mismatch" not in row
    assert row["peer"] == "ASTRA-sim" and row["peer_source"].startswith(binary)
    study = import_case(run, tmp_path / "out")
    assert len(list((tmp_path / "out").glob("all_reduce.*.et"))) == 8 and "kind: chakra" in study.read_text()


def test_a_case_naming_no_astra_sim_binary_fails_its_row_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _ring_8(tmp_path, monkeypatch, "AstraSim_Garnet")
    error = measure(SuiteCase("ring-8", run), 60, 8 << 30)["error"]
    assert error.endswith(
        "case.json: binary: expected one of AstraSim_Analytical_Congestion_Unaware, "
        "AstraSim_Analytical_Congestion_Aware"
    )


def test_the_suite_holds_every_row_of_the_issue_and_baselines_come_first() -> None:
    names = [case.name for case in SUITE]
    # issue 12's 13 rows, plain transformer, the 1T row, serving (2), the in-process ring the spawned one is set
    # against, issue 32's screening rung
    assert len(names) == len(set(names)) == 19
    for index, case in enumerate(SUITE):
        assert (case.peer is None) or (case.baseline is None), case.name
        if case.baseline is not None:
            assert case.baseline in names[:index], case.name
    every_npu = [case for case in SUITE if isinstance(case.run, BenchCase)]
    assert all(not case.run.aggregate for case in every_npu if isinstance(case.run, BenchCase))


def test_selection_keeps_suite_order_and_adds_the_baselines_compared_with() -> None:
    chosen = select(SUITE, ["transformer-spawned", "ring-allreduce-4096"])
    assert [case.name for case in chosen] == ["ring-allreduce-4096", "transformer", "transformer-spawned"]
    assert select(SUITE, []) == list(SUITE)


def test_an_unknown_name_is_one_error_listing_the_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--suite", "--only", "gpt3-175b", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --only: unknown case(s) nope; expected some of gpt3-175b, megatron-76b")
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "gpt3-175b"], "--only selects cases of --suite"),
        (["--suite", "--study", "x.yaml"], "--suite and --study are separate"),
        (["--suite", "--memory-limit", "lots"], "--memory-limit: expected a size such as 8GiB"),
    ],
)
def test_bad_options_are_one_clear_error(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", *argv]) == 2
    assert message in capsys.readouterr().err


def _fake_suite() -> tuple[list[str], list[dict[str, Any]]]:
    """Six cases measured by :func:`_fake`: met, not met, against a baseline case, failed, against the failed case,
    and without a peer; the progress lines and the rows."""
    cases = [
        SuiteCase("fast", TINY, Peer("ASTRA-sim", 4.0, 100), target=Target(ratio=0.5, peak_mb=100)),
        SuiteCase("slow", TINY, Peer("PALM", 1.0), target=Target(wall_s=2.8)),
        SuiteCase("spawned", TINY, baseline="fast", target=Target(ratio=1.5)),
        SuiteCase("broken", TINY, Peer("ASTRA-sim", 1.0), target=Target(ratio=0.5)),
        SuiteCase("after-broken", TINY, baseline="broken", target=Target(ratio=2)),
        SuiteCase("plain", TINY),
    ]
    figures = {
        "fast": _figures(1.0, 60),
        "slow": _figures(3.0, 50),
        "spawned": _figures(2.0, 70),
        "broken": {"error": "out of memory (limit 8 GiB)", "process_seconds": 41.6},
        "after-broken": _figures(1.0, 10),
        "plain": _figures(0.5, 40),
    }
    lines: list[str] = []
    rows = run_suite(cases, 600, 8 << 30, lines.append, _fake(figures))
    return lines, rows


def test_rows_show_the_peer_the_ratio_and_whether_the_target_is_met() -> None:
    lines, rows = _fake_suite()
    assert (
        lines[0] == "[1/6] fast: 1.00 s, 60 MB"
        and lines[3] == "[4/6] broken: failed: out of memory (limit 8 GiB) (after 42 s)"
    )
    assert [(row["ratio"], row["met"]) for row in rows] == [
        (0.25, True),
        (3.0, False),
        (2.0, False),
        (None, None),
        (None, None),
        (None, None),
    ]
    table = format_suite_table(rows).splitlines()
    assert table[3].split()[-6:] == ["3.00x", "≤", "2.8", "s", "not", "met"]
    assert table[4].split()[6:10] == ["fast", "1.00", "60", "2.00x"]
    assert (
        table[5]
        == "broken                       failed: out of memory (limit 8 GiB) (after 42 s)  (peer: ASTRA-sim 1.00 —)"
    )
    assert table[6].split()[-7:] == ["broken", "—", "—", "—", "≤", "2x", "unknown"]
    assert table[7].split()[-5:] == ["—", "—", "—", "—", "—"]


def test_the_table_names_its_columns_and_gives_a_met_row_in_full() -> None:
    table = format_suite_table(_fake_suite()[1]).splitlines()
    assert table[0].split() == [
        "case",
        "simulated",
        "wall",
        "s",
        "proc",
        "s",
        "peak",
        "MB",
        "peer",
        "peer",
        "s",
        "peer",
        "MB",
        "ratio",
        "target",
        "met",
    ]
    assert table[2].split() == [
        "fast",
        "37.588",
        "ms",
        "1.00",
        "—",
        "60",
        "ASTRA-sim",
        "4.00",
        "100",
        "0.25x",
        "≤",
        "0.5x,",
        "≤",
        "100",
        "MB",
        "met",
    ]


def test_a_tiny_case_runs_in_a_child_process_and_lands_in_the_table() -> None:
    case = SuiteCase("tiny", TINY, Peer("ASTRA-sim", 100.0), target=Target(ratio=0.5))
    rows = run_suite([case], 60, 8 << 30, lambda line: None)
    assert rows[0]["total_time_ps"] == 43_700_160 and rows[0]["met"] is True
    assert rows[0]["process_s"] > rows[0]["wall_s"] > 0
    assert format_suite_table(rows).splitlines()[2].split()[:3] == ["tiny", "43.7002", "us"]


def test_a_missing_study_file_fails_its_row_only() -> None:
    case = SuiteCase("gone", StudyRun("examples/no_such_study.yaml"))
    assert measure(case, 60, 8 << 30) == {
        "error": "examples/no_such_study.yaml not shipped with the package (python tools/sync_bench_data.py)"
    }
    assert measure(SuiteCase("gone", AstraRun("no-such-case")), 60, 8 << 30) == {
        "error": "benchmarks/peers/astra-sim/no-such-case not shipped (python tools/sync_bench_data.py)"
    }


def test_a_child_over_its_memory_limit_or_its_time_fails_alone() -> None:
    # ``python -m timeit STATEMENT`` stands for a case: one allocating 2 GiB, one sleeping (the sleep is the child's
    # workload, the thing its time limit must kill, not a wait of the test's).
    over = run_child("timeit", "bytearray(1 << 31)", 60, 512 << 20)
    assert over["error"] == "out of memory (limit 512 MiB)" and over.keys() == {"error", "process_seconds"}
    slow = run_child("timeit", "import time; time.sleep(30)", 0.5)
    assert slow["error"] == "timeout after 0.5 s" and 0.5 <= slow["process_seconds"] < 30


def test_spawned_cases_spawn_network_and_compute() -> None:
    spawned = {case.name: case for case in SUITE}["ring-allreduce-1024-spawned"].run
    assert isinstance(spawned, BenchCase)
    study = spawned.study()
    assert study["network"]["spawn"] and study["compute"]["spawn"]
    in_process = {c.name: c for c in SUITE}["ring-allreduce-1024-in-process"].run
    assert replace(spawned, remote=False, spawn_compute=False) == in_process


def test_a_broken_workload_or_peer_file_is_one_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _ring_8(tmp_path, monkeypatch, "AstraSim_Analytical_Congestion_Unaware")
    case_json = run.folder / "case.json"
    case_json.write_text(json.dumps({"binary": "AstraSim_Analytical_Congestion_Unaware", "workload": {"npus": 8}}))
    error = measure(SuiteCase("ring-8", run), 60, 8 << 30)["error"]
    assert error.startswith(f"{case_json}: workload: expected collective (one of all_reduce, all_gather")
    (run.folder / "peer.json").write_text(json.dumps({"wall_s": 1.0}))
    with pytest.raises(StrataSimError, match=r"peer\.json: simulated_ns, machine, date, load: required"):
        peer_of(SuiteCase("ring-8", run))
