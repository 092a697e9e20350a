"""Links of their own speed and link failures (``Topology.link_changes``) cross the wire unchanged: each backend
gives the same deliveries and counters in process and through a gRPC server, and refuses what it does not model
with the same message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.v1 import network_pb2
from tests.contracts.test_network_contract import MODES, drain, sends, topology

# A slower ring link from the start, a switch up-link halving at 1 us, a ring cable failing at 2 us.
CHANGES = (
    network_pb2.LinkChange(link="dim 0: 1->2", bandwidth_bytes_per_s=10e9, latency_ps=700_000),
    network_pb2.LinkChange(link="dim 1: 3->switch", at_ps=1_000_000, bandwidth_fraction=0.5),
    network_pb2.LinkChange(link="dim 0: 2<->3", at_ps=2_000_000, fail=True),
)


def changed(*changes: network_pb2.LinkChange) -> network_pb2.Topology:
    result = topology()
    result.link_changes.extend(changes)
    return result


def run(network: NetworkBackend, asked: network_pb2.Topology) -> list[Any]:
    """Configure, send a mix before and after the changes, drain; what came back and the counters."""
    info = network.configure(asked)
    network.inject(sends(30, 0, 0))
    network.inject(sends(10, 1_000, 3_000_000))
    return [info, *drain(network), network.counters()]


def test_the_congestion_aware_network_gives_the_same_in_process_and_remote(
    open_backend: Callable[..., Any],
) -> None:
    local, remote = (run(open_backend("network", "congestion_aware", mode), changed(*CHANGES)) for mode in MODES)
    assert remote == local
    plain = run(open_backend("network", "congestion_aware", "in-process"), topology())
    assert local[-1] != plain[-1]  # the changes changed what the links carried
    assert "dim 0: 2->3" in local[-1].link  # it carried messages before it failed


def test_the_analytical_network_prices_static_speeds_the_same_in_process_and_remote(
    open_backend: Callable[..., Any],
) -> None:
    local, remote = (run(open_backend("network", "analytical", mode), changed(CHANGES[0])) for mode in MODES)
    assert remote == local and not local[0].stateless


def test_the_flit_level_network_takes_static_speeds_the_same_in_process_and_remote(
    open_backend: Callable[..., Any],
) -> None:
    local, remote = (run(open_backend("network", "flit_level", mode), changed(CHANGES[0])) for mode in MODES)
    assert remote == local
    assert local[-1] != run(open_backend("network", "flit_level", "in-process"), topology())[-1]


def test_the_flit_level_network_applies_later_changes_the_same_in_process_and_remote(
    open_backend: Callable[..., Any],
) -> None:
    back = network_pb2.LinkChange(link="dim 0: 2<->3", at_ps=2_500_000, restore=True)
    local, remote = (run(open_backend("network", "flit_level", mode), changed(*CHANGES, back)) for mode in MODES)
    assert remote == local
    assert local[-1] != run(open_backend("network", "flit_level", "in-process"), changed(CHANGES[0]))[-1]


@pytest.mark.adapters
def test_ns3_applies_speeds_failures_and_restores_the_same_in_process_and_remote(
    open_backend: Callable[..., Any],
) -> None:
    """ns-3 takes every change but a link's own latency: the slower ring link without CHANGES[0]'s latency."""
    slower = network_pb2.LinkChange(link="dim 0: 1->2", bandwidth_bytes_per_s=10e9)
    back = network_pb2.LinkChange(link="dim 0: 2<->3", at_ps=2_500_000, restore=True)
    asked = changed(slower, *CHANGES[1:], back)
    local, remote = (run(open_backend("network", "ns3", mode), asked) for mode in MODES)
    assert remote == local
    assert local[-1] != run(open_backend("network", "ns3", "in-process"), topology())[-1]


@pytest.mark.parametrize("mode", MODES)
def test_the_analytical_network_refuses_later_changes_the_same_way(mode: str, open_backend: Callable[..., Any]) -> None:
    network = open_backend("network", "analytical", mode)
    with pytest.raises(TopologyError, match=r"^link_changes: link dim 1: 3->switch changes at 1 us: the analytical"):
        network.configure(changed(*CHANGES[:2]))


@pytest.mark.parametrize("mode", MODES)
def test_a_message_left_without_a_route_fails_the_same_way(mode: str, open_backend: Callable[..., Any]) -> None:
    cut = changed(*(network_pb2.LinkChange(link=f"dim 0: {a}<->{a + 1}", at_ps=1, fail=True) for a in (0, 2)))
    network = open_backend("network", "congestion_aware", mode)
    network.configure(cut)
    network.inject(network_pb2.SendBatch(id=[7], src=[0], dst=[2], bytes=[64], send_time_ps=[10]))
    with pytest.raises(BackendError, match=r"^link dim 0: 0->1 failed at 1 ps; link dim 0: 3->2 failed at 1 ps; NPU 0"):
        drain(network)


@pytest.mark.parametrize("mode", MODES)
def test_a_link_that_does_not_exist_is_refused_the_same_way(mode: str, open_backend: Callable[..., Any]) -> None:
    network = open_backend("network", "congestion_aware", mode)
    with pytest.raises(TopologyError, match=r"no link named 'dim 0: 1->3'.*did you mean"):
        network.configure(changed(network_pb2.LinkChange(link="dim 0: 1->3", fail=True)))
