"""Multi-fidelity ladders: screen every trial cheaply, re-evaluate the best at a higher fidelity, compare."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from stratasim.cli import main
from stratasim.explore import ResultStore, load_sweep, read_results, run_sweep
from stratasim.explore.ladder import kendall_tau
from stratasim.kernel.errors import ConfigError, StrataSimError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "explore"
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
EXAMPLE = EXAMPLES / "collectives_ladder.yaml"


def test_the_ladder_picks_the_winner_of_the_full_high_fidelity_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/explore/collectives_ladder.yaml screens 36 points on the analytical network and re-evaluates the
    best quarter congestion-aware: the same best configuration, to the picosecond, as all 36 congestion-aware."""
    ladder = load_sweep(EXAMPLE)
    outcome = run_sweep(ladder, ResultStore(tmp_path / "ladder.db", ladder.section.model_dump_json()), workers=2)
    full = load_sweep(EXAMPLES / "collectives.yaml")
    everything = run_sweep(full, ResultStore(tmp_path / "full.db", full.section.model_dump_json()), workers=2)
    assert [(r.params, r.metrics["total_time_ps"]) for r in outcome.pareto] == [
        (r.params, r.metrics["total_time_ps"]) for r in everything.pareto
    ]
    screen, shared = outcome.levels
    assert len(screen.evaluated) == 36 and len(screen.kept) == 9 and shared.evaluated == screen.kept
    assert {r.fidelity for r in outcome.trials} == {1} and len(outcome.trials) == 9 and outcome.ran == 45
    high = {r.number: r.metrics["total_time_ps"] for r in everything.trials}
    assert all(r.metrics["total_time_ps"] == high[r.number] for r in outcome.trials)  # level 1 is the full sweep's
    assert shared.tau is not None and -1 <= shared.tau <= 1 and not shared.kept
    # The command line says how the ranking moved and what screening saved, and resumes without running again.
    assert main(["sweep", str(EXAMPLE), "--db", str(tmp_path / "ladder.db")]) == 0
    out = capsys.readouterr().out
    assert "36 trials, 9 at the last fidelity level (0 run now" in out
    assert "shared links: 9 trials" in out and "Kendall tau" in out and "to run all 36 at 'shared links'" in out
    assert main(["sweep", str(EXAMPLE), "--db", str(tmp_path / "ladder.db"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [level["name"] for level in document["levels"]] == ["screen", "shared links"]
    assert document["screening"]["trial_seconds"] > 0 and document["pareto"] == [r.number for r in outcome.pareto]
    with sqlite3.connect(tmp_path / "ladder.db") as db:
        assert db.execute("SELECT fidelity, COUNT(*) FROM trials GROUP BY fidelity").fetchall() == [(0, 36), (1, 9)]
    read = read_results(tmp_path / "ladder.db")  # a ladder's answer is its last level's
    assert [r.number for r in read.trials] == shared.evaluated and read.pareto == outcome.pareto


LADDER = """
space:
  system.splits: [1, 2, 4, 8]
  network.topology.0.bandwidth: [25GB/s, 100GB/s]
objectives: [{metric: total_time_ns, goal: min}, {metric: exposed_comm_ns, goal: min}]
fidelity:
  - {name: cheap, keep: KEEP}
  - {name: dear, set: {system.endpoint_delay: 10ns}}
"""


@pytest.mark.parametrize(("keep", "count"), [("{top: 3}", 3), ("{fraction: 0.3}", 3), ("{pareto: true}", None)])
def test_each_keep_rule_passes_on_what_it_says(tmp_path: Path, keep: str, count: int | None) -> None:
    path = tmp_path / "ladder.yaml"
    path.write_text(f"base: {QUICKSTART}\n" + LADDER.replace("KEEP", keep), encoding="utf-8")
    sweep = load_sweep(path)
    store = ResultStore(tmp_path / "s.db", sweep.section.model_dump_json())
    outcome = run_sweep(sweep, store)
    cheap = outcome.levels[0]
    assert len(cheap.evaluated) == 8 and [r.number for r in outcome.trials] == cheap.kept
    first = sorted(store.finished(0).values(), key=lambda r: r.number)
    scores = {r.number: (r.metrics["total_time_ns"], r.metrics["exposed_comm_ns"]) for r in first}
    if count is not None:  # top 3, or ceil(0.3 * 8) = 3: the three fastest
        assert cheap.kept == sorted(sorted(scores, key=lambda n: (scores[n][0], n))[:count])
    else:  # the Pareto front of the first level over both objectives
        front = [
            n for n, s in scores.items() if not any(o[0] <= s[0] and o[1] <= s[1] and o != s for o in scores.values())
        ]
        assert cheap.kept == front


def test_kendall_tau() -> None:
    assert kendall_tau([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)  # 5 pairs agree, 1 disagrees
    # tau-b with a tie in the first ranking: (C - D) / sqrt((C + D + T1) (C + D + T2)) = 5 / sqrt(6 * 5)
    assert kendall_tau([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / math.sqrt(30))


@pytest.mark.parametrize(
    ("fidelity", "where", "expected"),
    [
        ("[{name: a}]", "fidelity", "at least two levels"),
        ("[{name: a}, {name: b}]", "fidelity[0].keep", "every level but the last"),
        ("[{name: a, keep: {top: 2}}, {name: b, keep: {top: 1}}]", "fidelity[1].keep", "the last level keeps nothing"),
        ("[{name: a, keep: {top: 2, pareto: true}}, {name: b}]", "fidelity[0].keep", "one of top"),
        ("[{name: a, keep: {fraction: 1.5}}, {name: b}]", "fidelity[0].keep.fraction", "less than or equal to 1"),
        ("[{name: a, set: {system.splits: 2}, keep: {top: 1}}, {name: b}]", "fidelity[0].set", "varied by the space"),
        ("[{name: a, keep: {top: 1}}, {name: a}]", "fidelity", "level names must differ"),
    ],
)
def test_bad_ladders_name_where(tmp_path: Path, fidelity: str, where: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"base: {QUICKSTART}\nspace:\n  system.splits: [1, 2]\nfidelity: {fidelity}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_sweep(path)
    assert any(place == where and expected in message for place, message in caught.value.problems), (
        caught.value.problems
    )


def test_a_ladder_needs_a_grid_or_random_search_and_known_keys(tmp_path: Path) -> None:
    path = tmp_path / "tpe.yaml"
    path.write_text(
        f"base: {QUICKSTART}\nspace:\n  system.splits: [1, 2]\nsearch: {{method: tpe, trials: 3}}\n"
        "fidelity: [{name: a, keep: {top: 1}}, {name: b}]\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="a ladder screens a grid or random search"):
        load_sweep(path)
    path.write_text(
        f"base: {QUICKSTART}\nspace:\n  system.splits: [1, 2]\n"
        "fidelity: [{name: a, keep: {top: 1}}, {name: b, set: {system.bogus: 1}}]\n",
        encoding="utf-8",
    )
    sweep = load_sweep(path)
    with pytest.raises(ConfigError) as caught:
        run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()))
    assert [place for place, _ in caught.value.problems] == ["fidelity[1].set.system.bogus"]


def test_a_store_from_before_fidelity_levels_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as connection:
        connection.executescript(
            "CREATE TABLE trials (number INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, "
            "params TEXT, status TEXT, metrics TEXT, error TEXT, wall_seconds REAL);"
        )
    with pytest.raises(StrataSimError, match="written by an earlier StrataSim"):
        ResultStore(db, "{}")
