"""A whole sweep as a case of ``stratasim bench --suite`` (issue 32's screening rung): the sweep file run in a fresh
child process on a fresh store, timed from loading the file to its last trial.

The child (``python -m stratasim.bench.sweep_runs RUN_JSON``) prints the figures a suite row reads: the wall time,
the peak resident memory, and as ``total_time_ps`` the simulated time of the sweep's best trial by its first
objective (its last level's, with a fidelity ladder), with the trials run and the best trial's number.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["SweepRun", "run_sweep_file"]


@dataclass(frozen=True)
class SweepRun:
    """A sweep file (relative to the repository) run whole, on a fresh store."""

    path: str


def _child(run_json: str) -> None:
    """Body of the child process: run one sweep on a fresh store and print its figures as JSON."""
    from stratasim.explore import ResultStore, load_sweep, run_sweep
    from stratasim.explore.ranking import ranked
    from stratasim.kernel.errors import StrataSimError

    run = json.loads(run_json)
    started = time.perf_counter()
    try:
        sweep = load_sweep(run["path"])
        with tempfile.TemporaryDirectory(prefix="stratasim-bench-") as folder:
            store = ResultStore.for_sweep(f"{folder}/sweep.db", sweep)
            outcome = run_sweep(sweep, store)
            store.close()
    except StrataSimError as exc:
        print(json.dumps({"error": " ".join(line.strip() for line in str(exc).splitlines())}))
        return
    total = time.perf_counter() - started
    best = ranked(sweep, outcome.trials)[0]
    print(
        json.dumps(
            {
                "total_time_ps": int(best.metrics.get("total_time_ps", 0)),
                "wall_seconds": total,
                "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "trials": outcome.ran,
                "best_trial": best.number,
            }
        )
    )


def run_sweep_file(path: str, timeout_s: float, memory_bytes: int | None = None) -> dict[str, Any]:
    """Run the sweep at ``path`` in a child process limited to ``timeout_s`` and ``memory_bytes``; its figures, or
    ``{"error": ...}``."""
    from stratasim.bench.collectives import run_child

    return run_child("stratasim.bench.sweep_runs", json.dumps({"path": path}), timeout_s, memory_bytes)


if __name__ == "__main__":
    _child(sys.argv[1])
