"""The network layer's benchmark: the congestion-aware network at 1024 NPUs against ASTRA-sim's congestion-aware
backend, and the flit-level network's throughput on the 1 MiB all-reduce of an 8x8 torus.

Each congestion-aware case is a ``stratasim bench`` case (its own child process, every NPU simulated: the
network's delays depend on traffic): a 1 GiB collective over 1024 NPUs on one dimension of 50 GB/s, 500 ns
links — a ring all-reduce on a ring, a direct all-to-all through a switch. The ASTRA-sim column is its
congestion-aware backend's wall time for the same collective on this machine class. The flit-level case is
the last row of ``benchmarks/flit_level.py``: wall time of the simulation and flit-hops (a flit crossing a
link) per second, against the issue's aim of 30 s.

    python benchmarks/network.py              # all three cases
    python benchmarks/network.py --skip-all-to-all
"""

from __future__ import annotations

import argparse
from typing import Any

from flit_level import CASES as FLIT_CASES
from flit_level import run, study

from stratasim.bench.collectives import BenchCase, run_case
from stratasim.kernel.units import format_bytes, format_time_ps

GIB = 1 << 30
CONGESTION_AWARE: list[tuple[str, BenchCase, float]] = [
    (
        "CA ring all-reduce, 1024 NPUs, 1 GiB",
        BenchCase("all_reduce", GIB, (1024,), False, backend="congestion_aware"),
        9.0,
    ),
    (
        "CA switch all-to-all, 1024 NPUs, 1 GiB",
        BenchCase("all_to_all", GIB, (1024,), False, backend="congestion_aware", kind="switch", algorithm="direct"),
        79.0,
    ),
]
"""(name, case, ASTRA-sim's congestion-aware wall seconds on this machine class)."""
FLIT_AIM_S = 30.0


def _header() -> list[str]:
    header = (
        f"{'case':<44}{'simulated':>13}{'wall s':>9}{'ASTRA-sim s':>13}{'speed-up':>10}{'events':>12}"
        f"{'peak mem':>11}{'flit-hops':>12}{'flit-hops/s':>13}"
    )
    return [header, "-" * len(header)]


def _ca_row(name: str, figures: dict[str, Any], astra_s: float) -> str:
    if "error" in figures:
        return f"{name:<44}{figures['error']}"
    wall = figures["wall_seconds"]
    return (
        f"{name:<44}{format_time_ps(figures['total_time_ps']):>13}{wall:>9.2f}{astra_s:>13.0f}"
        f"{astra_s / wall:>9.2f}x{figures['events']:>12,}{format_bytes(figures['peak_bytes']):>11}"
    )


def _flit_row() -> str:
    name, topology, collective, algorithm, size = FLIT_CASES[-1]
    _, simulated, wall, hops, _, _ = run(study(topology, collective, algorithm, size))
    label = f"flit-level all-reduce, {name}, {size}"
    return (
        f"{label:<44}{format_time_ps(simulated):>13}{wall:>9.2f}{'aim < ' + str(int(FLIT_AIM_S)):>13}"
        f"{FLIT_AIM_S / wall:>9.2f}x{'':>12}{'':>11}{hops:>12,}{hops / wall:>13,.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-all-to-all", action="store_true", help="leave out the switch all-to-all")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per case (default %(default)s)")
    args = parser.parse_args()
    print("\n".join(_header()), flush=True)
    for name, case, astra_s in CONGESTION_AWARE:
        if args.skip_all_to_all and case.collective == "all_to_all":
            continue
        print(_ca_row(name, run_case(case, args.timeout), astra_s), flush=True)
    print(_flit_row(), flush=True)


if __name__ == "__main__":
    main()
