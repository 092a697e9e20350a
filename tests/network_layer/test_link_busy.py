"""The congestion-aware network records when each link was busy, only when the topology asks, and the stretches
add up to the link's busy time."""

from __future__ import annotations

from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.v1 import network_pb2
from tests.system_layer.helpers import RING, SWITCH, ser, topology

B, ALPHA = 50 * 10**9, 500_000
M = 1 << 20


def run(topo: network_pb2.Topology, messages: list[tuple[int, int, int]]) -> network_pb2.LinkCounters:
    """Send (src, dst, send time) messages of M bytes; run everything; the counters."""
    net = CongestionAwareNetwork()
    net.configure(topo)
    net.inject(
        network_pb2.SendBatch(
            id=list(range(len(messages))),
            src=[m[0] for m in messages],
            dst=[m[1] for m in messages],
            bytes=[M] * len(messages),
            send_time_ps=[m[2] for m in messages],
        )
    )
    net.advance(10**15)
    return net.counters()


def spans(counters: network_pb2.LinkCounters) -> dict[str, list[tuple[int, int]]]:
    return {busy.link: list(zip(busy.start_ps, busy.end_ps)) for busy in counters.busy}


def recording(topo: network_pb2.Topology) -> network_pb2.Topology:
    topo.record_link_busy = True
    return topo


def test_queued_messages_make_one_stretch_and_idle_gaps_split_them() -> None:
    # Three NPUs send to NPU 0 through a switch: two at once (the second queues behind the first on the down
    # link), one long after the link went idle.
    late = 10 * ser(M, B)
    counters = run(recording(topology((SWITCH, 4, B, ALPHA))), [(1, 0, 0), (2, 0, 0), (3, 0, late)])
    down = spans(counters)["dim 0: switch->0"]
    assert down == [(ALPHA, ALPHA + 2 * ser(M, B)), (late + ALPHA, late + ALPHA + ser(M, B))]
    assert spans(counters)["dim 0: 1->switch"] == [(0, ser(M, B))]
    busy = dict(zip(counters.link, counters.busy_ps))
    assert {link: sum(end - start for start, end in stretches) for link, stretches in spans(counters).items()} == busy


def test_store_and_forward_stretches_sum_to_the_busy_time() -> None:
    topo = recording(topology((RING, 8, B, ALPHA)))
    topo.store_and_forward = True
    counters = run(topo, [(0, 3, 0), (1, 3, 0), (0, 2, ser(M, B) // 2)])
    busy = dict(zip(counters.link, counters.busy_ps))
    stretches = spans(counters)
    assert set(stretches) == set(busy)
    for link, own in stretches.items():
        assert all(start < end for start, end in own) and all(a[1] < b[0] for a, b in zip(own, own[1:]))
        assert sum(end - start for start, end in own) == busy[link]


def test_nothing_is_recorded_unless_asked() -> None:
    counters = run(topology((SWITCH, 4, B, ALPHA)), [(1, 0, 0), (2, 0, 0)])
    assert len(counters.link) == 3 and not counters.busy
