"""Links of their own speed, links that degrade or fail at a time (``Topology.link_changes``): the congestion-aware
and analytical networks against hand-computed times, reroutes, and the messages of what cannot be."""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.network_layer.flit_level import FlitLevelNetwork
from stratasim.v1 import network_pb2
from tests.network_layer import fabrics
from tests.network_layer.messages import arrivals_at_once, arrivals_stepwise
from tests.system_layer.helpers import RING, SWITCH, ser, topology

B, ALPHA, M = 50 * 10**9, 500_000, 1 << 20


def changed(topo: network_pb2.Topology, *changes: network_pb2.LinkChange) -> network_pb2.Topology:
    topo.link_changes.extend(changes)
    return topo


def send(net: CongestionAwareNetwork | AnalyticalNetwork, messages: list[tuple[int, int, int, int]]) -> list[int]:
    """Send (src, dst, bytes, at ps) in one batch; the arrival time of each, in send order."""
    return arrivals_at_once(net, messages)


def configured(net: CongestionAwareNetwork | AnalyticalNetwork, topo: network_pb2.Topology):  # type: ignore[no-untyped-def]
    net.configure(topo)
    return net


@pytest.mark.parametrize("network", [CongestionAwareNetwork, AnalyticalNetwork])
def test_a_slow_link_from_the_start_slows_only_the_messages_crossing_it(network: type) -> None:
    # Ring of 8: 3->4 at 25 GB/s. A message 3->4 serialises at half speed; 0->1 does not cross it.
    slow = network_pb2.LinkChange(link="dim 0: 3->4", bandwidth_bytes_per_s=B / 2)
    net = configured(network(), changed(topology((RING, 8, B, ALPHA)), slow))
    assert send(net, [(3, 4, M, 0), (0, 1, M, 0), (4, 3, M, 0)]) == [
        ALPHA + ser(M, B / 2),
        ALPHA + ser(M, B),
        ALPHA + ser(M, B),
    ]


def test_the_slowest_link_of_a_path_decides_and_latencies_add_up() -> None:
    # 2 -> 5 crosses 2->3, 3->4 (its own latency), 4->5 (a quarter of the bandwidth).
    own = [
        network_pb2.LinkChange(link="dim 0: 3->4", latency_ps=2 * ALPHA),
        network_pb2.LinkChange(link="dim 0: 4<->5", bandwidth_fraction=0.25),
    ]
    for network in (CongestionAwareNetwork, AnalyticalNetwork):
        net = configured(network(), changed(topology((RING, 8, B, ALPHA)), *own))
        assert send(net, [(2, 5, M, 0)]) == [4 * ALPHA + ser(M, B / 4)]


def test_analytical_links_of_their_own_speed_break_the_symmetry() -> None:
    slow = network_pb2.LinkChange(link="dim 1: 0->switch", bandwidth_fraction=0.5)
    info = AnalyticalNetwork().configure(changed(topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA)), slow))
    plain = AnalyticalNetwork().configure(topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA)))
    assert plain.stateless and list(plain.permutable_dimensions) == [1]
    assert not info.stateless and list(info.permutable_dimensions) == []


def test_a_degradation_applies_to_crossings_from_its_time_on() -> None:
    # 3->4 halves at t = 1 ms: a message sent at 0 crosses at full speed, one sent at 2 ms at half.
    at = 10**9
    half = network_pb2.LinkChange(link="dim 0: 3->4", at_ps=at, bandwidth_fraction=0.5)
    net = configured(CongestionAwareNetwork(), changed(topology((RING, 8, B, ALPHA)), half))
    assert send(net, [(3, 4, M, 0), (3, 4, M, 2 * at), (5, 6, M, 2 * at)]) == [
        ALPHA + ser(M, B),
        2 * at + ALPHA + ser(M, B / 2),
        2 * at + ALPHA + ser(M, B),
    ]


def test_a_failed_ring_link_sends_messages_the_other_way_round() -> None:
    # 5->6 fails at 1 ms: a message 5->6 sent after it goes 5->4->...->6, seven links.
    at = 10**9
    fail = network_pb2.LinkChange(link="dim 0: 5->6", at_ps=at, fail=True)
    net = configured(CongestionAwareNetwork(), changed(topology((RING, 8, B, ALPHA)), fail))
    assert send(net, [(5, 6, M, 0), (5, 6, M, 2 * at)]) == [ALPHA + ser(M, B), 2 * at + 7 * ALPHA + ser(M, B)]
    carried = dict(zip(net.counters().link, net.counters().messages))
    assert carried["dim 0: 5->6"] == 1 and carried["dim 0: 5->4"] == 1 and carried["dim 0: 7->6"] == 1


def test_a_message_on_its_way_turns_round_at_the_failed_link() -> None:
    # 0 -> 3 leaves at 0 along 0->1->2->3; 2->3 fails before its head gets there (at 1.5 alpha): it goes back
    # from 2 the other way round, 2->1->0->7->6->5->4->3, and arrives 2 + 7 latencies and a serialisation late.
    fail = network_pb2.LinkChange(link="dim 0: 2->3", at_ps=ALPHA * 3 // 2, fail=True)
    net = configured(CongestionAwareNetwork(), changed(topology((RING, 8, B, ALPHA)), fail))
    assert send(net, [(0, 3, M, 0)]) == [9 * ALPHA + ser(M, B)]


def test_a_failed_torus_link_reroutes_and_other_links_carry_the_traffic() -> None:
    topo = fabrics.torus(4, 4)
    messages = [(src, src + 1 if src % 4 < 3 else src - 3, M, 0) for src in range(16)]
    plain = send(configured(CongestionAwareNetwork(), topo), messages)
    fail = network_pb2.LinkChange(link="npu 1<->npu 2", fail=True)
    net = configured(CongestionAwareNetwork(), changed(fabrics.torus(4, 4), fail))
    rerouted = send(net, messages)
    # 1 -> 2 goes the other way round its ring, 1->0->3->2: two more latencies, on links no other message uses
    assert rerouted[1] == plain[1] + 2 * fabrics.ALPHA and rerouted[:1] + rerouted[2:] == plain[:1] + plain[2:]
    carried = dict(zip(net.counters().link, net.counters().messages))
    assert "npu 1->npu 2" not in carried and carried["npu 1->npu 0"] == carried["npu 0->npu 3"] == 1


def test_a_failed_fat_tree_link_goes_through_another_aggregation_switch() -> None:
    at = 10**9
    fail = network_pb2.LinkChange(link="edge 0.0->aggregation 0.0", at_ps=at, fail=True)
    net = configured(CongestionAwareNetwork(), changed(fabrics.fat_tree(4), fail))
    # NPU 0 -> NPU 2 (same pod, other edge): up through aggregation 0.0 by the destination's id (2 % 2 = 0)
    assert send(net, [(0, 2, M, 0), (0, 2, M, 2 * at)])[1] == 2 * at + 4 * fabrics.ALPHA + ser(M, fabrics.B)
    carried = dict(zip(net.counters().link, net.counters().messages))
    assert carried["edge 0.0->aggregation 0.1"] == 1


def test_a_ring_of_two_with_a_failed_link_says_which_link_failed_when() -> None:
    fail = network_pb2.LinkChange(link="dim 0: 0->1", at_ps=10**10, fail=True)
    net = configured(CongestionAwareNetwork(), changed(topology((RING, 2, B, ALPHA), (RING, 4, B, ALPHA)), fail))
    with pytest.raises(BackendError, match=r"link dim 0: 0->1 failed at 10 ms; NPU 0 cannot reach NPU 1: a ring of 2"):
        send(net, [(0, 1, M, 2 * 10**10)])


def test_a_ring_cut_in_two_places_leaves_no_way() -> None:
    cuts = [network_pb2.LinkChange(link=f"dim 0: {a}<->{a + 1}", at_ps=10**9, fail=True) for a in (1, 5)]
    net = configured(CongestionAwareNetwork(), changed(topology((RING, 8, B, ALPHA)), *cuts))
    with pytest.raises(BackendError, match=r"link dim 0: 1->2 failed at 1 ms; link dim 0: 6->5 .* cut both ways"):
        send(net, [(0, 3, M, 2 * 10**9)])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (network_pb2.LinkChange(link="dim 0: 3->5", fail=True), "no link named 'dim 0: 3->5'.*did you mean"),
        (
            network_pb2.LinkChange(link="link 3", fail=True),
            "no switch named 'link 3': this topology has no switches.*dim D: a->b",
        ),
        (network_pb2.LinkChange(link="dim 0: 3->4"), "changes nothing"),
        (network_pb2.LinkChange(link="dim 0: 3->4", bandwidth_bytes_per_s=-1), "must be positive"),
        (network_pb2.LinkChange(link="dim 0: 3->4", at_ps=5, latency_ps=1), "latency: changes only from the start"),
        (network_pb2.LinkChange(link="dim 0: 3->4", fail=True, bandwidth_fraction=0.5), "no bandwidth"),
    ],
)
def test_impossible_changes_are_refused_naming_the_entry(change: network_pb2.LinkChange, said: str) -> None:
    with pytest.raises(TopologyError, match=r"link_changes\[0\] .*" + said):
        CongestionAwareNetwork().configure(changed(topology((RING, 8, B, ALPHA)), change))


def test_a_fabric_link_name_that_does_not_exist_suggests_the_nearest() -> None:
    change = network_pb2.LinkChange(link="edge 0.0->aggregation 0.3", fail=True)
    with pytest.raises(TopologyError, match=r"did you mean 'edge 0.0->aggregation 0.1'"):
        CongestionAwareNetwork().configure(changed(fabrics.fat_tree(4), change))


def test_the_analytical_network_refuses_changes_at_a_time() -> None:
    at = network_pb2.LinkChange(link="dim 0: 3->4", at_ps=1, bandwidth_fraction=0.5)
    with pytest.raises(TopologyError, match="the analytical network prices links as they are from the start; .*"):
        AnalyticalNetwork().configure(changed(topology((RING, 8, B, ALPHA)), at))
    FlitLevelNetwork().configure(changed(topology((RING, 8, B, ALPHA)), at))  # the flit-level one takes them


DOWN = network_pb2.LinkChange(link="dim 0: 3->4", at_ps=10**9, fail=True)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (
            [network_pb2.LinkChange(link="dim 0: 3->4", at_ps=10**9, restore=True)],
            r"link_changes\[0\] \('dim 0: 3->4'\): restores link dim 0: 3->4 at 1 ms, but it is not down before then",
        ),
        (
            [network_pb2.LinkChange(link="dim 0: 3<->4", at_ps=5 * 10**8, restore=True), DOWN],
            r"link_changes\[0\] .*restores link dim 0: 3->4 at 500 us, but it is not down before then",
        ),
        (
            [DOWN, network_pb2.LinkChange(link="dim 0: 3->4", at_ps=10**9, restore=True)],
            r"link_changes\[1\] .*but it fails at that same time",
        ),
        (
            [DOWN, network_pb2.LinkChange(link="dim 0: 3->4", at_ps=2 * 10**9, bandwidth_fraction=0.5)],
            r"link_changes\[1\] .*changes link dim 0: 3->4 at 2 ms while it is down \(failed at 1 ms\); bring it "
            "back first with restore: true",
        ),
        (
            [DOWN, network_pb2.LinkChange(link="dim 0: 3->4", at_ps=2 * 10**9, fail=True, restore=True)],
            r"link_changes\[1\] .*give fail, or a new speed, or restore",
        ),
        (
            [DOWN, network_pb2.LinkChange(link="dim 0: 3->4", at_ps=2 * 10**9, restore=True, latency_ps=1)],
            r"link_changes\[1\] .*a restored link comes back with the latency it had",
        ),
    ],
)
def test_impossible_restores_are_refused_naming_the_entry(changes: list[network_pb2.LinkChange], said: str) -> None:
    for network in (CongestionAwareNetwork, FlitLevelNetwork):
        with pytest.raises(TopologyError, match=said):
            network().configure(changed(topology((RING, 8, B, ALPHA)), *changes))


def test_a_switch_that_comes_back_carries_again() -> None:
    # The switch of dimension 1 is down from 1 ms to 3 ms: NPU 0 -> NPU 4 cannot go in between, and after goes
    # up and down through it as before.
    switch = [
        network_pb2.LinkChange(link="dim 1: switch", at_ps=10**9, fail=True),
        network_pb2.LinkChange(link="dim 1: switch", at_ps=3 * 10**9, restore=True),
    ]
    net = configured(CongestionAwareNetwork(), changed(topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA)), *switch))
    assert send(net, [(0, 4, M, 4 * 10**9)]) == [4 * 10**9 + 2 * ALPHA + ser(M, B)]
    for network in (CongestionAwareNetwork, FlitLevelNetwork):
        net = configured(network(), changed(topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA)), *switch))
        with pytest.raises(
            BackendError,
            match=r"^link dim 1: 0->switch failed at 1 ms; link dim 1: switch->4 failed at 1 ms; NPU 0 cannot reach "
            r"NPU 4: a switch dimension has one way up and one way down per NPU \(dimension 1\)$",
        ):
            send(net, [(0, 4, M, 2 * 10**9)])


def test_changes_give_the_same_result_whatever_the_windows() -> None:
    # Deciding crossings window by window (as the engine does) or all at once gives the same deliveries: a change
    # applies when the first crossing at or after its time is decided, never earlier.
    at = 3 * ALPHA
    topo = changed(
        topology((RING, 8, B, ALPHA), (SWITCH, 2, B, ALPHA)),
        network_pb2.LinkChange(link="dim 0: 2->3", at_ps=at, bandwidth_fraction=0.25),
        network_pb2.LinkChange(link="dim 0: 5<->6", at_ps=at, fail=True),
        network_pb2.LinkChange(link="dim 1: switch->9", at_ps=2 * at, bandwidth_fraction=0.5),
    )
    messages = [(src, (src * 5 + 3) % 16, 1 << (12 + src % 6), (src % 7) * ALPHA) for src in range(16)]
    messages = [m for m in messages if m[0] != m[1]]
    at_once = send(configured(CongestionAwareNetwork(), topo), messages)
    assert arrivals_stepwise(configured(CongestionAwareNetwork(), topo), messages) == at_once
