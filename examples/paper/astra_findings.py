"""Reproduce the qualitative findings of the ASTRA-sim paper (Rashidi et al., ISPASS 2020), Figs. 9 to 11.

Run ``python examples/paper/astra_findings.py``: it prints the tables that ``docs/validation/astra-paper-findings.md``
shows. The paper used Garnet's flit-level network; these runs use the analytical network (Figs. 10 and 11)
and the congestion-aware one (Fig. 9, whose finding turns on link queueing), so they reproduce trends, not
the paper's absolute numbers.
"""

from __future__ import annotations

from typing import Any

from stratasim.config.study_file import parse_study
from stratasim.report.report import Report
from stratasim.study.run import run_study

SIZES = ("64KiB", "256KiB", "1MiB", "4MiB", "16MiB", "64MiB")
FIG10_SHAPES = ((1, 64, 1), (1, 8, 8), (2, 8, 4), (4, 4, 4))


def _study(dims: list[dict[str, Any]], size: str, **system: Any) -> dict[str, Any]:
    return {
        "name": "finding",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": size},
        "system": {"algorithm": "ring", "endpoint_delay": "10ns", **system},
        "network": {"topology": dims},
    }


def _run(study: dict[str, Any]) -> Report:
    return run_study(parse_study(study, "paper"))


def fig9(sizes: tuple[str, ...] = SIZES) -> dict[str, dict[str, float]]:
    """8 NPUs as a 1x8 alltoall (one 25 GB/s link per pair, 7 of each NPU's 8 links used, direct algorithm)
    vs a 1x8x1 torus (four 25 GB/s links to each ring neighbour, bidirectional ring), on the congestion-aware
    network, 16 chunks with two in flight: all-to-all and all-reduce time (us)."""
    table: dict[str, dict[str, float]] = {}
    for size in sizes:
        table[size] = {}
        for collective in ("all_to_all", "all_reduce"):
            for label, kind, bandwidth, algorithm in (
                ("alltoall", "fully_connected", "25GB/s", "direct"),
                ("torus", "ring", "100GB/s", "ring_bidirectional"),
            ):
                dims = [{"kind": kind, "size": 8, "bandwidth": bandwidth, "latency": "200ns"}]
                study = _study(dims, size, splits=16, active_chunks=2, algorithm=algorithm)
                study["workload"]["collective"] = collective
                study["network"]["backend"] = "congestion_aware"
                table[size][f"{collective} {label}"] = _run(study).total_time_ns / 1000
    return table


def fig10(sizes: tuple[str, ...] = SIZES) -> dict[str, dict[tuple[int, ...], float]]:
    """All-reduce time (us) on 64 NPUs as 1-, 2- and 3-D tori with equal links (baseline order).

    Each dimension is a ring of 25 GB/s, 200 ns links, two ring directions (two queues per dimension), 16
    chunks with two in flight per queue.
    """
    table: dict[str, dict[tuple[int, ...], float]] = {}
    for size in sizes:
        table[size] = {}
        for shape in FIG10_SHAPES:
            dims = [{"kind": "ring", "size": n, "bandwidth": "25GB/s", "latency": "200ns"} for n in shape if n > 1]
            report = _run(_study(dims, size, splits=16, queues_per_dim=2, active_chunks=2))
            table[size][shape] = report.total_time_ns / 1000
    return table


def fig11(sizes: tuple[str, ...] = SIZES) -> dict[str, dict[str, float]]:
    """All-reduce time (us) on a 4x4x4 torus, local dimension 1x or 8x the inter-package bandwidth,
    baseline (an all-reduce per dimension) vs enhanced (reduce-scatter local, all-reduce across, all-gather).
    """
    table: dict[str, dict[str, float]] = {}
    for size in sizes:
        table[size] = {}
        for local, label in (("25GB/s", "symmetric"), ("200GB/s", "asymmetric")):
            dims = [{"kind": "ring", "size": 4, "bandwidth": local, "latency": "90ns"}] + [
                {"kind": "ring", "size": 4, "bandwidth": "25GB/s", "latency": "200ns"} for _ in range(2)
            ]
            for order in ("baseline", "local_bw_aware"):
                report = _run(_study(dims, size, splits=16, queues_per_dim=2, collective_optimization=order))
                table[size][f"{label} {'enhanced' if order == 'local_bw_aware' else 'baseline'}"] = (
                    report.total_time_ns / 1000
                )
    return table


def _print(title: str, table: dict[str, dict[Any, float]]) -> None:
    columns = list(next(iter(table.values())))
    names = ["x".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in columns]
    print(title)
    print(f"{'size':>8}" + "".join(f"{name:>22}" for name in names))
    for size, row in table.items():
        print(f"{size:>8}" + "".join(f"{row[c]:>22.1f}" for c in columns))
    print()


if __name__ == "__main__":
    _print("Fig. 9: time (us) on 8 NPUs, alltoall vs 1-D torus, congestion-aware network", fig9())
    _print("Fig. 10: all-reduce time (us) on 64 NPUs, 1-D / 2-D / 3-D torus", fig10())
    _print("Fig. 11: all-reduce time (us) on a 4x4x4 torus, baseline vs enhanced", fig11())
