"""Fidelity mixed per dimension: legs handed between backends dimension by dimension, exact where the
backends agree, slower where a congested dimension queues, and identical in-process and remote."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.kernel.errors import ConfigError, TopologyError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.mixed import MixedNetwork
from stratasim.study.run import run_study
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import network_pb2
from tests.system_layer.helpers import RING, SWITCH, collective_graph, topology

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
B, ALPHA = 50 * 10**9, 500_000


def mixed_topology(*backends: str) -> network_pb2.Topology:
    topo = topology((RING, 4, B, ALPHA), (SWITCH, 4, B // 2, 2 * ALPHA))
    for dim, name in zip(topo.dimensions, backends):
        dim.backend = name
    return topo


def deliveries(
    network: object, topo: network_pb2.Topology, sends: list[tuple[int, int, int, int]]
) -> list[tuple[int, int]]:
    """(id, arrival) of ``sends`` (src, dst, bytes, send time), advancing window by window until all arrived."""
    assert isinstance(network, (MixedNetwork, AnalyticalNetwork))
    network.configure(topo)
    batch = network_pb2.SendBatch(
        id=list(range(len(sends))),
        src=[s[0] for s in sends],
        dst=[s[1] for s in sends],
        bytes=[s[2] for s in sends],
        send_time_ps=[s[3] for s in sends],
    )
    network.inject(batch)
    arrived: list[tuple[int, int]] = []
    while len(arrived) < len(sends):
        result = network.advance(-1)
        arrived += list(zip(result.deliveries.id, result.deliveries.time_ps))
    return sorted(arrived)


def test_one_backend_everywhere_is_that_backend() -> None:
    sends = [(0, 15, 1 << 20, 0), (3, 4, 4096, 10), (5, 6, 1 << 16, 10), (12, 1, 100, 3_000_000)]
    expected = deliveries(AnalyticalNetwork(), mixed_topology(), sends)
    assert deliveries(MixedNetwork(), mixed_topology("analytical", "analytical"), sends) == expected


def test_a_message_crossing_both_dimensions_pays_each_leg_in_turn() -> None:
    # Zero load: the congestion-aware ring leg takes what the analytical one does, so the total is unchanged.
    sends = [(0, 15, 1 << 20, 0)]
    expected = deliveries(AnalyticalNetwork(), mixed_topology(), sends)
    assert deliveries(MixedNetwork(), mixed_topology("congestion_aware", "analytical"), sends) == expected


def test_a_congested_dimension_queues_and_the_other_does_not() -> None:
    # Four messages leave NPU 0 at once for NPU 1 (the same ring link): congestion-aware serialises them there.
    sends = [(0, 1, 1 << 20, 0)] * 4
    free = deliveries(MixedNetwork(), mixed_topology("analytical", "congestion_aware"), sends)
    queued = deliveries(MixedNetwork(), mixed_topology("congestion_aware", "analytical"), sends)
    assert len({t for _, t in free}) == 1
    serialisation = -(-(1 << 20) * 10**12 // B)
    assert [t for _, t in queued] == [free[0][1] + i * serialisation for i in range(4)]


def test_a_study_mixes_fidelity_in_process_and_remote_alike() -> None:
    study = EXAMPLES / "quickstart.yaml"
    local = run_study(load_study(study, ["network.topology.0.backend=congestion_aware"]))
    remote = run_study(load_study(study, ["network.topology.0.backend=congestion_aware", "network.spawn=true"]))
    assert local.backends["network"] == "mixed (in-process)" and "mixed @" in remote.backends["network"]
    local, remote = (
        replace(report, wall_seconds=0.0, backends={}, result=replace(report.result, events_processed=0))
        for report in (local, remote)
    )
    assert local == remote
    plain = run_study(load_study(study))
    assert local.total_time_ps >= plain.total_time_ps and local.result.links  # the ring's links are counted


def test_collectives_on_mixed_analytical_dimensions_match_the_analytical_network() -> None:
    graphs = [collective_graph("all_reduce", 1 << 24)] * 16
    plain = simulate(graphs, AnalyticalNetwork(), mixed_topology(), SystemOptions(splits=2))
    mixed = simulate(graphs, MixedNetwork(), mixed_topology("analytical", "analytical"), SystemOptions(splits=2))
    assert mixed.total_time_ps == plain.total_time_ps and mixed.per_npu == plain.per_npu


def test_bad_mixes_are_named() -> None:
    with pytest.raises(ConfigError) as caught:
        load_study(EXAMPLES / "quickstart.yaml", ["network.topology.1.backend=warp_drive"])
    assert "network.topology.1.backend: no network backend named 'warp_drive'" in str(caught.value)
    with pytest.raises(TopologyError, match="cannot be mixed itself"):
        MixedNetwork().configure(mixed_topology("mixed", "analytical"))
