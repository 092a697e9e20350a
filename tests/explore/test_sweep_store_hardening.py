"""Issue 27, sweeps and results stores: generators sized against the budget before they expand, a wrong form one
clear error, the exit code of a sweep whose trials failed, stores that refuse stale inputs and foreign databases,
and rows of the wrong shape read as one clear error."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from stratasim.explore.inputs import input_digests
from stratasim.explore.run import _numbers
from stratasim.explore.space import resolve
from stratasim.explore.store import APPLICATION_ID
from stratasim.explore.sweep_file import load_sweep, parse_sweep
from tests.conftest import RunCli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TINY = """
name: tiny
workload:
  kind: transformer
  model: {layers: 4, hidden: 64, heads: 4, seq_len: 32, vocab: 128}
  parallelism: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: BATCH}
system: {algorithm: ring}
network:
  backend: analytical
  topology: [{kind: ring, size: 8, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: roofline, device: h100}
"""
QUICK_SPACE = "space:\n  system.algorithm: [ring, direct]\n"


def _files(tmp_path: Path, space: str, base: str | None = None) -> Path:
    if base is None:
        shutil.copy(EXAMPLES / "quickstart.yaml", tmp_path / "base.yaml")
    else:
        (tmp_path / "base.yaml").write_text(base, encoding="utf-8")
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: base.yaml\n{space}", encoding="utf-8")
    return path


def _refused(run_cli: RunCli, sweep: Path, *fragments: str, db: Path | None = None) -> None:
    """``stratasim sweep`` ends within seconds with exit code 2 and one message holding each of ``fragments``."""
    started = time.perf_counter()
    code, _, err = run_cli("sweep", str(sweep), "--db", str(db or sweep.with_suffix(".db")), "--workers", "1")
    assert time.perf_counter() - started < 10
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def test_a_parallelism_generator_on_a_huge_global_batch_is_refused_at_once(tmp_path: Path, run_cli: RunCli) -> None:
    """A DP rank's share of 8 * 10^15 samples has divisors past any search: the option to narrow is named."""
    sweep = _files(tmp_path, "space:\n  plan: {generator: parallelism}\n", TINY.replace("BATCH", str(8 * 10**15)))
    _refused(run_cli, sweep, "space.plan.micro_batch", "list micro_batch values or give max_micro_batch")


def test_a_parallelism_generator_past_the_budget_is_refused_before_it_expands(tmp_path: Path, run_cli: RunCli) -> None:
    sweep = _files(tmp_path, "space:\n  plan: {generator: parallelism}\n", TINY.replace("BATCH", "16"))
    code, _, err = run_cli("sweep", str(sweep), "--db", str(tmp_path / "s.db"), "--max-events", "1000")
    assert code == 2 and "space.plan (" in err and "combinations to try" in err and "--max-events" in err


@pytest.mark.parametrize(
    ("entry", "fragments"),
    [
        ("{generator: topology, chips: 1000000000}", ("space.shape: 1,000,000,000 NPUs", "reduce space.shape's chips")),
        ("{generator: topology, chips: 4611686018427387904, kinds: [torus]}", ("space.shape.chips", "divisors")),
        (
            "{generator: topology, chips: 100000, kinds: [random], random: {count: 1000}}",
            ("space.shape (1,000 combinations to try)", "memory"),
        ),
        (
            "{generator: topology, chips: 8, kinds: [random], random: {count: 1000000000000}}",
            ("space.shape (1,000,000,000,000 combinations to try)",),
        ),
        ("{generator: {name: parallelism}}", ("space.shape", "expected a list of values, a range")),
        ("{generator: [topology], chips: 8}", ("space.shape", "a generator {generator: NAME, ...}")),
    ],
)
def test_a_topology_generator_too_big_or_a_generator_of_the_wrong_form_is_one_error(
    tmp_path: Path, run_cli: RunCli, entry: str, fragments: tuple[str, ...]
) -> None:
    _refused(run_cli, _files(tmp_path, f"space:\n  shape: {entry}\n"), *fragments)


def test_a_sweep_whose_every_trial_failed_exits_non_zero(tmp_path: Path, run_cli: RunCli) -> None:
    sweep = _files(tmp_path, "space:\n  system.splits: [0, -1]\n")
    code, _, err = run_cli("sweep", str(sweep), "--db", str(tmp_path / "s.db"), "--workers", "1")
    assert code == 1 and "error: every trial of the sweep failed (2); the first: " in err
    code, _, err = run_cli("sweep", str(sweep), "--db", str(tmp_path / "s.db"), "--json")
    assert code == 1


def test_a_sweep_where_some_trials_failed_says_so(tmp_path: Path, run_cli: RunCli) -> None:
    sweep = _files(tmp_path, "space:\n  system.splits: [0, 4]\n")
    code, out, err = run_cli("sweep", str(sweep), "--db", str(tmp_path / "s.db"), "--workers", "1")
    assert code == 0 and "warning: 1 of 2 trials failed" in err and "1 failed" in out


def test_a_store_refuses_a_base_study_edited_since_and_fresh_runs_again(tmp_path: Path, run_cli: RunCli) -> None:
    sweep = _files(tmp_path, QUICK_SPACE)
    db = str(tmp_path / "s.db")
    assert run_cli("sweep", str(sweep), "--db", db, "--workers", "1")[0] == 0
    code, out, _ = run_cli("sweep", str(sweep), "--db", db, "--workers", "1")
    assert code == 0 and "(0 run now" in out  # nothing changed: it resumes
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text(encoding="utf-8").replace("splits: 4", "splits: 2"), encoding="utf-8")
    code, out, err = run_cli("sweep", str(sweep), "--db", db, "--workers", "1")
    assert code == 2 and "the base study changed since" in err and "--fresh" in err and "another --db" in err
    code, out, _ = run_cli("sweep", str(sweep), "--db", db, "--workers", "1", "--fresh")
    assert code == 0 and "(2 run now" in out
    assert run_cli("sweep", str(sweep), "--db", db, "--workers", "1")[0] == 0


def test_the_inputs_digested_include_every_file_the_study_names(tmp_path: Path) -> None:
    """A file named by a value (relative to the base study) and per-rank files named by their prefix."""
    (tmp_path / "traces").mkdir()
    for rank in range(2):
        (tmp_path / "traces" / f"ar.{rank}.et").write_bytes(b"rank %d" % rank)
    (tmp_path / "device.yaml").write_text("peak: 1\n", encoding="utf-8")
    base = {"workload": {"kind": "chakra", "path": "traces/ar"}, "compute": {"device": {"file": "device.yaml"}}}
    definition = {"study": base, "space": {"system.splits": [1, 2]}}
    before = input_digests(parse_sweep(definition, str(tmp_path / "s.yaml"), tmp_path))
    assert {"traces/ar", "device.yaml", "the base study", "the sweep"} <= set(before)
    (tmp_path / "traces" / "ar.1.et").write_bytes(b"slower")
    (tmp_path / "device.yaml").write_text("peak: 2\n", encoding="utf-8")
    after = input_digests(parse_sweep(definition, str(tmp_path / "s.yaml"), tmp_path))
    assert {name for name in before if before[name] != after[name]} == {"traces/ar", "device.yaml"}


@pytest.mark.parametrize("table", ["songs (title TEXT)", "trials (id INTEGER, outcome TEXT)"])
def test_a_database_the_sweep_did_not_create_is_never_written(tmp_path: Path, run_cli: RunCli, table: str) -> None:
    """Not even one whose only table is called trials, and not with --fresh."""
    db = tmp_path / "theirs.db"
    with sqlite3.connect(db) as connection:
        connection.execute(f"CREATE TABLE {table}")
    connection.close()
    before = db.read_bytes()
    _refused(run_cli, _files(tmp_path, QUICK_SPACE), "did not create", db=db)
    code, _, err = run_cli("sweep", str(tmp_path / "sweep.yaml"), "--db", str(db), "--fresh")
    assert code == 2 and "never writes into another database" in err
    assert db.read_bytes() == before


def test_a_store_is_marked_as_ours(tmp_path: Path, run_cli: RunCli) -> None:
    sweep = _files(tmp_path, QUICK_SPACE)
    assert run_cli("sweep", str(sweep), "--db", str(tmp_path / "s.db"), "--workers", "1")[0] == 0
    with sqlite3.connect(tmp_path / "s.db") as connection:
        assert connection.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    connection.close()


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("params", '"a string"', "its params are not a mapping"),
        ("params", "{}", "no value of system.algorithm"),
        ("metrics", "[1, 2]", "its metrics are not numbers"),
        ("metrics", '{"total_time_ns": "fast"}', "its metrics are not numbers"),
        ("metrics", "{}", "no number total_time_ns"),
        ("metrics", '{"total_time_ns": 1' + "0" * 400 + "}", "its metrics are not numbers"),
        ("status", "'ok'", "neither done nor failed"),
        ("wall_seconds", "'long'", "wall_seconds is not a number"),
        ("number", "'first'", "its number is not a whole number"),
    ],
)
def test_rows_of_the_wrong_shape_are_one_error_in_results_and_on_resume(
    tmp_path: Path, run_cli: RunCli, column: str, value: str, fragment: str
) -> None:
    sweep = _files(tmp_path, QUICK_SPACE)
    db = str(tmp_path / "s.db")
    assert run_cli("sweep", str(sweep), "--db", db, "--workers", "1")[0] == 0
    with sqlite3.connect(db) as connection:
        literal = value if value.startswith("'") else f"'{value}'"
        connection.execute(f"UPDATE trials SET {column} = {literal} WHERE number = 0")
    connection.close()
    for argv in (("results", db), ("results", db, "--json"), ("sweep", str(sweep), "--db", db, "--workers", "1")):
        code, _, err = run_cli(*argv)
        assert code == 2 and "a corrupt results store" in err and fragment in err and "Traceback" not in err, err


def test_a_trial_keeps_every_number_of_the_headline_figures() -> None:
    report = {
        "total_time_ns": 5.0,
        "serving": {"ttft_p99_ps": 7, "goodput": 0.5},
        "backends": {"network": "analytical"},
        "per_npu": [{"compute_time_ns": 1.0}],
        "memory_per_npu_bytes": [1, 2],
        "warnings": [],
    }
    assert _numbers(report) == {"total_time_ns": 5.0, "serving.ttft_p99_ps": 7.0, "serving.goodput": 0.5}


def test_a_base_study_with_numbers_as_keys_is_digested_without_a_traceback(tmp_path: Path, run_cli: RunCli) -> None:
    sweep = _files(tmp_path, "space:\n  system.splits: [1]\n", "workload: {1: a, b: c}\n")
    code, _, err = run_cli("sweep", str(sweep), "--db", str(tmp_path / "s.db"), "--workers", "1")
    assert code == 1 and "workload.kind: required" in err and "Traceback" not in err


def test_a_random_topology_asking_more_links_than_a_complete_graph_gets_it(tmp_path: Path) -> None:
    """Random graphs whose links per chip times the chips overflows a float (found by the long fuzz run): each is
    the complete graph of the chips, not an OverflowError."""
    shape = "{generator: topology, chips: 8, kinds: [random], random: {count: 1, links_per_chip: 1.0e+308}}"
    sweep = _files(tmp_path, f"space:\n  shape: {shape}\n", TINY.replace("BATCH", "16"))
    (point,) = resolve(load_sweep(sweep)).generated["shape"].points
    assert sum(len(chip["links"]) for chip in point["network.topology"]["chips"]) == 8 * 7 // 2


def test_a_range_value_beyond_a_double_is_one_error_in_results_and_on_resume(tmp_path: Path, run_cli: RunCli) -> None:
    """A stored whole number of 401 digits for a log range's key (found by the long fuzz run): refused as not a
    positive number, not an OverflowError."""
    sweep = _files(
        tmp_path, "space:\n  network.topology.0.bandwidth: {low: 25GB/s, high: 100GB/s, log: true, count: 2}\n"
    )
    db = str(tmp_path / "s.db")
    assert run_cli("sweep", str(sweep), "--db", db, "--workers", "1")[0] == 0
    huge = '{"network.topology.0.bandwidth": 1' + "0" * 400 + "}"
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE trials SET params = ? WHERE number = 0", (huge,))
    connection.close()
    for argv in (("results", db), ("sweep", str(sweep), "--db", db, "--workers", "1")):
        code, _, err = run_cli(*argv)
        assert code == 2 and "network.topology.0.bandwidth is not a positive number" in err, err
        assert "Traceback" not in err, err
