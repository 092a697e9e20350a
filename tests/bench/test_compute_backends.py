"""``benchmarks/compute_backends.py`` prices one GPT-3 175B layer per backend and reports the cache hit rate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compute_backends.py"


def test_roofline_row_counts_the_layer_operators_and_hits() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--backend", "roofline", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (row,) = json.loads(done.stdout)
    # Forward, recomputed forward and backward of one layer repeat some operators; the cache serves the repeats.
    assert row["backend"] == "roofline" and row["operators"] > row["distinct"] > 0
    assert row["hit_rate"] == 1 - row["distinct"] / row["operators"]
    assert row["ops_per_second"] > 0
