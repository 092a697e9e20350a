"""Reproduce PALM's congestion case (its Fig. 7): stacked tasks on a tiled accelerator's mesh, analytical vs
congestion-aware network.

Run ``python examples/paper/palm_congestion.py``: it prints the table that ``docs/validation/palm-congestion.md`` shows.
Each row stacks the first 1..5 tasks of ``examples/palm_congestion.yaml`` (all-reduce, all-to-all, DRAM read,
DRAM write, a second all-reduce), every task of the same size, and gives how much less time the analytical
network reports than the congestion-aware one, as PALM plots it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stratasim.config.study_file import parse_study
from stratasim.kernel.safe_load import YAML_BYTES, parse_yaml, read_text
from stratasim.report.report import Report
from stratasim.study.run import run_study

EXAMPLE = Path(__file__).resolve().parents[1] / "palm_congestion.yaml"
SIZES = ("64KiB", "256KiB", "1MiB", "2MiB", "4MiB", "8MiB")
STACKS = (1, 2, 3, 4, 5)
BACKENDS = ("analytical", "congestion_aware")


def run_tasks(tasks: list[dict[str, Any]], backend: str) -> Report:
    """The example with its tasks replaced by ``tasks`` (``{kind:, size:}`` mappings), on the network ``backend``."""
    study: dict[str, Any] = parse_yaml(read_text(EXAMPLE, YAML_BYTES, "study"), str(EXAMPLE))
    study["workload"]["tasks"] = tasks
    study["network"]["backend"] = backend
    return run_study(parse_study(study, str(EXAMPLE)))


def run_stack(tasks: int, size: str, backend: str) -> Report:
    """The example's first ``tasks`` tasks, each of ``size``, on the network ``backend``."""
    study: dict[str, Any] = parse_yaml(read_text(EXAMPLE, YAML_BYTES, "study"), str(EXAMPLE))
    return run_tasks([dict(task, size=size) for task in study["workload"]["tasks"][:tasks]], backend)


def stack_times(tasks: int, size: str) -> dict[str, int]:
    """Total time (ps) of the example's first ``tasks`` tasks, each of ``size``, on each network backend."""
    return {backend: run_stack(tasks, size, backend).total_time_ps for backend in BACKENDS}


def analytical_shortfall(times: dict[str, int]) -> float:
    """How much less time the analytical network reports than the congestion-aware one (0.3: 30 % less)."""
    return 1 - times["analytical"] / times["congestion_aware"]


def sweep(sizes: tuple[str, ...] = SIZES, stacks: tuple[int, ...] = STACKS) -> dict[str, dict[int, float]]:
    """The analytical shortfall for every task size and number of stacked tasks."""
    return {size: {tasks: analytical_shortfall(stack_times(tasks, size)) for tasks in stacks} for size in sizes}


def _print(table: dict[str, dict[int, float]]) -> None:
    stacks = list(next(iter(table.values())))
    print("PALM Fig. 7: analytical time below congestion-aware time, by task size and stacked tasks")
    print(f"{'size':>8}" + "".join(f"{f'{tasks} task' + ('s' if tasks > 1 else ''):>10}" for tasks in stacks))
    for size, row in table.items():
        print(f"{size:>8}" + "".join(f"{row[tasks]:>10.1%}" for tasks in stacks))


if __name__ == "__main__":
    _print(sweep())
