"""Copy the repository files ``stratasim bench --suite`` runs into ``stratasim/bench/data/`` (package data, so that
the suite runs from an installed package), each at its path in the repository::

    python tools/sync_bench_data.py

The files are every study and sweep file of the suite (a sweep's base study is a study of the suite too) and the
peers' cases under ``benchmarks/peers/``; tests/bench checks
that the package holds exactly these copies, each identical to its original. Run this after changing one.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "stratasim" / "bench" / "data"
PEERS = "benchmarks/peers"


def originals() -> list[str]:
    """The repository paths of the files the suite runs: its study files and every file of the peers' cases."""
    sys.path.insert(0, str(ROOT))
    from stratasim.bench.suite import SUITE, StudyRun, SweepRun

    studies = {case.run.path for case in SUITE if isinstance(case.run, StudyRun | SweepRun)}
    peers = {str(path.relative_to(ROOT)) for path in (ROOT / PEERS).rglob("*") if path.is_file()}
    return sorted(studies | {path for path in peers if not path.endswith(".md")})


def main() -> None:
    shutil.rmtree(DATA, ignore_errors=True)
    for original in originals():
        target = DATA / original
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / original, target)
        print(f"{original} -> {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
