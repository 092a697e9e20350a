"""``stratasim sweep FILE``: run a sweep's trials into a results store and print the best (see
:mod:`stratasim.explore`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stratasim.cli import budget_options
from stratasim.cli.interrupts import terminate_as_interrupt
from stratasim.cli.sweep_progress import progress_for
from stratasim.explore.ladder import time_saved
from stratasim.explore.run import SweepOutcome, feasible, outcome_json, run_sweep
from stratasim.explore.store import ResultStore
from stratasim.explore.sweep_file import Sweep, load_sweep

__all__ = ["handle"]

_SHOWN = 10
EXIT_STOPPED = 130
"""The exit code of a sweep stopped by Ctrl-C or SIGTERM (as the command line's for an interrupt)."""
_ALL_FAILED = 1
"""The exit code of a sweep whose every trial failed (its store and its output are still written)."""


def handle(args: argparse.Namespace) -> int:
    sweep = load_sweep(args.sweep)
    budget = budget_options.budget(args)
    db = Path(args.db) if args.db else Path(Path(args.sweep).stem + ".db")
    store = ResultStore.for_sweep(db, sweep, fresh=args.fresh)
    try:
        with terminate_as_interrupt():
            if args.json:
                outcome = run_sweep(sweep, store, workers=args.workers, cluster=args.cluster, budget=budget)
            else:
                with progress_for(sweep) as progress:
                    outcome = run_sweep(
                        sweep, store, progress, workers=args.workers, cluster=args.cluster, budget=budget, notes=_note
                    )
    except KeyboardInterrupt:
        print(
            f"stopped: the sweep's workers were stopped; the trials that finished are in {db}, and running the "
            "sweep again resumes from them",
            file=sys.stderr,
        )
        return EXIT_STOPPED
    finally:
        store.close()
    print(outcome_json(outcome) if args.json else _table(sweep, outcome, db))
    return _failures(outcome, db)


def _failures(outcome: SweepOutcome, db: Path) -> int:
    """Say on stderr how many trials failed; the exit code: non-zero when every one did."""
    failed = [r for r in outcome.trials if r.status == "failed"]
    if failed and len(failed) == len(outcome.trials):
        print(f"error: every trial of the sweep failed ({len(failed)}); the first: {failed[0].error}", file=sys.stderr)
        return _ALL_FAILED
    if failed:
        print(
            f"warning: {len(failed)} of {len(outcome.trials)} trials failed (their errors: stratasim results {db} "
            "--json)",
            file=sys.stderr,
        )
    return 0


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _table(sweep: Sweep, outcome: SweepOutcome, db: Path) -> str:
    """The best trials by the first objective (the Pareto front with several), then a count."""
    objectives = [o.metric for o in sweep.section.objectives]
    failed = sum(r.status == "failed" for r in outcome.trials)
    count = (
        f"{len(outcome.levels[0].evaluated)} trials, {len(outcome.trials)} at the last fidelity level"
        if (outcome.levels)
        else f"{len(outcome.trials)} trials"
    )
    lines = [f"{sweep.source}: {count} ({outcome.ran} run now, {failed} failed), store {db}"]
    lines += outcome.notes
    first = sweep.section.objectives[0]
    sign = 1.0 if first.goal == "min" else -1.0
    done = [r for r in outcome.trials if feasible(sweep, r)]
    best = outcome.pareto if len(objectives) > 1 else sorted(done, key=lambda r: sign * r.metrics[first.metric])
    title = "Pareto front" if len(objectives) > 1 else f"best by {objectives[0]} ({sweep.section.objectives[0].goal})"
    lines.append(title)
    for record in best[:_SHOWN]:
        values = ", ".join(f"{name} {record.metrics[name]:.6g}" for name in objectives)
        lines.append(f"  #{record.number:<4} {values}  {record.params}")
    if not best:
        lines.append("  none: no trial finished within the constraints")
    lines += _ladder(outcome)
    return "\n".join(lines)


def _ladder(outcome: SweepOutcome) -> list[str]:
    """What each fidelity level did and what screening saved (nothing without a ladder)."""
    if not outcome.levels:
        return []
    lines = ["fidelity ladder"]
    previous = ""
    for level in outcome.levels:
        line = f"  {level.name}: {len(level.evaluated)} trials, {level.wall_seconds:.2f} s of trials"
        if level.tau is not None:
            line += f"; ranking against {previous}: Kendall tau {level.tau:.2f}"
        if level.moved_in or level.moved_out:
            line += (
                f"; into the top: {', '.join(f'#{n}' for n in level.moved_in or []) or 'none'}, out: "
                f"{', '.join(f'#{n}' for n in level.moved_out or []) or 'none'}"
            )
        if level.screen_error is not None:
            low, high = level.screen_error
            line += f"; screening error {low:+.2e} to {high:+.2e} (max |error| {max(-low, high):.2e})"
        if level.kept:
            line += f"; {len(level.kept)} go on"
        lines.append(line)
        previous = level.name
    spent, everything = time_saved(outcome.levels)
    saved = everything - spent
    lines.append(
        f"  screening: {spent:.2f} s of trials against about {everything:.2f} s to run all "
        f"{len(outcome.levels[0].evaluated)} at {outcome.levels[-1].name!r} "
        f"({'saved' if saved >= 0 else 'lost'} {abs(saved):.2f} s)"
    )
    return lines
