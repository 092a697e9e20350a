"""Issue 32's screening rung on the GPT-3 plan sweep: how fast the first-order model prices the 153 plans of
``examples/explore/gpt3_plans_ladder.yaml``, how long the whole ladder takes as a command, and whether it ends on
the plan simulating all 153 finds.

    python benchmarks/sweeps/screening.py [--repeat 10]

The reference is ``tests/optimize/gpt3_plans_simulated.csv``: every plan's simulated iteration, row ``i`` trial
``i`` (``stratasim sweep examples/explore/gpt3_plans.yaml`` gives the same figures to the picosecond). Figures:

- the model's speed: :meth:`~stratasim.optimize.FirstOrderModel.estimate` on the 153 plans, its first call (which
  prices each distinct layer, embedding and head through the compute backend) and the best of ``--repeat`` later
  calls (that pricing cached), wall and CPU seconds;
- the screening rung as a ladder runs it (:func:`~stratasim.explore.screening.screen_trials`: the study parsed,
  the model opened, every plan priced and composed), wall and CPU seconds;
- the whole ladder, ``stratasim sweep ... --json`` in a fresh process on a fresh store (interpreter, imports, the
  generator listing the plans, screening, simulating the 10 kept): wall seconds, the best plan, the recall of the
  simulated top 5 among the ladder's top 5, and the range of ``screen_error``.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LADDER = ROOT / "examples" / "explore" / "gpt3_plans_ladder.yaml"
REFERENCE = ROOT / "tests" / "optimize" / "gpt3_plans_simulated.csv"


def _timed(call: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``call``."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def model_speed(repeat: int) -> dict[str, float]:
    """The first-order model on the 153 plans: its first call and the best of ``repeat`` later ones; the screening
    rung as the ladder runs it."""
    from stratasim.config.study_file import load_study
    from stratasim.explore import load_sweep
    from stratasim.explore.screening import screen_trials
    from stratasim.explore.space import expand, resolve
    from stratasim.optimize import FirstOrderModel

    sweep = load_sweep(LADDER)
    plans = expand(sweep, resolve(sweep))
    with FirstOrderModel(load_study(ROOT / "examples" / "gpt3_175b.yaml")) as model:
        first = _timed(lambda: model.estimate(plans))
        later = [_timed(lambda: model.estimate(plans)) for _ in range(repeat)]
    rung = min(
        (
            _timed(lambda: screen_trials(sweep, list(enumerate(plans)), ["total_time_ns"], 0, "screen"))
            for _ in range(3)
        ),
        key=lambda times: times[0],
    )
    return {
        "plans": len(plans),
        "first_wall": first[0],
        "first_cpu": first[1],
        "warm_wall": min(wall for wall, _ in later),
        "warm_cpu": min(cpu for _, cpu in later),
        "rung_wall": rung[0],
        "rung_cpu": rung[1],
    }


def ladder() -> dict[str, Any]:
    """The whole ladder as a command on a fresh store: wall seconds and its answer, against the reference."""
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "stratasim", "sweep", str(LADDER), "--db", f"{folder}/s.db", "--json"]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
    document = json.loads(done.stdout)
    with REFERENCE.open() as stream:
        rows = list(csv.DictReader(line for line in stream if not line.startswith("#")))
    simulated = sorted(range(len(rows)), key=lambda i: (int(rows[i]["total_time_ps"]), i))
    found = sorted(document["trials"], key=lambda t: (t["metrics"]["total_time_ps"], t["number"]))
    low, high = document["levels"][1]["screen_error"]
    return {
        "wall": wall,
        "best": found[0]["number"],
        "reference_best": simulated[0],
        "recall": len({t["number"] for t in found[:5]} & set(simulated[:5])) / 5,
        "error": (low, high),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="later calls of the model timed (the best is shown)")
    repeat = parser.parse_args().repeat
    speed = model_speed(repeat)
    plans = speed["plans"]
    print(f"first-order model, {plans} plans        wall s    CPU s   plans/s (wall)   plans/s (CPU)")
    for name, key in (
        ("first call (prices the layers)", "first"),
        (f"later calls (best of {repeat})", "warm"),
        ("screening rung (screen_trials)", "rung"),
    ):
        wall, cpu = speed[f"{key}_wall"], speed[f"{key}_cpu"]
        print(f"  {name:<34} {wall:>8.3f} {cpu:>8.3f} {plans / wall:>16,.0f} {plans / cpu:>15,.0f}")
    result = ladder()
    low, high = result["error"]
    print(
        f"ladder (stratasim sweep, whole command): {result['wall']:.1f} s; best #{result['best']} "
        f"(simulating all {plans}: #{result['reference_best']}); top-5 recall {result['recall']:.1f}; "
        f"screen_error {low:+.2e} to {high:+.2e}"
    )


if __name__ == "__main__":
    main()
