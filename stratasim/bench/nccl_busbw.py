"""nccl-tests' table from a study: each size's time, algorithm bandwidth and bus bandwidth, and NCCL's choice.

nccl-tests (``doc/PERFORMANCE.md``) reports ``algbw = S / t`` and ``busbw = algbw x 2(n - 1)/n`` for an all-reduce,
``algbw x (n - 1)/n`` for an all-gather and a reduce-scatter (``S`` the whole buffer, an all-gather's output).
:func:`busbw_rows` runs the study once per size with ``workload.collective`` and ``workload.size`` set, and names
the algorithm, protocol and channels ``system.algorithm: nccl`` picked on the innermost dimension (on the whole
communicator across nodes under ``system.nccl.multi_node``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stratasim.config.study_file import load_study
from stratasim.kernel.grid import Grid
from stratasim.study.run import run_study
from stratasim.system_layer.collectives.groups import phases_of
from stratasim.system_layer.collectives.nccl import nccl_choice
from stratasim.system_layer.collectives.nccl_multi_node import multi_node_choice, multi_node_of
from stratasim.system_layer.collectives.nccl_tuning import Choice
from stratasim.system_layer.nccl_options import NcclOptions

__all__ = ["BusBandwidth", "busbw_rows", "bus_factor", "format_rows"]


@dataclass(frozen=True)
class BusBandwidth:
    """One row of nccl-tests' table: ``size`` bytes took ``time_ps``; ``choice`` is NCCL's pick
    (``ring/ll/16``)."""

    collective: str
    size: int
    time_ps: int
    algbw_gbps: float
    busbw_gbps: float
    choice: str


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' factor from algorithm to bus bandwidth on ``n`` ranks."""
    return 2 * (n - 1) / n if collective == "all_reduce" else (n - 1) / n


def busbw_rows(study: str | Path, collective: str, sizes: Sequence[int]) -> list[BusBandwidth]:
    """The study run at each of ``sizes`` for ``collective``, as nccl-tests rows."""
    rows = []
    for size in sizes:
        loaded = load_study(study, [f"workload.collective={collective}", f"workload.size={size}B"])
        report = run_study(loaded)
        grid = loaded.grid
        choice = _choice(collective, grid, size, loaded.system.nccl)
        algbw = size / (report.total_time_ps / 1e12) / 1e9
        rows.append(
            BusBandwidth(
                collective,
                size,
                report.total_time_ps,
                algbw,
                algbw * bus_factor(collective, grid.npus),
                f"{choice.algorithm}/{choice.protocol}/{choice.channels}",
            )
        )
    return rows


def _choice(collective: str, grid: Grid, size: int, settings: NcclOptions) -> Choice:
    """NCCL's pick for the whole grid: on the multi-node communicator under ``system.nccl.multi_node``, else on the
    innermost dimension."""
    multi = multi_node_of(collective, phases_of(tuple(range(grid.npus)), grid), grid.links, settings)
    if multi:
        return multi_node_choice(collective, multi, size, settings)
    return nccl_choice(collective, grid.links, 0, grid.sizes[0], size, settings)


def format_rows(rows: Sequence[BusBandwidth]) -> str:
    """The rows as nccl-tests prints them (time in us, bandwidths in GB/s), with NCCL's pick."""
    lines = [
        f"{'size (B)':>12} {'time (us)':>12} {'algbw':>9} {'busbw':>9}  {'collective':<15}algorithm/protocol/channels"
    ]
    for row in rows:
        lines.append(
            f"{row.size:>12} {row.time_ps / 1e6:>12.2f} {row.algbw_gbps:>9.2f} {row.busbw_gbps:>9.2f}  "
            f"{row.collective:<15}{row.choice}"
        )
    return "\n".join(lines)
