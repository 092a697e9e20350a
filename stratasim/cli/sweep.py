"""``stratasim sweep FILE``: run a sweep's trials into a results store and print the best (see
:mod:`stratasim.explore`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stratasim.explore.run import SweepOutcome, feasible, outcome_json, run_sweep
from stratasim.explore.store import ResultStore, TrialRecord
from stratasim.explore.sweep_file import Sweep, load_sweep

if TYPE_CHECKING:
    from stratasim.cli.commands import _Subparsers

__all__ = ["add_sweep"]

_SHOWN = 10


def add_sweep(subparsers: _Subparsers) -> None:
    """The ``sweep`` subcommand."""
    parser = subparsers.add_parser("sweep", help="run the trials of a sweep file into a results store")
    parser.add_argument("sweep", metavar="FILE", help="the sweep file (YAML): base study, space, objectives, search")
    parser.add_argument("--db", metavar="PATH",
                        help="the results store (SQLite; default: FILE's name with .db, in the current folder): "
                             "re-running resumes")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print every trial and the Pareto front as JSON")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="local worker processes running trials (default: the machine's cores)")  # fmt: skip
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="run the trials on the Dask scheduler at ADDRESS (e.g. tcp://10.0.0.5:8786)")  # fmt: skip
    parser.set_defaults(handler=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    sweep = load_sweep(args.sweep)
    db = Path(args.db) if args.db else Path(Path(args.sweep).stem + ".db")
    store = ResultStore(db, sweep.section.model_dump_json())
    try:
        outcome = run_sweep(sweep, store, None if args.json else _progress, workers=args.workers, cluster=args.cluster,
                            notes=None if args.json else _note)
    finally:
        store.close()
    print(outcome_json(outcome) if args.json else _table(sweep, outcome, db))
    return 0


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _progress(record: TrialRecord) -> None:
    status = "" if record.status == "done" else f"  failed: {record.error.splitlines()[0]}"
    print(f"trial {record.number}: {record.params} ({record.wall_seconds:.2f} s){status}", file=sys.stderr)


def _table(sweep: Sweep, outcome: SweepOutcome, db: Path) -> str:
    """The best trials by the first objective (the Pareto front with several), then a count."""
    objectives = [o.metric for o in sweep.section.objectives]
    failed = sum(r.status == "failed" for r in outcome.trials)
    lines = [f"{sweep.source}: {len(outcome.trials)} trials ({outcome.ran} run now, {failed} failed), store {db}"]
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
    return "\n".join(lines)
