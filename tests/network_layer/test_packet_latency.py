"""Per-packet latency in the link counters: exact for a lone packet at zero load, percentiles ordered and within
the histogram's 1/32, added up across the backends of a mixed network, and a link's busy stretches recorded
flit by flit, back-to-back flits merged."""

from __future__ import annotations

import random

import pytest

from stratasim.network_layer.flit_level import FlitLevelNetwork
from stratasim.network_layer.flit_level.packets import packet_payloads
from stratasim.network_layer.mixed import MixedNetwork
from stratasim.network_layer.packet_latency import PacketLatency, bucket_high, bucket_of
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import link, torus
from tests.network_layer.test_flit_level import ALPHA, APART, DEFAULT, B, K, P, batch, flits, transit
from tests.system_layer.helpers import RING, SWITCH, topology


def test_buckets_cover_every_latency_in_order_within_a_32nd() -> None:
    rng = random.Random(5)
    samples = sorted({*range(300), *(rng.randrange(1, 10**13) for _ in range(3000)), 2**40 - 1, 2**40})
    buckets = [bucket_of(v) for v in samples]
    assert buckets == sorted(buckets)
    for value, bucket in zip(samples, buckets):
        high = bucket_high(bucket)
        assert value <= high and bucket_of(high) == bucket and bucket_of(high + 1) == bucket + 1
        assert high - value <= value // 32
    assert [bucket_high(b) for b in range(64)] == list(range(64))


def test_a_lone_packet_takes_links_pipelines_and_flits_exactly() -> None:
    # Torus 4x4, NPU 0 to NPU 2: two links of latency ALPHA, three routers of pipeline P, one packet of F flits
    # whose head is received whole at the router between the links: 2 ALPHA + 3 P + (1 + F) K (slots aligned).
    network = FlitLevelNetwork()
    size = 100
    (took,) = transit(network, torus(4, 4, links=(link(B, ALPHA),)), [(0, 2, size)])
    expected = 2 * ALPHA + 3 * P + (1 + flits(size)) * K
    assert took == expected
    latency = network.counters().packet_latency
    assert (latency.packets, latency.total_ps, latency.min_ps, latency.max_ps) == (1, expected, expected, expected)
    assert latency.p50_ps == latency.p99_ps == expected
    assert list(latency.count) == [1] and list(latency.bucket) == [bucket_of(expected)]


def test_percentiles_are_ordered_and_the_mean_is_the_total_over_packets() -> None:
    network = FlitLevelNetwork()
    network.configure(torus(4, 4, links=(link(B, ALPHA),)))
    messages = [(src, (src + 5) % 16, 4096) for src in range(16)] + [(3, 12, 20_000), (7, 0, 1)]
    network.inject(batch(messages, [APART] * len(messages)))
    network.advance(10 * APART)
    latency = network.counters().packet_latency
    assert latency.packets == sum(len(packet_payloads(size, DEFAULT)) for _, _, size in messages)
    assert latency.min_ps <= latency.p50_ps <= latency.p99_ps <= latency.max_ps
    assert latency.min_ps < latency.total_ps / latency.packets < latency.max_ps
    assert sum(latency.count) == latency.packets and list(latency.bucket) == sorted(latency.bucket)
    assert network.packet_latency.to_proto() == latency


def test_percentiles_come_from_the_histogram_clamped_to_what_was_seen() -> None:
    latency = PacketLatency()
    for value in range(1000, 2000):
        latency.add(value)
    assert (
        latency.percentile_ps(50) == bucket_high(bucket_of(1499))
        and abs(latency.percentile_ps(50) - 1499) <= 1499 // 32
    )
    assert latency.percentile_ps(100) == 1999  # the bucket's end is past what was seen: clamped
    assert PacketLatency().to_proto() == pb.PacketLatency()
    twice = PacketLatency()
    twice.merge(latency.to_proto())
    twice.merge(latency.to_proto())
    assert (twice.packets, twice.total_ps, twice.least_ps, twice.most_ps) == (2000, 2 * latency.total_ps, 1000, 1999)
    assert twice.percentile_ps(99) == latency.percentile_ps(99)


def test_a_mixed_network_adds_up_its_backends_packets() -> None:
    topo = topology((RING, 4, B, ALPHA), (SWITCH, 2, B // 2, 2 * ALPHA), (RING, 2, B, ALPHA))
    for dim, name in zip(topo.dimensions, ("flit_level", "congestion_aware", "flit_level")):
        dim.backend = name
    network = MixedNetwork()
    network.configure(topo)
    network.inject(batch([(0, 13, 1000), (1, 2, 1000)], [APART, APART]))
    while network.advance(-1).has_next:
        pass
    latency = network.counters().packet_latency
    legs = 3  # 0 -> 13 crosses both flit-level dimensions (a leg in each), 1 -> 2 the first one
    assert latency.packets == legs * len(packet_payloads(1000, DEFAULT))
    assert latency.min_ps <= latency.p50_ps <= latency.p99_ps <= latency.max_ps


@pytest.mark.parametrize("record", [False, True])
def test_busy_stretches_are_flit_slots_merged_when_back_to_back(record: bool) -> None:
    topo = torus(4, 4, links=(link(B, ALPHA),))
    topo.record_link_busy = record
    network = FlitLevelNetwork()
    network.configure(topo)
    network.inject(batch([(0, 1, 10_000), (0, 1, 500), (4, 1, 700)], [APART, APART + 10**6, APART]))
    network.advance(10 * APART)
    counters = network.counters()
    if not record:
        assert not counters.busy
        return
    busy = dict(zip(counters.link, counters.busy_ps))
    assert {spans.link for spans in counters.busy} == {name for name, ps in busy.items() if ps}
    for spans in counters.busy:
        pairs = list(zip(spans.start_ps, spans.end_ps))
        assert all(start < end for start, end in pairs)
        assert all(end < following for (_, end), (following, _) in zip(pairs, pairs[1:]))  # merged when touching
        assert sum(end - start for start, end in pairs) == busy[spans.link]
    first = next(spans for spans in counters.busy if spans.link == counters.link[0])
    assert len(first.start_ps) < flits(10_000)  # a stream of flits is one stretch, not one per flit
