"""Links that change, fail and come back at a time on the flit-level network, against hand-computed times.

With ``B`` = 64 GB/s a 64-byte flit takes ``k`` = 1 ns, and latencies (``ALPHA``), the routers' pipeline ``P`` and
every time below fall on slot starts, so a lone message of ``F`` flits over ``h`` links takes exactly
``h ALPHA + (h + 1) P + (h - 1 + F) k`` (the zero-load formula of :mod:`stratasim.network_layer.flit_level.network`,
``w`` = 0). A link at half speed has flits of ``2k``.
"""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import BackendError
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.network_layer.flit_level import FlitLevelNetwork
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import link, torus
from tests.network_layer.messages import arrivals_at_once, arrivals_stepwise
from tests.network_layer.test_flit_level import ALPHA, DEFAULT, B, K, flits
from tests.system_layer.helpers import RING, topology

P = DEFAULT.pipeline_ps
SIZE = 4096
F = flits(SIZE)
T = 10**9  # 1 ms, a slot start at every speed below


def zero_load(hops: int, flit_ps: int = K, size: int = SIZE) -> int:
    return hops * ALPHA + (hops + 1) * P + (hops - 1 + flits(size)) * flit_ps


def changed(topo: pb.Topology, *changes: pb.LinkChange) -> pb.Topology:
    topo.link_changes.extend(changes)
    return topo


def ring() -> pb.Topology:
    return topology((RING, 8, B, ALPHA))


def arrivals(
    topo: pb.Topology, messages: list[tuple[int, int, int, int]], network: type = FlitLevelNetwork
) -> list[int]:
    """Send (src, dst, bytes, at) in one batch; when each arrives."""
    net = network()
    net.configure(topo)
    return arrivals_at_once(net, messages, 10**13)


def test_a_degraded_link_slows_only_the_traffic_crossing_it_after_its_time() -> None:
    half = pb.LinkChange(link="dim 0: 3->4", at_ps=T, bandwidth_fraction=0.5)
    took = arrivals(changed(ring(), half), [(3, 4, SIZE, 0), (3, 4, SIZE, 2 * T), (5, 6, SIZE, 2 * T)])
    assert took == [zero_load(1), 2 * T + zero_load(1, 2 * K), 2 * T + zero_load(1)]


def test_a_degradation_while_a_message_crosses_slows_its_flits_from_then_on() -> None:
    # One hop: flit i takes the slot [P + i k, P + (i + 1) k). Halved at P + j k, the j flits sent go at k, the
    # F - j left at 2k: the last ends at P + j k + 2 (F - j) k, and arrives ALPHA + P later.
    j = 3
    half = pb.LinkChange(link="dim 0: 3->4", at_ps=P + j * K, bandwidth_fraction=0.5)
    assert arrivals(changed(ring(), half), [(3, 4, SIZE, 0)]) == [ALPHA + 2 * P + (2 * F - j) * K]


def test_a_failed_torus_link_reroutes_around_it() -> None:
    # npu 1 -> npu 2 fails at T: 1 -> 2 sent after goes round by three links, 0 -> 1 is untouched.
    topo = changed(torus(4, 4, links=(link(B, ALPHA),)), pb.LinkChange(link="npu 1<->npu 2", at_ps=T, fail=True))
    net = FlitLevelNetwork()
    net.configure(topo)
    net.inject(
        pb.SendBatch(id=[0, 1, 2], src=[1, 1, 0], dst=[2, 2, 1], bytes=[SIZE] * 3, send_time_ps=[0, 2 * T, 2 * T])
    )
    result = net.advance(10**13)
    assert list(result.deliveries.time_ps) == [zero_load(1), 2 * T + zero_load(1), 2 * T + zero_load(3)]
    assert list(result.deliveries.id) == [0, 2, 1]
    carried = dict(zip(net.counters().link, net.counters().messages))
    assert carried["npu 1->npu 2"] == 1  # the message before the failure only
    assert carried["npu 1->npu 0"] + carried.get("npu 1->npu 5", 0) == 1


def test_a_packet_on_its_way_turns_round_at_the_failed_link() -> None:
    # 0 -> 3 leaves at 0 along 0->1->2->3; 2->3 fails at 1.5 ALPHA, when the head has crossed 1->2 (at 2P + k +
    # ALPHA) but not 2->3: it goes back from 2 the other way round, 2->1->0->7->6->5->4->3, nine links in all,
    # none of them shared with its own body.
    fail = pb.LinkChange(link="dim 0: 2->3", at_ps=ALPHA * 3 // 2, fail=True)
    small = 64
    assert arrivals(changed(ring(), fail), [(0, 3, small, 0)]) == [zero_load(9, size=small)]


def test_a_ring_cut_both_ways_fails_naming_the_links_and_the_time() -> None:
    cuts = [pb.LinkChange(link=f"dim 0: {a}<->{a + 1}", at_ps=T, fail=True) for a in (1, 5)]
    with pytest.raises(
        BackendError,
        match=r"^link dim 0: 1->2 failed at 1 ms; link dim 0: 6->5 failed at 1 ms; NPU 0 cannot reach NPU 3: "
        r"the ring is cut both ways round \(dimension 0\)$",
    ):
        arrivals(changed(ring(), *cuts), [(0, 3, SIZE, 2 * T)])


def test_a_message_sent_once_the_ring_is_cut_is_refused_as_it_is_sent() -> None:
    cuts = [pb.LinkChange(link=f"dim 0: {a}<->{a + 1}", at_ps=T, fail=True) for a in (1, 5)]
    net = FlitLevelNetwork()
    net.configure(changed(ring(), *cuts))
    net.advance(2 * T)
    with pytest.raises(BackendError, match=r"NPU 0 cannot reach NPU 3: the ring is cut both ways round"):
        net.inject(pb.SendBatch(id=[0], src=[0], dst=[3], bytes=[SIZE], send_time_ps=[3 * T]))


@pytest.mark.parametrize("network", [FlitLevelNetwork, CongestionAwareNetwork])
@pytest.mark.parametrize("name", ["dim 0: 5->6", "npu 5->npu 6"])
def test_a_link_that_comes_back_carries_again(network: type, name: str) -> None:
    # 5->6 is down from T to 3T: a message sent at 2T goes the other way round (seven links on the ring, three on
    # the torus), one sent at 4T crosses it again, as one sent at 0 did.
    topo = ring() if name.startswith("dim") else torus(4, 4, links=(link(B, ALPHA),))
    down = [pb.LinkChange(link=name, at_ps=T, fail=True), pb.LinkChange(link=name, at_ps=3 * T, restore=True)]
    took = arrivals(changed(topo, *down), [(5, 6, SIZE, 0), (5, 6, SIZE, 2 * T), (5, 6, SIZE, 4 * T)], network)
    around = 7 if name.startswith("dim") else 3
    assert took[0] + 4 * T == took[2] and took[1] > 2 * T + took[0]
    if network is FlitLevelNetwork:
        assert took == [zero_load(1), 2 * T + zero_load(around), 4 * T + zero_load(1)]


def test_a_link_back_at_half_speed_carries_at_half_speed() -> None:
    down = [
        pb.LinkChange(link="dim 0: 5->6", at_ps=T, fail=True),
        pb.LinkChange(link="dim 0: 5->6", at_ps=3 * T, restore=True, bandwidth_fraction=0.5),
    ]
    assert arrivals(changed(ring(), *down), [(5, 6, SIZE, 4 * T)]) == [4 * T + zero_load(1, 2 * K)]


def test_changes_give_the_same_result_whatever_the_windows() -> None:
    # Deciding window by window (as the engine does) or all at once gives the same deliveries.
    topo = changed(
        topology((RING, 8, B, ALPHA), (RING, 2, B, ALPHA)),
        pb.LinkChange(link="dim 0: 2->3", at_ps=3 * ALPHA, bandwidth_fraction=0.25),
        pb.LinkChange(link="dim 0: 5<->6", at_ps=3 * ALPHA, fail=True),
        pb.LinkChange(link="dim 0: 5<->6", at_ps=9 * ALPHA, restore=True),
    )
    messages = [(src, (src * 5 + 3) % 16, 1 << (8 + src % 6), (src % 7) * ALPHA) for src in range(16)]
    messages = [m for m in messages if m[0] != m[1]]
    at_once = arrivals(topo, messages)
    stepwise = FlitLevelNetwork()
    stepwise.configure(topo)
    assert arrivals_stepwise(stepwise, messages) == at_once
