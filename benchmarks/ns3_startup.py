"""ns-3 start-up: wall time from ``configure`` to the first delivery of the ns3 network backend (extra ``ns3``).

Each start is a fresh ``Ns3Network`` on a ring of 8 NPUs (100 GB/s, 1 us links) carrying one 1 MiB message: the
worker process starting, binding to the network and building it, and ns-3 carrying the message (well under 0.1 s
of it). Three kinds of start, each in a cache directory of its own (``XDG_CACHE_HOME``, so the user's cache is
left alone):

- ``first``: an empty cache; the network is compiled into it (the first start after installing, or after the
  network's source, ns-3 or the compiler changed);
- ``later``: the cache filled by the start before;
- ``no cache``: the cache unusable (a file where its directory should be), so cppyy compiles the network at each
  start (what a machine without a C++ compiler gets).

    python benchmarks/ns3_startup.py               # 3 starts of each kind
    python benchmarks/ns3_startup.py --repeat 5
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

from stratasim.adapters.ns3 import Ns3Network
from stratasim.v1 import network_pb2

RING = network_pb2.Dimension(kind=network_pb2.Dimension.RING, size=8, bandwidth_bytes_per_s=100e9, latency_ps=1_000_000)


def start_seconds() -> float:
    """One start: configure, send 1 MiB from NPU 0 to NPU 3, wait for it; the wall time, in seconds."""
    began = time.perf_counter()
    network = Ns3Network()
    try:
        network.configure(network_pb2.Topology(dimensions=[RING]))
        network.inject(network_pb2.SendBatch(id=[1], src=[0], dst=[3], bytes=[1 << 20], send_time_ps=[10]))
        delivered = network.advance(10**12).deliveries
    finally:
        network.close()
    assert list(delivered.id) == [1] and list(delivered.time_ps) == [13_727_650], delivered
    return time.perf_counter() - began


def measure(repeat: int) -> dict[str, list[float]]:
    """``repeat`` starts of each kind, the kinds interleaved so load changes spread over all of them."""
    times: dict[str, list[float]] = {"first": [], "later": [], "no cache": []}
    with tempfile.TemporaryDirectory(prefix="ns3-startup-") as scratch:
        blocked = Path(scratch) / "a-file"
        blocked.write_text("not a directory: the cache cannot be written")
        for run in range(repeat):
            os.environ["XDG_CACHE_HOME"] = str(Path(scratch) / f"cache-{run}")
            times["first"].append(start_seconds())
            times["later"].append(start_seconds())
            os.environ["XDG_CACHE_HOME"] = str(blocked)
            times["no cache"].append(start_seconds())
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="starts of each kind (default 3)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the no-cache starts' warning, expected here
    before = os.getloadavg()[0]
    times = measure(args.repeat)
    print(f"load average {before:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"{'start':10} {'runs':>4}  wall s (min-max)")
    for kind, seconds in times.items():
        print(f"{kind:10} {len(seconds):4}  {min(seconds):.2f}-{max(seconds):.2f}")


if __name__ == "__main__":
    main()
