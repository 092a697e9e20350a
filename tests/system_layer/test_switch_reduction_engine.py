"""The engine's side of a switch that reduces (``Coordinator.reduce``): windowed or priced on the spot, every member's
result waits for the slowest member, and a planned NVLS all-reduce takes NCCL's latency plus its bytes by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.study.run import run_study
from stratasim.system_layer.engine.coordinator import Coordinator
from stratasim.v1 import network_pb2

STUDY = Path(__file__).resolve().parents[2] / "examples" / "nccl" / "allreduce_8xh100.yaml"
N, LATENCY_PS, SENT_PS = 4, 1000, (0, 0, 0, 30_000)  # GPU 3 contributes 30 ns after the others


def _results(network: AnalyticalNetwork | CongestionAwareNetwork, direct: bool) -> dict[int, int]:
    topology = network_pb2.Topology()
    topology.dimensions.add(
        kind=network_pb2.Dimension.SWITCH,
        size=N,
        bandwidth_bytes_per_s=1e9,
        latency_ps=LATENCY_PS,
        in_network_reduction=True,
    )
    info = network.configure(topology)
    coordinator = Coordinator(network, info.lookahead_ps, 500, direct=network if direct else None)
    arrived: dict[int, int] = {}

    def contribute(gpu: int) -> None:
        coordinator.reduce(gpu, "r", N, 0, (2000, 500), lambda _: arrived.setdefault(gpu, coordinator.now), None)

    for gpu, sent in enumerate(SENT_PS):
        coordinator.schedule(sent, contribute, gpu)
    coordinator.run()
    return arrived


@pytest.mark.parametrize(
    ("network", "direct"), [(AnalyticalNetwork, True), (AnalyticalNetwork, False), (CongestionAwareNetwork, False)]
)
def test_every_result_waits_for_the_slowest_member(network: type, direct: bool) -> None:
    # The last contribution leaves at 30 ns: + 2 latencies + 2000 B at 1 GB/s + the 0.5 ns endpoint delay.
    expected = 30_000 + 2 * LATENCY_PS + 2000 * 1000 + 500
    assert _results(network(), direct) == dict.fromkeys(range(N), expected)


def test_an_nvls_all_reduce_takes_nccls_latency_plus_its_bytes_over_the_links() -> None:
    # 64 MiB on 8 x H100: NCCL's NVLS latency (25 us) plus S (n + 1) / n at nvlsEfficiency 0.85 over 370.8 GB/s.
    wire = -(-(64 << 20) * 100 // 85) + -(-(8 << 20) * 100 // 85)
    expected = 25_000_000 + -(-wire * 10**12 // 370_800_000_000)
    assert run_study(load_study(STUDY, ["workload.size=64MiB"])).total_time_ps == expected
