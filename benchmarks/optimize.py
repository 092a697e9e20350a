"""The optimiser's speed: ``stratasim optimize`` on a plan space, the whole command timed (interpreter, imports,
listing and estimating the plans, the MILP, the inter-chip checks of the sharding, simulating the chosen plan).

    python benchmarks/optimize.py                                  # GPT-3 175B on 1024 A100s, 3 runs
    python benchmarks/optimize.py FILE ... --repeat 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "examples" / "explore" / "gpt3_plans.yaml"]
TARGET_S = 60.0
"""Issue 28: a proved optimum of GPT-3 175B's plan space in under 60 s on this machine."""


def timed(path: Path) -> tuple[float, dict[str, object]]:
    """One run of ``stratasim optimize PATH --json``: its wall seconds and its result."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "stratasim", "optimize", str(path), "--json"], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - started, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=DEFAULT, metavar="FILE")
    parser.add_argument("--repeat", type=int, default=3, metavar="K")
    args = parser.parse_args()
    print(f"{'file':<16}{'plans':>7}{'status':>9}{'gap':>6}{'solve s':>9}{'estimate s':>12}{'simulated s':>13}"
          f"{'wall s':>15}  target")  # fmt: skip
    met = True
    for path in args.files:
        runs = [timed(path) for _ in range(args.repeat)]
        walls = sorted(wall for wall, _ in runs)
        result = runs[0][1]
        solve = max(float(r["solver_seconds"]) for _, r in runs)  # type: ignore[arg-type]
        met &= walls[-1] < TARGET_S
        print(
            f"{path.stem:<16}{result['candidates']:>7}{result['status']:>9}{result['gap']:>6}{solve:>9.3f}"
            f"{float(result['estimate_ns']) / 1e9:>12.4f}{float(result['total_time_ns'] or 0) / 1e9:>13.4f}"  # type: ignore[arg-type]
            f"{walls[0]:>7.2f}–{walls[-1]:<7.2f}  < {TARGET_S:g} s {'met' if walls[-1] < TARGET_S else 'not met'}"
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
