"""Sweep throughput: trials per second of ``stratasim sweep`` on local worker processes, whole command timed
(interpreter, imports, expanding the space, the store's commits), a fresh store each run.

    python benchmarks/sweeps.py                                   # the 500-point collective sweep, 1 and 2 workers
    python benchmarks/sweeps.py FILE ... --workers 2 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = [HERE / "sweeps" / "collectives500.yaml"]


def timed(sweep: Path, workers: int) -> tuple[float, int, int]:
    """One run of ``stratasim sweep`` on a fresh store: wall seconds, trials run and trials failed."""
    with tempfile.TemporaryDirectory() as folder:
        command = [
            sys.executable,
            "-m",
            "stratasim",
            "sweep",
            str(sweep),
            "--db",
            f"{folder}/s.db",
            "--json",
            "--workers",
            str(workers),
        ]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        elapsed = time.perf_counter() - started
    trials = json.loads(done.stdout)["trials"]
    return elapsed, len(trials), sum(trial["status"] != "done" for trial in trials)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="*", type=Path, default=DEFAULT, metavar="FILE")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], metavar="N")
    parser.add_argument("--repeat", type=int, default=3, metavar="K")
    args = parser.parse_args()
    print(f"{'sweep':<28}{'workers':>8}{'trials':>8}{'failed':>8}{'wall s':>16}{'trials/s':>16}")
    for sweep in args.sweeps:
        for workers in args.workers:
            runs = [timed(sweep, workers) for _ in range(args.repeat)]
            walls = sorted(wall for wall, _, _ in runs)
            trials, failed = runs[0][1], runs[0][2]
            print(
                f"{sweep.stem:<28}{workers:>8}{trials:>8}{failed:>8}{f'{walls[0]:.2f}–{walls[-1]:.2f}':>16}"
                f"{f'{trials / walls[-1]:.3g}–{trials / walls[0]:.3g}':>16}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
