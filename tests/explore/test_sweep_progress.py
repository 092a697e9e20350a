"""``stratasim sweep``'s progress: a rich bar on a terminal (count, rate, time left, best so far), lines elsewhere."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from stratasim.cli import main
from stratasim.cli.sweep_progress import BarProgress, LineProgress, progress_for
from stratasim.explore import ResultStore, load_sweep, run_sweep

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
SWEEP = "space:\n  system.splits: [1, 2, 4]\n  system.algorithm: [ring, direct]\n"


def _sweep(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: {QUICKSTART}\n{SWEEP}", encoding="utf-8")
    return path


def test_the_bar_counts_rates_and_names_the_best(tmp_path: Path) -> None:
    sweep = load_sweep(_sweep(tmp_path))
    screen = io.StringIO()
    with BarProgress(sweep, Console(file=screen, force_terminal=True, width=200)) as progress:
        outcome = run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()), progress)
    best = min(outcome.trials, key=lambda r: r.metrics["total_time_ns"])
    shown = screen.getvalue()
    assert "6/6" in shown and "trials/s" in shown
    assert f"best total_time_ns {best.metrics['total_time_ns']:.6g} (#{best.number})" in shown


def test_off_a_terminal_each_trial_is_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep(tmp_path)
    assert isinstance(progress_for(load_sweep(path), io.StringIO()), LineProgress)
    assert main(["sweep", str(path), "--db", str(tmp_path / "s.db"), "--workers", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "6 trials, 0 in the store already"
    assert sorted(line.split(":")[0] for line in err[1:]) == [f"trial {n}" for n in range(6)]
    assert main(["sweep", str(path), "--db", str(tmp_path / "s.db")]) == 0  # resumed: nothing left to run
    assert capsys.readouterr().err.splitlines() == ["6 trials, 6 in the store already"]
