"""Sweep files: validation by dotted path, the trials they expand to, running them into a store that resumes."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from stratasim.cli import main
from stratasim.explore import ResultStore, expand, load_sweep, run_sweep
from stratasim.kernel.errors import ConfigError, StrataSimError

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


def _sweep(tmp_path: Path, body: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(f"base: {QUICKSTART}\n{body}", encoding="utf-8")
    return path


GRID = """
space:
  system.splits: [1, 4]
  system.algorithm: [ring, direct]
  network.topology.0.bandwidth: {low: 25GB/s, high: 400GB/s, log: true, count: 3}
objectives: [{metric: total_time_ns, goal: min}]
"""


def test_a_grid_is_every_combination_the_last_key_fastest(tmp_path: Path) -> None:
    trials = expand(load_sweep(_sweep(tmp_path, GRID)))
    assert len(trials) == 12
    assert [t["network.topology.0.bandwidth"] for t in trials[:3]] == ["25GB/s", "100GB/s", "400GB/s"]
    assert trials[3] == {"system.splits": 1, "system.algorithm": "direct", "network.topology.0.bandwidth": "25GB/s"}


def test_a_random_search_is_its_seed(tmp_path: Path) -> None:
    body = """
space:
  system.splits: {low: 1, high: 16}
  network.topology.0.bandwidth: {low: 25GB/s, high: 400GB/s}
search: {method: random, trials: 7, seed: 3}
"""
    first, again = (expand(load_sweep(_sweep(tmp_path, body))) for _ in range(2))
    assert first == again and len(first) == 7 and len({json.dumps(t, sort_keys=True) for t in first}) == 7
    assert all(isinstance(t["system.splits"], int) and 1 <= t["system.splits"] <= 16 for t in first)
    assert all(25 <= float(t["network.topology.0.bandwidth"].removesuffix("GB/s")) <= 400 for t in first)
    other = expand(load_sweep(_sweep(tmp_path, body.replace("seed: 3", "seed: 4"))))
    assert other != first


def test_trials_run_into_the_store_and_a_second_run_resumes(tmp_path: Path) -> None:
    sweep = load_sweep(_sweep(tmp_path, GRID))
    store = ResultStore(tmp_path / "s.db", sweep.section.model_dump_json())
    outcome = run_sweep(sweep, store)
    assert outcome.ran == 12 and all(r.status == "done" for r in outcome.trials)
    best = min(outcome.trials, key=lambda r: r.metrics["total_time_ns"])
    assert outcome.pareto == [best] and best.params["network.topology.0.bandwidth"] == "400GB/s"
    again = run_sweep(sweep, store)
    assert again.ran == 0 and again.trials == outcome.trials


def test_a_failing_trial_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    body = "space:\n  system.algorithm: [halving_doubling, ring]\n  network.topology.0.size: [6, 8]\n"
    sweep = load_sweep(_sweep(tmp_path, body))
    outcome = run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()))
    statuses = [(r.params["system.algorithm"], r.params["network.topology.0.size"], r.status) for r in outcome.trials]
    assert statuses == [
        ("halving_doubling", 6, "failed"),
        ("halving_doubling", 8, "done"),
        ("ring", 6, "done"),
        ("ring", 8, "done"),
    ]
    assert "halving" in outcome.trials[0].error


def test_two_objectives_give_a_pareto_front_within_the_constraints(tmp_path: Path) -> None:
    body = """
space:
  system.splits: [1, 2, 4, 8]
  system.algorithm: [ring, direct]
objectives: [{metric: total_time_ns, goal: min}, {metric: events_processed, goal: min}]
constraints: [{metric: total_time_ns, max: 6.0e7}]
"""
    sweep = load_sweep(_sweep(tmp_path, body))
    outcome = run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()))
    front = outcome.pareto
    assert front and all(r.metrics["total_time_ns"] <= 6.0e7 for r in front)
    for record in front:  # nothing feasible beats a front member on both objectives
        assert not any(
            o.metrics["total_time_ns"] < record.metrics["total_time_ns"]
            and o.metrics["events_processed"] < record.metrics["events_processed"]
            for o in outcome.trials
            if o.metrics.get("total_time_ns", 1e99) <= 6.0e7
        )


def test_the_command_prints_json_trials_and_front(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep(tmp_path, GRID)
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["trials"]) == 12 and printed["pareto"] == [11]
    assert set(printed["trials"][0]) == {"number", "params", "status", "metrics", "error"}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("space: {}\n", "space: an empty space"),
        ("space:\n  system.bogus: [1, 2]\n", "space.system.bogus: unknown key"),
        ("space:\n  system.splits: []\n", "system.splits: an empty list of values"),
        ("space:\n  system.splits: {low: 8, high: 2, count: 2}\n", "low (8) is above high (2)"),
        ("space:\n  network.topology.0.bandwidth: {low: 1GB/s, high: 5us, count: 2}\n", "the same unit"),
        ("space:\n  system.splits: {low: 1, high: 8}\n", "a grid over a range needs its count"),
        ("space:\n  system.splits: [1]\nsearch: {method: random}\n", "random search needs trials"),
        ("space:\n  system.splits: [1]\nsearch: {method: annealing}\n", "search.method"),
        ("space:\n  system.splits: [1]\nobjective: []\n", "objective: unknown key"),
    ],
)
def test_a_bad_sweep_is_one_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, problem: str
) -> None:
    path = _sweep(tmp_path, body)
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err and "Traceback" not in err


def test_a_metric_the_report_lacks_stops_the_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep(tmp_path, "space:\n  system.splits: [1, 2]\nobjectives: [{metric: latency_of_everything}]\n")
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    assert "the report has no number 'latency_of_everything'" in capsys.readouterr().err


def test_a_corrupt_or_foreign_store_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep(tmp_path, GRID)
    (tmp_path / "junk.db").write_bytes(b"this is not a database" * 100)
    assert main(["sweep", str(path), "--db", str(tmp_path / "junk.db")]) == 2
    assert "cannot use it as a results store" in capsys.readouterr().err
    assert main(["sweep", str(path), "--db", str(tmp_path / "s.db"), "--json"]) == 0
    other = _sweep(tmp_path, GRID.replace("[1, 4]", "[1, 2]"), "other.yaml")
    capsys.readouterr()
    assert main(["sweep", str(other), "--db", str(tmp_path / "s.db")]) == 2
    assert "holds another sweep" in capsys.readouterr().err


def test_a_sweep_killed_mid_run_resumes_with_each_trial_once(tmp_path: Path) -> None:
    """SIGKILL part way (the fourth trial has run but is not yet stored), then the same command again: every trial
    is in the store exactly once, with the metrics of an uninterrupted run. The killed run's worker processes end
    too: were they left as orphans holding its output pipes, the first ``subprocess.run`` would time out."""
    body = "space:\n  system.splits: [1, 2, 4, 8, 16, 32]\n  network.topology.0.bandwidth: [25GB/s, 50GB/s, 100GB/s, 200GB/s]\n"
    path = _sweep(tmp_path, body)
    killed_db, whole_db = tmp_path / "killed.db", tmp_path / "whole.db"
    arguments = ["sweep", str(path), "--json"]
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_THREE, *arguments, "--db", str(killed_db)],
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL and _count(killed_db) == 3
    command = [sys.executable, "-m", "stratasim", *arguments]
    subprocess.run([*command, "--db", str(killed_db)], check=True, capture_output=True, timeout=120)
    subprocess.run([*command, "--db", str(whole_db)], check=True, capture_output=True, timeout=120)
    assert _rows(killed_db) == _rows(whole_db) and len(_rows(whole_db)) == 24


# Runs the CLI with the store's record() sending SIGKILL to its own process on the fourth call: a kill at a known
# point instead of a race against a timer (the trials take milliseconds).
_KILLED_AFTER_THREE = """
import os, signal, sys
from stratasim.cli import main
from stratasim.explore.store import ResultStore
keep, calls = ResultStore.record, []
def record(self, trial):
    calls.append(trial)
    if len(calls) == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    keep(self, trial)
ResultStore.record = record
sys.exit(main(sys.argv[1:]))
"""


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(db) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.Error:
        return 0


def _rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT number, key, status, metrics FROM trials ORDER BY number").fetchall()
    return [
        (number, key, status, {k: v for k, v in json.loads(metrics).items() if k != "wall_seconds"})
        for number, key, status, metrics in rows
    ]


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_sweep(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("base: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_sweep(tmp_path / "bad.yaml")
    with pytest.raises(StrataSimError):
        load_sweep(_sweep(tmp_path, "space:\n  system.splits: [1]\n").with_name("nothing.yaml"))


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "explore" / "collectives.yaml"


def test_the_torus_example_finds_the_bidirectional_ring_with_most_chunks(tmp_path: Path) -> None:
    """examples/explore/collectives.yaml: with links shared, the bidirectional ring (both directions of every
    link) with the most chunks (pipelining the two dimensions) at full bandwidth is fastest, and every algorithm
    gains from bandwidth and chunks."""
    sweep = load_sweep(EXAMPLE)
    outcome = run_sweep(sweep, ResultStore(tmp_path / "e.db", sweep.section.model_dump_json()))
    assert len(outcome.trials) == 36 and all(r.status == "done" for r in outcome.trials)
    (best,) = outcome.pareto
    assert best.params == {
        "system.algorithm": "ring_bidirectional",
        "system.splits": 16,
        "network.topology.1.bandwidth": "100GB/s",
    }
    assert best.metrics["total_time_ps"] == 10_101_443_520
    time = {tuple(r.params.values()): r.metrics["total_time_ps"] for r in outcome.trials}
    for algorithm in ("ring", "ring_bidirectional", "direct", "halving_doubling"):
        assert time[(algorithm, 16, "100GB/s")] <= time[(algorithm, 1, "100GB/s")]
        assert time[(algorithm, 16, "100GB/s")] < time[(algorithm, 16, "25GB/s")]


def test_worker_processes_keep_the_same_trials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trials run on two worker processes give the store one process gives, trial for trial."""
    path = _sweep(tmp_path, GRID)
    for workers, db in (("1", "one.db"), ("2", "two.db")):
        assert main(["sweep", str(path), "--db", str(tmp_path / db), "--workers", workers, "--json"]) == 0
    assert _rows(tmp_path / "one.db") == _rows(tmp_path / "two.db") and len(_rows(tmp_path / "one.db")) == 12
    capsys.readouterr()
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db"), "--workers", "0"]) == 2
    assert "--workers: expected at least 1 worker process, got 0" in capsys.readouterr().err


MODEL_SEARCH = """
space:
  system.splits: {low: 1, high: 32, log: true}
  system.algorithm: [ring, direct, halving_doubling]
  network.topology.0.bandwidth: {low: 25GB/s, high: 400GB/s, log: true}
objectives: [{metric: total_time_ns, goal: min}]
search: {method: tpe, trials: 12, seed: 7}
"""


def test_a_tpe_search_is_its_seed_and_resumes(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    sweep = load_sweep(_sweep(tmp_path, MODEL_SEARCH))
    first, again = (
        run_sweep(sweep, ResultStore(tmp_path / f"{name}.db", sweep.section.model_dump_json())) for name in ("a", "b")
    )
    assert [r.params for r in first.trials] == [r.params for r in again.trials] and len(first.trials) == 12
    assert all(1 <= r.params["system.splits"] <= 32 for r in first.trials)
    resumed = run_sweep(sweep, ResultStore(tmp_path / "a.db", sweep.section.model_dump_json()))
    assert resumed.ran == 0 and resumed.trials == first.trials
    other = load_sweep(_sweep(tmp_path, MODEL_SEARCH.replace("seed: 7", "seed: 8"), "other.yaml"))
    assert [r.params for r in run_sweep(other, ResultStore(tmp_path / "c.db", "x")).trials] != [
        r.params for r in first.trials
    ]


def test_an_nsga2_search_gives_a_pareto_front(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    body = MODEL_SEARCH.replace("method: tpe", "method: nsga2").replace(
        "objectives: [{metric: total_time_ns, goal: min}]",
        "objectives: [{metric: total_time_ns, goal: min}, {metric: events_processed, goal: min}]",
    )
    sweep = load_sweep(_sweep(tmp_path, body))
    outcome = run_sweep(sweep, ResultStore(tmp_path / "n.db", sweep.section.model_dump_json()))
    assert len(outcome.trials) == 12 and outcome.pareto
    scores = [(r.metrics["total_time_ns"], r.metrics["events_processed"]) for r in outcome.trials]
    for member in outcome.pareto:
        mine = (member.metrics["total_time_ns"], member.metrics["events_processed"])
        assert not any(o[0] <= mine[0] and o[1] <= mine[1] and o != mine for o in scores)


def test_a_model_search_without_optuna_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # as if it were not installed
    path = _sweep(tmp_path, MODEL_SEARCH)
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    assert "needs Optuna: pip install 'stratasim[explore]'" in capsys.readouterr().err


def test_a_dask_cluster_fills_the_same_store_as_local_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same sweep on a real ``distributed.LocalCluster`` of two worker processes and on local processes."""
    distributed = pytest.importorskip("distributed")
    path = _sweep(tmp_path, GRID)
    assert main(["sweep", str(path), "--db", str(tmp_path / "local.db"), "--workers", "2", "--json"]) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert (
            main(
                [
                    "sweep",
                    str(path),
                    "--db",
                    str(tmp_path / "dask.db"),
                    "--cluster",
                    cluster.scheduler_address,
                    "--json",
                ]
            )
            == 0
        )
    assert _rows(tmp_path / "local.db") == _rows(tmp_path / "dask.db") and len(_rows(tmp_path / "dask.db")) == 12


def test_an_unreachable_cluster_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")
    path = _sweep(tmp_path, GRID)
    capsys.readouterr()
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db"), "--cluster", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --cluster tcp://127.0.0.1:9: cannot reach a Dask scheduler there")


def test_the_benchmark_sweep_has_500_points() -> None:
    """benchmarks/sweeps.py times this one: it must stay 500 valid points."""
    sweep = load_sweep(Path(__file__).resolve().parents[2] / "benchmarks" / "sweeps" / "collectives500.yaml")
    trials = expand(sweep)
    assert len(trials) == 500 and len({json.dumps(t, sort_keys=True) for t in trials}) == 500
