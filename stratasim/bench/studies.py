"""``stratasim bench --study FILE...``: wall time and peak memory of whole studies (a Megatron iteration, say).

Each study runs in a fresh child process (``python -m stratasim.bench.studies RUN_JSON``: the file, its ``--set``
overrides, and whether to write its outputs as ``stratasim run --out`` does) so its peak resident memory is its own.
The table gives the wall time of the whole run (building the workload's graphs included, and writing the outputs
when asked) and of the simulation alone, how many NPUs were simulated one by one, and the events processed.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stratasim.kernel.units import format_bytes, format_time_ps

if TYPE_CHECKING:
    from stratasim.study.budget import Budget

__all__ = ["run_study_file", "format_study_table"]


def _child(run_json: str) -> None:
    """Body of the child process: run one study file and print its figures as JSON."""
    from stratasim.config.study_file import load_study
    from stratasim.kernel.errors import StrataSimError
    from stratasim.study.budget import Budget
    from stratasim.study.run import run_study

    run = json.loads(run_json)
    started = time.perf_counter()
    try:
        budget = Budget(run["max_memory"], run["max_events"])
        report = run_study(load_study(run["path"], run["overrides"]), record_trace=run["out"], budget=budget)
        if run["out"]:  # written where nobody keeps it: the cost of writing is what is measured
            with tempfile.TemporaryDirectory(prefix="stratasim-bench-") as out:
                report.write(out)
    except StrataSimError as exc:
        print(json.dumps({"error": " ".join(line.strip() for line in str(exc).splitlines())}))
        return
    total = time.perf_counter() - started
    print(
        json.dumps(
            {
                "npus": report.result.npus,
                "simulated_npus": report.simulated_npus,
                "total_time_ps": report.result.total_time_ps,
                "wall_seconds": total,
                "simulation_seconds": report.wall_seconds,
                "events": report.result.events_processed,
                "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            }
        )
    )


def run_study_file(
    path: str,
    timeout_s: float,
    overrides: Sequence[str] = (),
    *,
    out: bool = False,
    memory_bytes: int | None = None,
    budget: Budget | None = None,
) -> dict[str, Any]:
    """Run the study at ``path`` (with ``--set`` ``overrides``; writing its report and Chrome trace if ``out``) in
    a child process limited to ``timeout_s`` and ``memory_bytes``, and refused beforehand when estimated beyond
    ``budget`` (default: the default budget); its figures, or ``{"error": ...}``."""
    from stratasim.bench.collectives import run_child
    from stratasim.study.budget import DEFAULT_BUDGET

    budget = budget or DEFAULT_BUDGET

    run = json.dumps(
        {
            "path": path,
            "overrides": list(overrides),
            "out": out,
            "max_memory": budget.max_memory,
            "max_events": budget.max_events,
        }
    )
    return run_child("stratasim.bench.studies", run, timeout_s, memory_bytes)


def format_study_table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """One row per study: NPUs (simulated one by one), simulated time, wall seconds, events, peak memory."""
    header = (
        f"{'study':<36} {'NPUs':>6} {'sim. NPUs':>9} {'simulated':>12} {'wall s':>8} {'engine s':>9} "
        f"{'events':>12} {'peak mem':>10}"
    )
    lines = [header, "-" * len(header)]
    for path, fig in rows:
        if "error" in fig:
            lines.append(f"{path:<36} {fig['error']}")
            continue
        lines.append(
            f"{path:<36} {fig['npus']:>6} {fig['simulated_npus']:>9} {format_time_ps(fig['total_time_ps']):>12} "
            f"{fig['wall_seconds']:>8.2f} {fig['simulation_seconds']:>9.2f} {fig['events']:>12,} "
            f"{format_bytes(fig['peak_bytes']):>10}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    _child(sys.argv[1])
