"""The analytical network's delays: hops x latency + ceil(bytes * 1e12 / bandwidth) per dimension crossed."""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import BackendError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.v1 import network_pb2

RING = network_pb2.Dimension.RING
FC = network_pb2.Dimension.FULLY_CONNECTED
SWITCH = network_pb2.Dimension.SWITCH


def network(*dims: tuple[int, int, float, int]) -> AnalyticalNetwork:
    net = AnalyticalNetwork()
    net.configure(
        network_pb2.Topology(
            dimensions=[
                network_pb2.Dimension(kind=k, size=s, bandwidth_bytes_per_s=b, latency_ps=lat) for k, s, b, lat in dims
            ]
        )
    )
    return net


def deliver(net: AnalyticalNetwork, *messages: tuple[int, int, int, int]) -> list[tuple[int, int]]:
    """Send (src, dst, bytes, time) messages with ids 0..; return (id, arrival) in delivery order."""
    batch = network_pb2.SendBatch()
    for i, (src, dst, size, time_ps) in enumerate(messages):
        batch.id.append(i)
        batch.src.append(src)
        batch.dst.append(dst)
        batch.bytes.append(size)
        batch.send_time_ps.append(time_ps)
    net.inject(batch)
    result = net.advance(10**15)
    return list(zip(result.deliveries.id, result.deliveries.time_ps))


def test_ring_takes_the_shorter_way_round() -> None:
    net = network((RING, 8, 1e9, 100))
    # 1000 B at 1 GB/s = 1 us = 10^6 ps; 0->3 is 3 hops, 0->6 is 2 hops the other way.
    assert deliver(net, (0, 3, 1000, 0), (0, 6, 1000, 0)) == [(1, 2 * 100 + 10**6), (0, 3 * 100 + 10**6)]


def test_switch_pays_latency_twice_and_serialisation_once() -> None:
    net = network((SWITCH, 4, 1e9, 100))
    assert deliver(net, (0, 3, 1000, 50)) == [(0, 50 + 200 + 10**6)]


def test_serialisation_rounds_up_to_whole_picoseconds() -> None:
    net = network((FC, 4, 3e9, 0))
    assert deliver(net, (0, 1, 1, 0)) == [(0, 334)]  # 1e12 / 3e9 = 333.3 ps


def test_messages_cross_dimensions_one_after_another() -> None:
    net = network((RING, 4, 1e9, 100), (SWITCH, 2, 2e9, 1000))
    # NPU 1 = (1, 0) to NPU 6 = (2, 1): one ring hop then the switch.
    assert deliver(net, (1, 6, 1000, 0)) == [(0, (100 + 10**6) + (2000 + 500_000))]


def test_lookahead_is_the_least_possible_delay() -> None:
    net = AnalyticalNetwork()
    info = net.configure(
        network_pb2.Topology(
            dimensions=[
                network_pb2.Dimension(kind=SWITCH, size=4, bandwidth_bytes_per_s=1e9, latency_ps=300),
                network_pb2.Dimension(kind=RING, size=1, bandwidth_bytes_per_s=1.0, latency_ps=0),
                network_pb2.Dimension(kind=FC, size=2, bandwidth_bytes_per_s=1e12, latency_ps=500),
            ]
        )
    )
    assert info.npus == 8
    assert info.lookahead_ps == 500  # FC: one hop of 500 ps for an empty message; the size-1 ring never moves.


def test_an_empty_message_on_zero_latency_links_still_takes_a_picosecond() -> None:
    net = network((FC, 2, 1e9, 0))
    assert deliver(net, (0, 1, 0, 10)) == [(0, 11)]


def test_advance_reports_the_next_event_and_next_window() -> None:
    net = network((RING, 4, 1e9, 100))
    batch = network_pb2.SendBatch(id=[7], src=[0], dst=[1], bytes=[1000], send_time_ps=[0])
    net.inject(batch)
    early = net.advance(10)
    assert not early.deliveries.id and early.has_next and early.next_event_ps == 100 + 10**6
    window = net.advance(-1)
    assert list(window.deliveries.id) == [7]
    assert window.window_end_ps == 100 + 10**6 + 100 - 1
    assert not window.has_next


@pytest.mark.parametrize(("src", "dst"), [(0, 0), (0, 4), (9, 1)])
def test_impossible_messages_are_rejected(src: int, dst: int) -> None:
    net = network((RING, 4, 1e9, 100))
    with pytest.raises(BackendError, match="cannot send"):
        net.inject(network_pb2.SendBatch(id=[1], src=[src], dst=[dst], bytes=[1], send_time_ps=[0]))


def test_the_scalar_and_vectorised_delays_agree() -> None:
    import numpy as np

    net = network((RING, 5, 3e9, 700), (SWITCH, 3, 7e9, 1100), (FC, 4, 11e9, 1300))
    rng = np.random.default_rng(7)
    src = rng.integers(0, 60, 500)
    dst = rng.integers(0, 60, 500)
    sizes = rng.integers(0, 1 << 20, 500)
    vectorised = net.delays_ps(src, dst, sizes).tolist()
    assert vectorised == [net.delay_ps(int(s), int(d), int(b)) for s, d, b in zip(src, dst, sizes)]


def test_with_first_dimension_only_a_message_pays_the_first_dimension_its_ends_differ_in() -> None:
    import numpy as np

    dims = [
        network_pb2.Dimension(kind=RING, size=4, bandwidth_bytes_per_s=1e9, latency_ps=100),
        network_pb2.Dimension(kind=SWITCH, size=2, bandwidth_bytes_per_s=2e9, latency_ps=1000),
    ]
    net = AnalyticalNetwork()
    net.configure(network_pb2.Topology(dimensions=dims, first_dimension_only=True))
    # NPU 1 = (1, 0) to 6 = (2, 1): the ring hop only (ASTRA-sim 2.x); 0 -> 4 = (0, 1) differs in the switch alone.
    assert deliver(net, (1, 6, 1000, 0), (0, 4, 1000, 0)) == [(1, 2000 + 500_000), (0, 100 + 10**6)]
    src, dst, sizes = np.array([1, 0, 3]), np.array([6, 4, 5]), np.array([1000, 1000, 7])
    assert net.delays_ps(src, dst, sizes).tolist() == [
        net.delay_ps(int(s), int(d), int(b)) for s, d, b in zip(src, dst, sizes)
    ]
