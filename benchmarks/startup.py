"""Start-up: ``stratasim --help``, ``--version``, ``check`` and ``run`` of the quickstart, and ``schema``, each as a
whole process (interpreter, imports, the command), K runs each: the fastest and the median wall time, and the
fastest user + system CPU time, which a shared machine inflates less than wall time.

    python benchmarks/startup.py                  # 7 runs of each command
    python benchmarks/startup.py --repeat 15
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "examples" / "quickstart.yaml")
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "--help": (["--help"], 0.3),
    "--version": (["--version"], None),
    "check quickstart": (["check", QUICKSTART], None),
    "run quickstart": (["run", QUICKSTART], 0.6),
    "schema": (["schema"], None),
}
"""Each command timed: its arguments and issue 32's target in seconds on the reference machine, if it has one."""


def timed(argv: list[str]) -> tuple[float, float]:
    """One run of ``python -m stratasim ARGV`` (which must succeed): its wall seconds and its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "stratasim", *argv], capture_output=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, metavar="K")
    args = parser.parse_args()
    print(f"{'command':<18}{'wall min s':>11}{'wall median s':>15}{'cpu min s':>11}  target (reference machine)")
    for name, (argv, target) in COMMANDS.items():
        runs = [timed(argv) for _ in range(args.repeat)]
        walls = [wall for wall, _ in runs]
        line = f"{name:<18}{min(walls):>11.3f}{statistics.median(walls):>15.3f}{min(cpu for _, cpu in runs):>11.3f}"
        print(line + (f"  <= {target} s" if target is not None else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
