"""Link changes on the ns3 network backend: links of their own speed, changes at a time, failures and restores.

Each lone message is checked against ns-3's store-and-forward formula (``adapters/ns3/network.py``): over ``h``
links of one speed, ``h L + (S + n H') / B + (h - 1) (p + H') / B`` for ``n`` packets, the first of ``p`` payload
bytes, ``H' = 62`` header bytes each. Over a fast link then a slow one (``B`` then ``B / 2``) the slow link is the
bottleneck: its first packet starts once the first has crossed the fast link, and it then sends every packet back
to back, so the message takes ``2 L + (p + H') / B + 2 (S + n H') / B``. Both hold to within ``n + h`` ps of
per-packet rounding.

The tests that start ns-3 (10-30 s each) are marked ``adapters``; without the ``ns3`` extra they skip.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml

import stratasim
from stratasim.adapters.ns3 import Ns3Network
from stratasim.adapters.ns3.network import MTU, WIRE_HEADER
from stratasim.cli import main
from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.v1 import network_pb2

RING = network_pb2.Dimension.RING
B, L = 50e9, 500_000  # bytes/s and ps of every link of the ring below
SIZE = 1 << 20
PACKETS = SIZE // MTU


def _needs_ns3() -> None:
    pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'stratasim[ns3]'")


def _ring(*changes: network_pb2.LinkChange) -> network_pb2.Topology:
    dimension = network_pb2.Dimension(kind=RING, size=8, bandwidth_bytes_per_s=B, latency_ps=L)
    return network_pb2.Topology(dimensions=[dimension], link_changes=changes)


def _uniform_ps(hops: int) -> Fraction:
    """A lone 1 MiB message over ``hops`` links of ``B``."""
    per_byte = Fraction(10**12) / Fraction(B)
    return hops * L + (SIZE + PACKETS * WIRE_HEADER) * per_byte + (hops - 1) * (MTU + WIRE_HEADER) * per_byte


def _fast_then_slow_ps() -> Fraction:
    """A lone 1 MiB message over a link of ``B`` then one of ``B / 2``."""
    per_byte = Fraction(10**12) / Fraction(B)
    return 2 * L + (MTU + WIRE_HEADER) * per_byte + 2 * (SIZE + PACKETS * WIRE_HEADER) * per_byte


def _transits(network: Ns3Network, messages: list[tuple[int, int, int]]) -> list[int]:
    """Send each (src, dst, send time in ps) alone, in turn; each one's transit time."""
    transits = []
    for msg_id, (src, dst, sent) in enumerate(messages):
        network.inject(network_pb2.SendBatch(id=[msg_id], src=[src], dst=[dst], bytes=[SIZE], send_time_ps=[sent]))
        result = network.advance(-1)
        while not result.deliveries.id:
            assert result.has_next, f"message {msg_id} was lost"
            result = network.advance(-1)
        assert list(result.deliveries.id) == [msg_id]
        transits.append(result.deliveries.time_ps[0] - sent)
    return transits


@pytest.mark.adapters
def test_a_slow_link_slows_the_messages_that_cross_it_from_its_time_on() -> None:
    """``dim 0: 1->2`` at half speed from the start, ``dim 0: 4->5`` at 25 GB/s (absolute) from 1 ms: 0 -> 2 and,
    after 1 ms, 3 -> 5 take the fast-then-slow formula; 3 -> 5 before 1 ms and 2 -> 4 the uniform one."""
    _needs_ns3()
    network = Ns3Network()
    half = network_pb2.LinkChange(link="dim 0: 1->2", bandwidth_fraction=0.5)
    later = network_pb2.LinkChange(link="dim 0: 4->5", at_ps=10**9, bandwidth_bytes_per_s=25e9)
    network.configure(_ring(half, later))
    try:
        got = _transits(network, [(0, 2, 1000), (3, 5, 100_000_000), (2, 4, 200_000_000), (3, 5, 2 * 10**9)])
    finally:
        network.close()
    slack = PACKETS + 2
    expected = [_fast_then_slow_ps(), _uniform_ps(2), _uniform_ps(2), _fast_then_slow_ps()]
    assert all(abs(g - e) <= slack for g, e in zip(got, expected)), (got, [float(e) for e in expected])


@pytest.mark.adapters
def test_a_failed_link_sends_messages_the_other_way_round_until_it_is_restored() -> None:
    """``dim 0: 1<->2`` down from the start to 1 ms: 0 -> 2 goes 0, 7, 6, ..., 3, 2 (six links) until then, and the
    two links of the usual way after; 0 -> 1 never crosses it."""
    _needs_ns3()
    network = Ns3Network()
    fail = network_pb2.LinkChange(link="dim 0: 1<->2", fail=True)
    restore = network_pb2.LinkChange(link="dim 0: 1<->2", at_ps=10**9, restore=True)
    network.configure(_ring(fail, restore))
    try:
        got = _transits(network, [(0, 2, 1000), (0, 1, 100_000_000), (0, 2, 2 * 10**9)])
        links = {row: size for row, size in zip(network.counters().link, network.counters().bytes)}
    finally:
        network.close()
    expected = [_uniform_ps(6), _uniform_ps(1), _uniform_ps(2)]
    assert all(abs(g - e) <= PACKETS + 6 for g, e in zip(got, expected)), (got, [float(e) for e in expected])
    assert links["dim 0: 0->7"] == links["dim 0: 3->2"] == SIZE and links["dim 0: 1->2"] == SIZE
    assert links["dim 0: 0->1"] == 2 * SIZE


SWITCHED = [
    network_pb2.Dimension(kind=RING, size=4, bandwidth_bytes_per_s=B, latency_ps=L),
    network_pb2.Dimension(kind=network_pb2.Dimension.SWITCH, size=4, bandwidth_bytes_per_s=B, latency_ps=L),
]
NO_WAY = {
    # name: (topology, src, dst, what the run stops with)
    "ring cut twice": (
        _ring(*(network_pb2.LinkChange(link=f"dim 0: {a}<->{b}", at_ps=10**7, fail=True) for a, b in ((1, 2), (5, 6)))),
        1,
        2,
        "link dim 0: 1->2 failed at 10 us; link dim 0: 6->5 failed at 10 us; NPU 1 cannot reach NPU 2: the ring is cut "
        "both ways round (dimension 0)",
    ),
    "switch failed": (
        network_pb2.Topology(
            dimensions=SWITCHED, link_changes=[network_pb2.LinkChange(link="dim 1: switch", at_ps=10**7, fail=True)]
        ),
        5,
        13,
        "link dim 1: 5->switch failed at 10 us; link dim 1: switch->13 failed at 10 us; NPU 5 cannot reach NPU 13: a "
        "switch dimension has one way up and one way down per NPU (dimension 1)",
    ),
}


@pytest.mark.adapters
@pytest.mark.parametrize("case", sorted(NO_WAY))
def test_no_way_left_stops_the_run_naming_the_failed_links_and_their_time(case: str) -> None:
    """A ring cut in two places, a switch dimension's switches failed: a message with no way left stops the run
    with the congestion-aware network's line — the failed links in its ways, since when, and why there is no other
    way (``docs/how-to/link-failures.md`` shows the same lines from the congestion-aware network)."""
    _needs_ns3()
    topology, src, dst, said = NO_WAY[case]
    network = Ns3Network()
    network.configure(topology)
    try:
        with pytest.raises(BackendError) as stopped:
            _transits(network, [(src, dst, 2 * 10**7)])
    finally:
        network.close()
    assert str(stopped.value) == said


def _study(backend: str, links: list[dict[str, object]]) -> dict[str, object]:
    """A 4 MiB ring all-reduce on a ring of 8 NPUs with the link changes ``links``."""
    return {
        "name": "ns3_links",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "4MiB"},
        "system": {"algorithm": "ring", "splits": 2, "active_chunks": 1, "endpoint_delay": "10ns"},
        "network": {
            "backend": backend,
            "topology": [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "500ns"}],
            "links": links,
        },
    }


@pytest.mark.adapters
def test_a_degraded_link_slows_an_all_reduce_as_on_the_congestion_aware_network() -> None:
    """The cable between NPUs 1 and 2 at half speed 20 us into a ring all-reduce: on ns-3 the all-reduce takes
    longer than on the intact ring, and every run is within 5 % of the congestion-aware network's. The 5 % holds
    ns-3's packet headers (62 B in 4 KiB: 1.5 % of every serialisation), a packet's store-and-forward time per hop,
    and a change applying per packet on ns-3 where the congestion-aware network lets a message on the link when the
    speed changes finish at its old speed."""
    _needs_ns3()
    runs = {
        "intact": [],
        "degraded": [{"link": "dim 0: 1<->2", "bandwidth": "50%", "at": "20us"}],
        "failed": [{"link": "dim 0: 1<->2", "fail": True, "at": "20us"}],
    }
    ns3 = {name: stratasim.run(_study("ns3", links)).total_time_ps for name, links in runs.items()}
    congestion = {name: stratasim.run(_study("congestion_aware", links)).total_time_ps for name, links in runs.items()}
    assert ns3["degraded"] > 1.3 * ns3["intact"] and ns3["failed"] > ns3["intact"]
    for name in runs:
        assert abs(ns3[name] / congestion[name] - 1) < 0.05, (name, ns3[name], congestion[name])


def test_a_latency_of_its_own_is_refused_before_ns3_starts() -> None:
    """ns-3 carries a cable both ways over one channel with one delay: a link's own latency cannot be built."""
    topology = _ring(network_pb2.LinkChange(link="dim 0: 1->2", latency_ps=10**6))
    with pytest.raises(TopologyError) as refused:
        Ns3Network().configure(topology)
    assert str(refused.value) == (
        "link_changes[0] ('dim 0: 1->2'): latency: the ns3 backend builds each cable as one ns-3 channel, with one "
        "delay both ways, at its dimension's latency; give links their own latency on backend congestion_aware or "
        "flit_level"
    )


@pytest.mark.parametrize(
    ("link", "fragment"),
    [
        (
            {"link": "dim 0: 1->2", "latency": "1us"},
            "network.links[0]: latency: the ns3 backend builds each cable as one ns-3 channel",
        ),
        ({"link": "dim 0: 1->3", "bandwidth": "50%"}, "no link named 'dim 0: 1->3'"),
        ({"link": "dim 0: 1->2", "at": "1us", "restore": True}, "restores link dim 0: 1->2 at 1 us, but it is not"),
    ],
)
def test_bad_link_changes_on_ns3_are_one_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: dict[str, object], fragment: str
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_study("ns3", [link])))
    assert main(["check", str(path)]) != 0
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err, err
