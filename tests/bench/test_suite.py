"""``stratasim bench --suite``: issue 12's cases as data, selected by name, timed next to their peers' figures.

The big cases are not run here (they take minutes); a fake measurement, an 8-NPU collective and ASTRA-sim's own 8-NPU
inputs stand in for them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import stratasim.bench
from stratasim.bench import peers
from stratasim.bench.collectives import BenchCase
from stratasim.bench.peers import AstraRun, import_case
from stratasim.bench.suite import (
    SUITE,
    StudyRun,
    SuiteCase,
    measure,
    path_of,
    peer_of,
    run_suite,
    select,
)
from stratasim.config.study_file import load_study, parse_study

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
