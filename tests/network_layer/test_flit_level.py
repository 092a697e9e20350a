"""The flit-level network: zero-load agreement with the coarser backends within its stated overheads,
queueing under contention, deadlock freedom, counters and parameters.

Zero load (see :mod:`stratasim.network_layer.flit_level.network`): a lone message of ``F`` flits over a route of ``h``
links of flit time ``k`` (``flit_bytes / bandwidth``) and latencies ``L_i``, through ``h + 1`` routers of
pipeline ``P``, arrives after ``sum(L_i) + (h + 1) P + (h - 1 + F) k + w``. Its head is received whole at
each of the ``h - 1`` routers between links before going on (``(h - 1) k``), the ``F`` flits then stream at
one per slot behind it (``F k``: the payload's serialisation plus the headers and last-flit padding), and
``w`` is the wait for link slots to start. Slots of a link start at ``ceil(n k)`` ps, so when ``k``, the
latencies, ``P`` and the send times are whole multiples of ``k`` the head never waits and ``w = 0``: those
tests are exact. Otherwise, at each link: the head waits less than one slot for a slot to start (at most
``ceil(k_i) - 1`` ps, slots starting on whole ps); a slot lasts ``floor(k_i)`` or ``ceil(k_i)`` ps, so a flit
is across it less than 1 ps sooner or later than ``k_i``; and a body flit, finding its slot's start rounded
1 ps earlier than its head's, may slip one slot — only when the head waited under 1 ps, and once (the stream
then has most of a slot of slack). Hence ``-h < w < sum(ceil(k_i) + 1)``: within one slot per link.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from stratasim.kernel.errors import BackendError, SimulationError
from stratasim.network_layer import topologies
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.network_layer.flit_level import FlitLevelNetwork, FlitParameters, deadlock
from stratasim.network_layer.flit_level.packets import packet_flits, packet_payloads
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import dgx1, dragonfly, fat_tree, graph, link, torus
from tests.system_layer.helpers import FC, RING, SWITCH, collective_graph, ser, topology

DEFAULT = FlitParameters()
W, P = DEFAULT.flit_bytes, DEFAULT.pipeline_ps  # 64 B, 4 cycles of 1 ns
B = 64 * 10**9  # a 64-byte flit takes K = 1 ns: latencies, pipeline and sends below fall on slot starts
K, ALPHA = 1000, 500_000
APART = 10**10  # ps between sends: no message meets another
Network = AnalyticalNetwork | CongestionAwareNetwork | FlitLevelNetwork


def flits(size: int, parameters: FlitParameters = DEFAULT) -> int:
    return sum(packet_flits(payload, parameters) for payload in packet_payloads(size, parameters))


def batch(messages: list[tuple[int, int, int]], sent: list[int], first_id: int = 0) -> pb.SendBatch:
    return pb.SendBatch(
        id=list(range(first_id, first_id + len(messages))),
        src=[m[0] for m in messages],
        dst=[m[1] for m in messages],
        bytes=[m[2] for m in messages],
        send_time_ps=sent,
    )


def transit(network: Network, topology: pb.Topology, messages: list[tuple[int, int, int]]) -> list[int]:
    """Configure, send each (src, dst, bytes) APART from the last; how long each took."""
    network.configure(topology)
    sent = [(i + 1) * APART for i in range(len(messages))]
    network.inject(batch(messages, sent))
    result = network.advance(sent[-1] + APART)
    arrival = dict(zip(result.deliveries.id, result.deliveries.time_ps))
    return [arrival[i] - sent[i] for i in range(len(messages))]


def at_once(network: Network, topology: pb.Topology, messages: list[tuple[int, int, int]]) -> list[int]:
    """Configure, send every (src, dst, bytes) at time 0; the arrival time of each, in order."""
    network.configure(topology)
    network.inject(batch(messages, [0] * len(messages)))
    result = network.advance(10**14)
    arrival = dict(zip(result.deliveries.id, result.deliveries.time_ps))
    return [arrival[i] for i in range(len(messages))]


def dimension_hops(topology: pb.Topology, src: int, dst: int) -> list[int]:
    """Links crossed in each dimension a message travels in, on a list of dimensions."""
    hops, stride = [], 1
    for dim in topology.dimensions:
        own, goal = (src // stride) % dim.size, (dst // stride) % dim.size
        if own != goal:
            distance = (goal - own) % dim.size
            hops.append(min(distance, dim.size - distance) if dim.kind == RING else 2 if dim.kind == SWITCH else 1)
        stride *= dim.size
    return hops


ALIGNED = {
    "ring": topology((RING, 8, B, ALPHA)),
    "switch": topology((SWITCH, 8, B, ALPHA)),
    "ring x fully connected x switch": topology((RING, 4, B, ALPHA), (FC, 3, B, 2 * ALPHA), (SWITCH, 2, B, ALPHA)),
    "torus 4x4": torus(4, 4, links=(link(B, ALPHA),)),
    "fat-tree k=4": fat_tree(4, link(B, ALPHA)),
}


@pytest.mark.parametrize("name", sorted(ALIGNED))
def test_a_lone_message_costs_the_analytical_time_plus_exactly_the_stated_overhead(name: str) -> None:
    # Per segment (a fabric route, or one dimension of a list) of h links: (h + 1) pipelines, the head
    # received whole at h - 1 routers, and F flits' slots where the analytical network charges the payload's
    # serialisation. Every time here is a multiple of the 1 ns slot: no waits, so the agreement is exact.
    topo = ALIGNED[name]
    fabric = topologies.build(topo) if topo.WhichOneof("fabric") else None
    npus = math.prod(dim.size for dim in topo.dimensions)
    messages = [(s, d, size) for s, d in itertools.permutations(range(npus), 2) for size in (0, 1, 4096)]
    messages.append((0, npus - 1, 1 << 20))
    analytical = transit(AnalyticalNetwork(), topo, messages)
    assert transit(CongestionAwareNetwork(), topo, messages) == analytical
    expected = []
    for (src, dst, size), base in zip(messages, analytical):
        segments = [len(fabric.route(src, dst))] if fabric else dimension_hops(topo, src, dst)
        expected.append(base + sum((h + 1) * P + (h - 1 + flits(size)) * K - ser(size, B) for h in segments))
    assert transit(FlitLevelNetwork(), topo, messages) == expected


ANY_SPEED = {
    "torus 3x4, two speeds": torus(3, 4, links=(link(100e9, 200_000), link(50e9, 500_000))),
    "mesh 3x3": torus(3, 3, mesh=True),
    "dragonfly": dragonfly(3, 2, 2, 1, (link(100e9, 100_000), link(50e9, 300_000), link(25e9, ALPHA))),
    "dgx1": dgx1(),
    "graph": graph(["a", "b", "c", "sw"], 3, [(0, 3, link(50e9, 0)), (1, 3, link(30e9, 7)), (2, 1, link(3e9, 1_003))]),
}


@pytest.mark.parametrize("parameters", [DEFAULT, FlitParameters(16, 8, 16, pipeline_cycles=3, cycle_ps=777)])
@pytest.mark.parametrize("name", sorted(ANY_SPEED))
def test_a_lone_message_is_within_one_slot_per_link_of_the_formula(name: str, parameters: FlitParameters) -> None:
    # The bound -h < w < sum(ceil(k_i) + 1) is argued in the module docstring; with several speeds the slowest
    # link's flit time k_b takes the place of k in F k and every other link adds its own flit time once.
    topo = ANY_SPEED[name]
    fabric = topologies.build(topo)
    messages = [(s, d, size) for s, d in itertools.permutations(range(fabric.npus), 2) for size in (0, 1, 777, 5000)]
    analytical = transit(AnalyticalNetwork(), topo, messages)
    for (src, dst, size), took, base in zip(
        messages, transit(FlitLevelNetwork(parameters), topo, messages), analytical
    ):
        route = fabric.route(src, dst)
        k = [parameters.flit_bytes * 10**12 / Fraction(hop.bandwidth) for hop in route]
        formula = (
            sum(hop.latency_ps for hop in route)
            + (len(route) + 1) * parameters.pipeline_ps
            + sum(k)
            - max(k)
            + flits(size, parameters) * max(k)
        )
        assert -len(route) < took - formula < sum(math.ceil(flit) + 1 for flit in k), (src, dst, size)
        assert took > base  # never faster than the analytical network


@pytest.mark.parametrize("seed", range(40))
def test_random_speeds_and_parameters_stay_within_one_slot_per_link(seed: int) -> None:
    rng = random.Random(seed)
    speeds = tuple(link(rng.uniform(1e9, 400e9), rng.randint(0, 3_000_000)) for _ in range(2))
    topo = torus(rng.randint(3, 5), rng.randint(2, 4), links=speeds)
    parameters = FlitParameters(
        flit_bytes=rng.choice([8, 16, 32, 64, 100]),
        packet_flits=rng.randint(2, 9),
        header_bytes=rng.choice([0, 8]),
        pipeline_cycles=rng.randint(0, 5),
        cycle_ps=rng.randint(1, 2000),
    )
    fabric = topologies.build(topo)
    messages = [(s, d, rng.choice([0, 1, 777, 3000])) for s, d in itertools.permutations(range(fabric.npus), 2)]
    for (src, dst, size), took in zip(messages, transit(FlitLevelNetwork(parameters), topo, messages)):
        route = fabric.route(src, dst)
        k = [parameters.flit_bytes * 10**12 / Fraction(hop.bandwidth) for hop in route]
        formula = (
            sum(hop.latency_ps for hop in route)
            + (len(route) + 1) * parameters.pipeline_ps
            + sum(k)
            - max(k)
            + flits(size, parameters) * max(k)
        )
        assert -len(route) < took - formula < sum(math.ceil(flit) + 1 for flit in k), (src, dst, size)


def test_many_to_one_queues_on_the_last_link() -> None:
    # Seven NPUs send m bytes each to NPU 0 through a switch. Analytical: all arrive at 2 alpha + ser(m).
    # Congestion-aware: the down-link carries the messages one after another, the last at 2 alpha + 7 ser(m).
    # Flit level: the down-link is never idle from the first head's slot (2P + k + alpha, after the sender's
    # and the switch's pipelines and the up-link) until its 7F flits are across, then alpha + P to eject the
    # last: 3P + 2 alpha + (7F + 1) k — the congestion-aware time plus the routers' pipelines, the head's
    # store at the switch and seven messages' headers. Round-robin switch allocation interleaves the
    # packets, so every message finishes near the end instead of one after another.
    m = 1 << 16
    topo = topology((SWITCH, 8, B, ALPHA))
    messages = [(src, 0, m) for src in range(1, 8)]
    assert at_once(AnalyticalNetwork(), topo, messages) == [2 * ALPHA + ser(m, B)] * 7
    assert max(at_once(CongestionAwareNetwork(), topo, messages)) == 2 * ALPHA + 7 * ser(m, B)
    network = FlitLevelNetwork()
    arrivals = at_once(network, topo, messages)
    last = 3 * P + 2 * ALPHA + (7 * flits(m) + 1) * K
    assert max(arrivals) == last
    assert min(arrivals) > last - ser(m, B)  # fair sharing: all within one message's time of the end
    counters = dict(
        zip(
            network.counters().link,
            zip(network.counters().busy_ps, network.counters().bytes, network.counters().messages),
        )
    )
    assert counters["dim 0: switch->0"] == (7 * flits(m) * K, 7 * m, 7)
    assert counters["dim 0: 3->switch"] == (flits(m) * K, m, 1)


@pytest.mark.parametrize("name", ["torus 4x4", "fat-tree k=4", "ring"])
def test_an_all_to_all_is_slower_at_each_finer_level(name: str) -> None:
    topo = ALIGNED[name]
    npus = math.prod(dim.size for dim in topo.dimensions)
    graphs = [collective_graph("all_to_all", 1 << 16)] * npus
    options = SystemOptions(algorithm={"*": ("direct",)})
    times = [
        simulate(graphs, net, topo, options).total_time_ps
        for net in (AnalyticalNetwork(), CongestionAwareNetwork(), FlitLevelNetwork())
    ]
    assert times[0] < times[1] <= times[2]


def all_pairs(npus: int, size: int) -> list[tuple[int, int, int]]:
    return [(src, dst, size) for src, dst in itertools.permutations(range(npus), 2)]


TIGHT = FlitParameters(flit_bytes=16, vcs=2, buffer_flits=1)
SMALL_BUFFERS = {
    "torus 4x4": torus(4, 4, links=(link(50e9, 10_000),)),
    "torus 5x3": torus(5, 3, links=(link(50e9, 10_000),)),
    "ring of 8": topology((RING, 8, 50e9, 10_000)),
    "dragonfly": dragonfly(3, 2, 2, 1),
    "dgx1": dgx1(),
}


@pytest.mark.parametrize("name", sorted(SMALL_BUFFERS))
def test_an_all_to_all_with_one_flit_buffers_completes(name: str) -> None:
    topo = SMALL_BUFFERS[name]
    npus = math.prod(dim.size for dim in topo.dimensions)
    network = FlitLevelNetwork(TIGHT)
    arrivals = at_once(network, topo, all_pairs(npus, 4096))
    assert len(arrivals) == npus * (npus - 1)
    for port in network._ports.values():  # every buffer empty again: no credit lost, no channel left held
        assert [i + len(r) for i, r in zip(port.initial, port.returns)] == [TIGHT.buffer_flits] * TIGHT.vcs
        assert port.owner == [None] * TIGHT.vcs and not port.candidates
        assert not any(vc.queue for vc in port.down)


@pytest.mark.parametrize("shape", [(4, 4), (8,)])
def test_without_dateline_classes_the_same_traffic_deadlocks(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The completion above is the datelines' doing: with one class for every hop, packets wrapping round a
    # ring hold buffers in a cycle and the network stops, which the backend reports instead of hanging.
    monkeypatch.setattr(deadlock, "for_fabric", lambda topology, graph, vcs: deadlock.OneClass())
    topo = torus(*shape, links=(link(50e9, 10_000),))
    with pytest.raises(SimulationError, match="deadlock"):
        at_once(FlitLevelNetwork(TIGHT), topo, all_pairs(math.prod(shape), 4096))


def test_time_windows_do_not_change_the_result() -> None:
    # Slots are decided only up to each window's end minus the lookahead, so running window by window (as the
    # engine does) and all at once give the same deliveries, with more sends arriving amid the traffic.
    topo = torus(4, 4, links=(link(50e9, 20_000),))
    first, later = all_pairs(16, 3000), [(src, (src * 5 + 3) % 16, 70_000) for src in range(16)]
    outcomes, windows = [], []
    for windowed in (False, True):
        network = FlitLevelNetwork(FlitParameters(flit_bytes=32, buffer_flits=3))
        lookahead = network.configure(topo).lookahead_ps
        network.inject(batch(first, [0] * len(first)))
        results = [network.advance(3 * lookahead)]
        network.inject(batch(later, [3 * lookahead + i for i in range(len(later))], first_id=len(first)))
        results.append(network.advance(-1 if windowed else 10**12))
        while results[-1].has_next:
            results.append(network.advance(-1))
        outcomes.append([(t, i) for r in results for t, i in zip(r.deliveries.time_ps, r.deliveries.id)])
        windows.append(len(results))
    assert len(outcomes[0]) == len(first) + len(later)
    assert outcomes[0] == outcomes[1]
    assert windows[0] == 2 and windows[1] > 100


def test_lookahead_is_the_least_last_link_plus_a_pipeline() -> None:
    info = FlitLevelNetwork().configure(torus(4, 4, links=(link(B, ALPHA),)))
    assert info.lookahead_ps == K + ALPHA + P
    info = FlitLevelNetwork().configure(ANY_SPEED["graph"])  # least: sw -> a, 50 GB/s and no latency
    assert info.lookahead_ps == W * 10**12 // int(50e9) + 0 + P


def test_packet_latency_and_flit_hops() -> None:
    network = FlitLevelNetwork()
    size = 10_000
    (took,) = transit(network, ALIGNED["torus 4x4"], [(0, 10, size)])  # two hops along each dimension
    assert network.flit_hops == 4 * flits(size)
    latency = network.packet_latency
    assert latency.packets == len(packet_payloads(size, DEFAULT))
    assert latency.most_ps == took and latency.least_ps < took


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"flit_bytes": 0}, "flit_bytes"),
        ({"vcs": 0}, "vcs"),
        ({"cycle_ps": 0}, "cycle_ps"),
        ({"header_bytes": 320}, "header_bytes"),
        ({"buffer_flits": -1}, "buffer_flits"),
    ],
)
def test_impossible_parameters_are_refused(change: dict[str, int], key: str) -> None:
    with pytest.raises(BackendError, match=f"flit_level.{key}"):
        FlitParameters(**change)


def test_a_torus_needs_two_virtual_channels_and_a_graph_one_per_hop() -> None:
    with pytest.raises(BackendError, match="flit_level.vcs: this topology needs 2"):
        FlitLevelNetwork(FlitParameters(vcs=1)).configure(torus(4, 4))
    network = FlitLevelNetwork(FlitParameters(vcs=1))
    network.configure(ANY_SPEED["graph"])
    with pytest.raises(BackendError, match="from a to c crosses 3 links"):
        network.inject(pb.SendBatch(id=[1], src=[0], dst=[2], bytes=[1], send_time_ps=[0]))


def test_a_message_too_large_to_hold_is_refused_before_any_packet_is_made() -> None:
    network = FlitLevelNetwork(max_packets=100)
    network.configure(topology((RING, 4, B, ALPHA)))
    payload = network.parameters.payload_bytes
    network.inject(batch([(0, 1, 60 * payload)], [1]))
    with pytest.raises(
        BackendError,
        match=rf"message 1: {41 * payload} bytes make 41 packets .* holds at most 100 "
        r"packets at once \(60 in it already\)",
    ):
        network.inject(batch([(1, 2, 41 * payload)], [1], first_id=1))
    network.advance(10**12)  # the first is delivered: its packets leave the count
    network.inject(batch([(1, 2, 100 * payload)], [10**12 + 1], first_id=2))
    assert list(network.advance(10**13).deliveries.id) == [2]


def test_a_terabyte_message_is_refused_at_once() -> None:
    network = FlitLevelNetwork()
    network.configure(topology((RING, 4, B, ALPHA)))
    with pytest.raises(BackendError, match=r"10{12} bytes make 3,205,128,206 packets of 312 bytes"):
        network.inject(batch([(0, 1, 10**12)], [1]))
