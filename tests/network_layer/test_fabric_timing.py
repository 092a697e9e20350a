"""Message times on fabrics, on both backends.

A lone message costs the sum of its route's latencies plus one serialisation at the route's slowest link on
both backends. The agreement is exact, with no tolerance: both take the largest of the per-link serialisations,
each rounded up to a whole picosecond (the same integer as rounding the slowest link's), and the
congestion-aware backend's cut-through pipeline adds nothing when no other message is about. Under contention
the congestion-aware backend queues messages at the links they share.
"""

from __future__ import annotations

import itertools

import pytest

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import (
    ALPHA,
    B,
    build,
    dgx1,
    dragonfly,
    fat_tree,
    graph,
    hierarchical_alltoall,
    link,
    nvswitch,
    torus,
)
from tests.system_layer.helpers import collective_graph, ser

FABRICS = {
    "torus": torus(3, 4, links=(link(100e9, 200_000), link(B, ALPHA))),
    "mesh": torus(3, 3, mesh=True),
    "fat_tree": fat_tree(4),
    "dragonfly": dragonfly(5, 2, 2, 2, (link(100e9, 100_000), link(B, 300_000), link(25e9, ALPHA))),
    "dgx1": dgx1(),
    "nvswitch": nvswitch(4, 3, boards=2, trunk=link(75e9, 900_000)),
    "hierarchical_alltoall": hierarchical_alltoall(3, 3, 2),
    "graph": graph(
        ["a", "b", "c", "sw"],
        3,
        [(0, 3, link(B, 0)), (1, 3, link(30e9, 7)), (2, 1, link(3e9, 1_000))],
    ),
}
SIZES = (0, 1, 4096, 1 << 20)
APART = 10**10  # ps between sends: far longer than any message takes, so none meets another


def lone_messages(topology: pb.Topology) -> list[tuple[int, int, int]]:
    npus = build(topology).npus
    return [(src, dst, size) for (src, dst), size in itertools.product(itertools.permutations(range(npus), 2), SIZES)]


def transit(network: AnalyticalNetwork | CongestionAwareNetwork, messages: list[tuple[int, int, int]]) -> list[int]:
    """Send each (src, dst, bytes) APART from the last; how long each took."""
    sent = [i * APART for i in range(len(messages))]
    network.inject(
        pb.SendBatch(
            id=list(range(len(messages))),
            src=[m[0] for m in messages],
            dst=[m[1] for m in messages],
            bytes=[m[2] for m in messages],
            send_time_ps=sent,
        )
    )
    result = network.advance(sent[-1] + APART)
    arrival = dict(zip(result.deliveries.id, result.deliveries.time_ps))
    return [arrival[i] - sent[i] for i in range(len(messages))]


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_a_lone_message_costs_the_same_on_both_backends(name: str) -> None:
    topology = FABRICS[name]
    links = build(topology)
    messages = lone_messages(topology)
    expected = []
    for src, dst, size in messages:
        route = links.route(src, dst)
        slowest = min(hop.bandwidth for hop in route)
        serialisation = -(-size * 10**12 * slowest.denominator // slowest.numerator)
        expected.append(sum(hop.latency_ps for hop in route) + serialisation)
    for network in (AnalyticalNetwork(), CongestionAwareNetwork()):
        lookahead = network.configure(topology).lookahead_ps  # no delivery comes sooner, even on 0 ps links
        assert transit(network, messages) == [max(delay, lookahead) for delay in expected]


def test_the_scalar_and_batched_analytical_delays_agree_on_a_fabric() -> None:
    net = AnalyticalNetwork()
    net.configure(FABRICS["dragonfly"])
    messages = lone_messages(FABRICS["dragonfly"])[:200]  # a batch large enough for the batched path
    assert transit(net, messages) == [net.transit_ps(src, dst, size) for src, dst, size in messages]


def test_many_to_one_queues_on_the_shared_links() -> None:
    # NPUs 1 (same edge switch), 2 and 3 (same pod) send m bytes to NPU 0 of a k=4 fat-tree at once. Uncontended
    # each would take 2 or 4 latencies plus one serialisation s. They share the edge switch's down-link to
    # NPU 0 (and 2 and 3 the links up from edge 0.1 and down from aggregation 0.0): arrivals 2a + s, 2a + 2s,
    # 2a + 3s — each waits for the one before to pass, while its head's extra hops hide in the wait.
    m = 1 << 20
    s = ser(m, B)
    batch = pb.SendBatch(id=[0, 1, 2], src=[1, 2, 3], dst=[0, 0, 0], bytes=[m] * 3, send_time_ps=[0] * 3)
    aware, analytical = CongestionAwareNetwork(), AnalyticalNetwork()
    arrivals = []
    for net in (aware, analytical):
        net.configure(fat_tree(4))
        net.inject(batch)
        arrivals.append(sorted(net.advance(10**12).deliveries.time_ps))
    assert arrivals[0] == [2 * ALPHA + s, 2 * ALPHA + 2 * s, 2 * ALPHA + 3 * s]
    assert arrivals[1] == [2 * ALPHA + s, 4 * ALPHA + s, 4 * ALPHA + s]
    counters = dict(zip(aware.counters().link, aware.counters().messages))
    assert counters["edge 0.0->npu 0"] == 3 and counters["edge 0.1->aggregation 0.0"] == 2


def test_store_and_forward_pays_every_link_in_full() -> None:
    topology = fat_tree(4)
    topology.store_and_forward = True
    net = CongestionAwareNetwork()
    net.configure(topology)
    assert transit(net, [(0, 5, 1000)]) == [6 * (ALPHA + ser(1000, B))]


def test_lookahead_is_the_least_route_latency_or_last_link_latency() -> None:
    # The analytical network prices whole routes (at least NPU -> switch -> NPU); the congestion-aware one
    # decides link by link, and a message starting on its last link arrives one link latency later.
    assert AnalyticalNetwork().configure(fat_tree(4)).lookahead_ps == 2 * ALPHA
    assert CongestionAwareNetwork().configure(fat_tree(4)).lookahead_ps == ALPHA
    assert CongestionAwareNetwork().configure(torus(4, 4)).lookahead_ps == ALPHA
    quantised = torus(4, 4, links=(link(B, 1_500),))
    quantised.delay_quantum_ps = 1_000
    assert AnalyticalNetwork().configure(quantised).lookahead_ps == 1_000


@pytest.mark.parametrize(
    ("name", "stateless"),
    [
        ("torus", True),
        ("hierarchical_alltoall", True),
        ("mesh", False),
        ("fat_tree", False),
        ("dgx1", False),
        ("graph", False),
        ("dragonfly", False),
        ("nvswitch", False),
    ],
)
def test_only_translation_invariant_fabrics_are_stateless(name: str, stateless: bool) -> None:
    assert AnalyticalNetwork().configure(FABRICS[name]).stateless is stateless
    assert AnalyticalNetwork().configure(nvswitch(8, 6)).stateless  # one board: every pair alike


@pytest.mark.parametrize(
    "topology",
    [torus(4, 2, links=(link(100e9, 200_000), link(B, ALPHA))), hierarchical_alltoall(4, 2, 2), nvswitch(8, 6)],
)
def test_simulating_one_npu_for_all_is_exact_on_stateless_fabrics(topology: pb.Topology) -> None:
    npus = build(topology).npus
    graphs = [collective_graph("all_reduce", 1 << 20)] * npus
    once = simulate(graphs, AnalyticalNetwork(), topology, SystemOptions(splits=2))
    every = simulate(graphs, AnalyticalNetwork(), topology, SystemOptions(splits=2, aggregate=False))
    assert (once.simulated_npus, every.simulated_npus) == (1, npus)
    assert once.total_time_ps == every.total_time_ps
    assert [npu.finish_ps for npu in once.per_npu] == [npu.finish_ps for npu in every.per_npu]


@pytest.mark.parametrize("name", sorted(FABRICS))
@pytest.mark.parametrize("backend", [AnalyticalNetwork, CongestionAwareNetwork])
def test_windows_deliver_in_order_and_never_late(backend: type, name: str) -> None:
    # Every pair sends at staggered times; each fixed window must hold exactly the deliveries due in it (a
    # delivery slipping into a later window, as with a lookahead longer than a route's last link, breaks the
    # engine: it would answer the message before the network's committed time).
    network = backend()
    lookahead = network.configure(FABRICS[name]).lookahead_ps
    npus = build(FABRICS[name]).npus
    pairs = list(itertools.permutations(range(npus), 2))
    batch = pb.SendBatch(
        id=list(range(len(pairs))),
        src=[s for s, _ in pairs],
        dst=[d for _, d in pairs],
        bytes=[(i * 7919) % 65536 for i in range(len(pairs))],
        send_time_ps=[(i * 104_729) % 3_000_000 for i in range(len(pairs))],
    )
    network.inject(batch)
    earliest = {msg: sent + lookahead for msg, sent in zip(batch.id, batch.send_time_ps)}
    until, delivered = -1, {}
    while True:
        previous, until = until, until + 250_000
        result = network.advance(until)
        assert all(previous < t <= until for t in result.deliveries.time_ps), (previous, until)
        delivered.update(zip(result.deliveries.id, result.deliveries.time_ps))
        if not result.has_next:
            break
        assert result.next_event_ps > until
    assert set(delivered) == set(earliest)
    assert all(delivered[msg] >= earliest[msg] for msg in earliest)
