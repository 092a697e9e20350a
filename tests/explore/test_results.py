"""Reading a results store back: counts, best trials, Pareto front, per-parameter summary, CSV, JSON, charts, and
one clear error for every store that cannot be read."""

from __future__ import annotations

import csv
import functools
import json
import sqlite3
import statistics
import struct
import sys
from pathlib import Path

import pytest

from stratasim import explore
from stratasim.cli import main
from stratasim.explore import ResultStore, load_sweep, read_results, run_sweep
from stratasim.explore import results as results_module
from stratasim.explore.store import TrialRecord, read_store
from stratasim.kernel.errors import ConfigError, StrataSimError

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"

# Six quickstart trials: halving-doubling on rings of 6 fails; 7.35e7 ns keeps ring on 6 and both direct ones.
TWO_OBJECTIVES = f"""
base: {QUICKSTART}
space:
  system.algorithm: [halving_doubling, ring, direct]
  network.topology.0.size: [6, 8]
objectives: [{{metric: total_time_ns, goal: min}}, {{metric: events_processed, goal: min}}]
constraints: [{{metric: total_time_ns, max: 7.35e7}}]
"""

# Ten random trials over a bandwidth range: too many values to list, so the summary bins them.
RANGE = f"""
base: {QUICKSTART}
space:
  system.splits: [1, 4]
  network.topology.0.bandwidth: {{low: 25GB/s, high: 400GB/s}}
objectives: [{{metric: total_time_ns, goal: min}}]
search: {{method: random, trials: 10, seed: 2}}
"""


def _store(folder: Path, body: str) -> Path:
    (folder / "sweep.yaml").write_text(body, encoding="utf-8")
    sweep = load_sweep(folder / "sweep.yaml")
    store = ResultStore(folder / "sweep.db", sweep.section.model_dump_json())
    try:
        run_sweep(sweep, store)
    finally:
        store.close()
    return folder / "sweep.db"


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("two"), TWO_OBJECTIVES)


@pytest.fixture(scope="module")
def ranged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("range"), RANGE)


def _trials(db: Path) -> list[TrialRecord]:
    return read_store(db)[1]


def _time(record: TrialRecord) -> float:
    return record.metrics["total_time_ns"]


def test_the_counts_best_trial_and_front_are_printed(two: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trials = _trials(two)
    feasible = [r for r in trials if r.status == "done" and _time(r) <= 7.35e7]
    assert [r.status for r in trials].count("failed") == 1 and len(feasible) == 3  # the sweep is as described
    assert main(["results", str(two), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{two}: 6 trials: 5 done (2 outside the constraints), 1 failed"
    best = min(feasible, key=lambda r: (_time(r), r.metrics["events_processed"]))
    listed = out.split("best 1 by total_time_ns (min), events_processed (min)\n")[1].splitlines()[0]
    assert listed.startswith(f"  #{best.number:<4} total_time_ns {_time(best):.6g}, events_processed ")
    front = [
        r
        for r in feasible
        if not any(
            _time(o) <= _time(r) and o.metrics["events_processed"] <= r.metrics["events_processed"] and o is not r
            for o in feasible
        )
    ]
    section = out.split(f"Pareto front ({len(front)} trials)\n")[1].split("\n\n")[0].splitlines()
    assert [int(line.split()[0][1:]) for line in section] == [r.number for r in front]


def test_the_summary_gives_each_values_best_and_median(two: Path) -> None:
    trials = _trials(two)
    summaries = read_results(two).parameters()
    spread = {}
    for key, values in (
        ("system.algorithm", ["halving_doubling", "ring", "direct"]),
        ("network.topology.0.size", [6, 8]),
    ):
        rows = next(s for s in summaries if s.key == key).values
        assert [row.label for row in rows] == [str(v) for v in values]
        medians = []
        for row, value in zip(rows, values):
            mine = [r for r in trials if r.params[key] == value]
            times = sorted(_time(r) for r in mine if r.status == "done" and _time(r) <= 7.35e7)
            middle = (times[(len(times) - 1) // 2] + times[len(times) // 2]) / 2 if times else None
            assert (row.trials, row.feasible, row.best, row.median) == (
                len(mine),
                len(times),
                times[0] if times else None,
                middle,
            )
            medians += [middle] if middle is not None else []
        spread[key] = max(medians) - min(medians)
    assert [(s.key, s.spread) for s in summaries] == sorted(spread.items(), key=lambda item: -item[1])


def test_a_range_with_many_values_is_summarised_in_four_bins(ranged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trials = _trials(ranged)
    bandwidth = {r.number: float(r.params["network.topology.0.bandwidth"].removesuffix("GB/s")) for r in trials}
    assert len(set(bandwidth.values())) == 10
    bins: dict[int, list[float]] = {}
    for record in trials:  # 25..400 GB/s in four bins of 93.75 GB/s, the last one closed
        bins.setdefault(min(int((bandwidth[record.number] - 25) / 93.75), 3), []).append(_time(record))
    summary = next(s for s in read_results(ranged).parameters() if s.key == "network.topology.0.bandwidth")
    edges = ["25", "118.8", "212.5", "306.2", "400"]
    labels = {i: f"[{edges[i]}, {edges[i + 1]}{']' if i == 3 else ')'} GB/s" for i in range(4)}
    assert [(v.label, v.trials, v.best, v.median) for v in summary.values] == [
        (labels[i], len(bins[i]), min(bins[i]), statistics.median(bins[i])) for i in sorted(bins)
    ]
    assert main(["results", str(ranged)]) == 0
    out = capsys.readouterr().out
    assert "best 10 by total_time_ns (min)" in out and "Pareto front" not in out


def test_csv_has_a_row_per_trial_and_a_column_per_parameter_and_metric(two: Path, tmp_path: Path) -> None:
    path = tmp_path / "trials.csv"
    assert main(["results", str(two), "--csv", str(path)]) == 0
    with open(path, encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    trials = _trials(two)
    metrics = sorted({name for r in trials for name in r.metrics})
    assert list(rows[0]) == [
        "number",
        "status",
        "system.algorithm",
        "network.topology.0.size",
        *metrics,
        "error",
        "trial_wall_seconds",
    ]
    assert len(rows) == len(trials) == 6
    for row, record in zip(rows, trials):
        assert (int(row["number"]), row["status"], row["system.algorithm"], int(row["network.topology.0.size"])) == (
            record.number,
            record.status,
            record.params["system.algorithm"],
            record.params["network.topology.0.size"],
        )
        assert float(row["trial_wall_seconds"]) == record.wall_seconds and row["error"] == record.error
        assert all((float(row[m]) if row[m] else None) == record.metrics.get(m) for m in metrics)
    assert rows[0]["status"] == "failed" and "halving" in rows[0]["error"] and rows[0]["total_time_ns"] == ""


def test_json_is_what_the_sweep_prints(two: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", str(two), "--json"]) == 0
    printed = capsys.readouterr().out
    assert main(["sweep", str(two.parent / "sweep.yaml"), "--db", str(two), "--json", "--workers", "1"]) == 0
    assert printed == capsys.readouterr().out
    assert json.loads(printed)["pareto"] == [r.number for r in read_results(two).pareto]


def test_the_python_api_gives_records_and_a_frame(two: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = read_results(two)
    assert len(found) == 6 and list(found) == _trials(two) and found.objectives == ["total_time_ns", "events_processed"]
    assert found.counts() == {"done": 5, "infeasible": 2, "failed": 1}
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    with pytest.raises(StrataSimError, match=r"needs pandas: pip install pandas"):
        found.to_frame()


def test_to_frame_is_the_rows_as_a_dataframe(two: Path) -> None:
    pytest.importorskip("pandas")
    found = read_results(two)
    frame = found.to_frame()
    assert list(frame.index) == [0, 1, 2, 3, 4, 5]
    assert frame.loc[4, "total_time_ns"] == found.trials[4].metrics["total_time_ns"]
    assert list(frame.columns) == [column for column in found.rows()[0] if column != "number"]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_out_draws_the_front_and_each_parameter(two: Path, ranged: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert main(["results", str(two), "--out", str(tmp_path / "two")]) == 0
    assert main(["results", str(ranged), "--out", str(tmp_path / "range")]) == 0
    drawn = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.png")}
    assert drawn == {
        "two/pareto_front.png",
        "two/total_time_ns-vs-system.algorithm.png",
        "two/total_time_ns-vs-network.topology.0.size.png",
        "range/total_time_ns-by-trial.png",
        "range/total_time_ns-vs-system.splits.png",
        "range/total_time_ns-vs-network.topology.0.bandwidth.png",
    }
    for path in tmp_path.rglob("*.png"):
        assert _png_size(path) == (700, 500) and path.stat().st_size > 10_000


def test_out_draws_each_key_a_generator_set(tmp_path: Path) -> None:
    """A generator's label is no parameter: the charts are of the keys it set, its topologies (long labels)
    numbered in order of appearance."""
    pytest.importorskip("matplotlib")
    db = _store(tmp_path, f"base: {QUICKSTART}\nspace:\n  shape: {{generator: topology, chips: 8}}\n")
    assert set(read_results(db).axes()) == {"network.topology"}
    assert len(read_results(db).axes()["network.topology"]) == 9  # 4 tori, 4 meshes, 1 switch
    assert main(["results", str(db), "--out", str(tmp_path / "charts")]) == 0
    drawn = sorted(p.name for p in (tmp_path / "charts").glob("*.png"))
    assert drawn == ["total_time_ns-by-trial.png", "total_time_ns-vs-network.topology.png"]


def _locked(db: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda tmp, db: tmp / "absent.db", "no such results store"),
        (lambda tmp, db: _write(tmp / "notes.db", b"just some text\n" * 100), "file is not a database"),
        (lambda tmp, db: _write(tmp / "cut.db", db.read_bytes()[:100] + bytes(8192)), "cannot read it"),
        (lambda tmp, db: _foreign(tmp / "other.db"), "not a results store written by stratasim sweep"),
        (lambda tmp, db: _empty(tmp / "empty.db"), "holds no trials yet"),
    ],
)
def test_a_store_that_cannot_be_read_is_one_error(
    two: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, problem: str
) -> None:
    db = make(tmp_path, two)  # type: ignore[operator]
    assert main(["results", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {db}: ") and problem in err and len(err.splitlines()) == 1


def test_a_locked_store_is_one_error(
    two: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _write(tmp_path / "copy.db", two.read_bytes())
    monkeypatch.setattr(results_module, "read_store", functools.partial(read_store, lock_wait_seconds=0.1))
    holder = _locked(copy)
    try:
        assert main(["results", str(copy)]) == 2
    finally:
        holder.rollback()
        holder.close()
    err = capsys.readouterr().err
    assert (
        err == f"error: {copy}: cannot read it as a results store: it is locked by another process; try again "
        "when it is done\n"
    )


@pytest.mark.parametrize(
    ("option", "problem"),
    [
        (["--csv", "{file}/trials.csv"], "error: --csv {file}/trials.csv: cannot write it: "),
        (["--out", "{file}"], "error: --out {file}: cannot make the folder: "),
        (["--top", "0"], "--top: expected a whole number of trials, at least 1, got '0'"),
    ],
)
def test_an_unwritable_output_is_one_error(
    two: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], problem: str
) -> None:
    file = _write(tmp_path / "a-file", b"")
    assert main(["results", str(two), *(o.format(file=file) for o in option)]) == 2
    err = capsys.readouterr().err
    assert problem.format(file=file) in err and "Traceback" not in err


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _foreign(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE songs (title TEXT)")
    return path


def _empty(path: Path) -> Path:
    (path.parent / "sweep.yaml").write_text(TWO_OBJECTIVES, encoding="utf-8")
    ResultStore(path, load_sweep(path.parent / "sweep.yaml").section.model_dump_json()).close()
    return path


def test_a_sweep_runs_from_python_and_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stratasim.explore.sweep``: a mapping (base relative to the current folder) or a file, a temporary store
    or a kept one that resumes; the results as ``read_results`` gives them."""
    monkeypatch.chdir(QUICKSTART.parent)
    definition = {"base": QUICKSTART.name, "space": {"system.splits": [1, 4], "system.algorithm": ["ring", "direct"]}}
    results = explore.sweep(definition)
    assert len(results.trials) == 4 and all(r.status == "done" for r in results.trials)
    kept = explore.sweep(definition, tmp_path / "kept.db")
    assert [(r.params, r.metrics["total_time_ps"]) for r in kept.trials] == [
        (r.params, r.metrics["total_time_ps"]) for r in results.trials
    ]
    assert explore.read_results(tmp_path / "kept.db").trials == kept.trials
    with pytest.raises(ConfigError, match="the sweep mapping"):
        explore.sweep({"base": QUICKSTART.name, "space": {}})
