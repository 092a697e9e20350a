"""Flit-level network throughput: wall time and flit-hops per second of collective studies on fabrics.

Each case is a collective study (50 GB/s, 500 ns links) simulated with the flit-level network at its default
parameters, next to the analytical network's time for the same study. A flit-hop is one flit crossing one
link; the rate is flit-hops over the wall time of the simulation itself (building the workload excluded).
The packet latency is, over packets, the mean and the 99th percentile (within 1/32, from the histogram the
report's ``packet_latency`` comes from) of the time from their message being sent to the packet's last flit
arriving.

    python benchmarks/flit_level.py            # every case; the last is the 1 MiB all-reduce on an 8x8 torus
    python benchmarks/flit_level.py --quick    # all but that one
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from stratasim import system_layer
from stratasim.config.study_file import Study, parse_study
from stratasim.kernel.units import format_time_ps
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.flit_level import FlitLevelNetwork
from stratasim.study.run import prepare_workload

LINK = {"bandwidth": "50GB/s", "latency": "500ns"}
CASES: list[tuple[str, dict[str, Any], str, str, str]] = [
    ("torus 4x4", {"kind": "torus", "shape": [4, 4], **LINK}, "all_reduce", "ring", "64KiB"),
    ("fat-tree k=4", {"kind": "fat_tree", "k": 4, **LINK}, "all_to_all", "direct", "64KiB"),
    ("torus 4x4", {"kind": "torus", "shape": [4, 4], **LINK}, "all_reduce", "ring", "1MiB"),
    ("torus 8x8", {"kind": "torus", "shape": [8, 8], **LINK}, "all_reduce", "ring", "1MiB"),
]


def study(topology: dict[str, Any], collective: str, algorithm: str, size: str) -> Study:
    return parse_study(
        {
            "name": "flit-level benchmark",
            "workload": {"kind": "collective", "collective": collective, "size": size},
            "system": {"algorithm": algorithm},
            "network": {"backend": "flit_level", "topology": topology},
        },
        "benchmarks/flit_level.py",
    )


def run(case: Study) -> tuple[int, int, float, int, float, int]:
    """(analytical time, flit-level time, wall seconds, flit-hops, mean and p99 packet latency) of one study."""
    source, npus = prepare_workload(case)
    graphs = source.graphs(npus)
    topology, options = case.topology_proto(), case.system
    analytical = system_layer.simulate(graphs, AnalyticalNetwork(), topology, options).total_time_ps
    network = FlitLevelNetwork()
    started = time.perf_counter()
    flit = system_layer.simulate(graphs, network, topology, options).total_time_ps
    wall = time.perf_counter() - started
    latency = network.packet_latency
    return analytical, flit, wall, network.flit_hops, latency.mean_ps, latency.percentile_ps(99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="leave out the 1 MiB all-reduce on an 8x8 torus")
    cases = CASES[:-1] if parser.parse_args().quick else CASES
    header = f"{'fabric':<14}{'collective':<12}{'size':>6}{'analytical':>14}{'flit level':>14}"
    header += f"{'wall s':>9}{'flit-hops':>13}{'flit-hops/s':>13}{'packet mean':>14}{'packet p99':>14}"
    print(header)
    print("-" * len(header))
    for name, topology, collective, algorithm, size in cases:
        analytical, flit, wall, hops, mean, p99 = run(study(topology, collective, algorithm, size))
        print(
            f"{name:<14}{collective:<12}{size:>6}{format_time_ps(analytical):>14}{format_time_ps(flit):>14}"
            f"{wall:>9.2f}{hops:>13,}{hops / wall:>13,.0f}{format_time_ps(round(mean)):>14}{format_time_ps(p99):>14}",
            flush=True,
        )


if __name__ == "__main__":
    main()
