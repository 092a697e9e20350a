"""``cancel`` on the networks that model links: a flow's messages leave the links at the cancel's time, and the
other flows have the capacity from then on.

The hand case: a ring of 4 NPUs, 1 GB/s (1 ns a byte), 1 ns links, cut-through. Flow b sends 10 bytes 0 -> 1 first and
flow a sends 10 bytes 0 -> 1 at once after it (ids in that order): a waits for b on link 0->1. Alone a arrives at
10 ns + 1 ns; behind b at 20 + 1 ns; b cancelled at t = 5 ns, a starts at t and arrives at t + 10 + 1 ns.
"""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import BackendError
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.network_layer.flit_level import FlitLevelNetwork
from stratasim.network_layer.mixed import MixedNetwork
from stratasim.v1 import network_pb2

Dim = network_pb2.Dimension
NS = 1000


def _ring(store_and_forward: bool = False) -> network_pb2.Topology:
    ring = Dim(kind=Dim.RING, size=4, bandwidth_bytes_per_s=1e9, latency_ps=NS)
    return network_pb2.Topology(
        dimensions=[ring], record_link_busy=True, store_and_forward=store_and_forward, cancellable=True
    )


def _run(
    network: CongestionAwareNetwork | FlitLevelNetwork,
    flows: tuple[int, int],
    cancel: tuple[int, int] | None,
    topology: network_pb2.Topology,
    size: int = 10,
) -> tuple[dict[int, int], list[int]]:
    """Message 0 (flow ``flows[0]``, b) then message 1 (flow ``flows[1]``, a), both 0 -> 1 at 0; then ``cancel`` =
    (flow, at); arrival per message id, and the ids taken off."""
    network.configure(topology)
    network.inject(
        network_pb2.SendBatch(id=[0, 1], src=[0, 0], dst=[1, 1], bytes=[size, size], send_time_ps=[0, 0], flow=flows)
    )
    arrivals: dict[int, int] = {}
    result = network.advance(NS - 1)
    taken = list(network.cancel(*cancel).id) if cancel else []
    while True:
        arrivals.update(zip(result.deliveries.id, result.deliveries.time_ps))
        if not result.has_next:
            return arrivals, taken
        result = network.advance(-1)


@pytest.mark.parametrize("flows", [(1, 2), (0, 1)], ids=["followed-flow", "flow-0"])
def test_the_message_behind_starts_on_the_link_at_the_cancel(flows: tuple[int, int]) -> None:
    """Flow 0's messages are not followed link by link (a single-job run pays nothing): cancelling it works alike."""
    behind, _ = _run(CongestionAwareNetwork(), flows, None, _ring())
    assert behind == {0: 10 * NS + NS, 1: 20 * NS + NS}
    network = CongestionAwareNetwork()
    cancelled, taken = _run(network, flows, (flows[0], 5 * NS), _ring())
    assert taken == [0] and cancelled == {1: 5 * NS + 10 * NS + NS}
    counters = network.counters()
    assert list(counters.link) == ["dim 0: 0->1"]
    assert (counters.busy_ps[0], counters.bytes[0], counters.messages[0]) == (15 * NS, 10, 1)
    assert counters.queue_ps[0] == 5 * NS  # a waited from 0 to the cancel
    assert [(b.start_ps[:], b.end_ps[:]) for b in counters.busy] == [([0], [15 * NS])]


def test_store_and_forward_frees_the_link_alike() -> None:
    """Store-and-forward: each link costs latency + serialisation: a arrives at t + 10 + 1 ns as well."""
    cancelled, taken = _run(CongestionAwareNetwork(), (1, 2), (1, 5 * NS), _ring(store_and_forward=True))
    assert taken == [0] and cancelled == {1: 5 * NS + 10 * NS + NS}


def test_a_cancel_with_nothing_of_the_flow_on_its_way_changes_nothing() -> None:
    intact, _ = _run(CongestionAwareNetwork(), (1, 2), None, _ring())
    unchanged, taken = _run(CongestionAwareNetwork(), (1, 2), (3, 5 * NS), _ring())
    assert taken == [] and unchanged == intact


def test_flit_level_frees_the_buffers_and_links_at_the_cancel() -> None:
    """Flits of a and b share link 0->1 round-robin; b's leave at the cancel, and a then has the link: it arrives
    earlier than behind b, later than alone, and no later than the cancel plus its own flits' time."""
    size = 10_000
    intact, _ = _run(FlitLevelNetwork(), (1, 2), None, _ring(), size)
    alone, _ = _run(FlitLevelNetwork(), (1, 2), (1, 1), _ring(), size)  # b off before its first flit moves
    network = FlitLevelNetwork()
    cancelled, taken = _run(network, (1, 2), (1, 2_000 * NS), _ring(), size)
    assert taken == [0] and set(cancelled) == {1}
    assert alone[1] < cancelled[1] < intact[1]
    assert cancelled[1] <= 2_000 * NS + alone[1]
    assert network.flit_hops > 0 and network.advance(-1).has_next is False


def test_mixed_cancels_in_every_backend_and_the_other_flow_arrives_no_later() -> None:
    """A ring of 4 on the flit-level network inside, a switch of 2 congestion-aware outside: every message from NPU 0
    crosses both; flow 1's legs leave whichever backend carries them at the cancel."""
    topology = network_pb2.Topology(
        dimensions=[
            Dim(kind=Dim.RING, size=4, bandwidth_bytes_per_s=1e9, latency_ps=NS, backend="flit_level"),
            Dim(kind=Dim.SWITCH, size=2, bandwidth_bytes_per_s=1e9, latency_ps=NS, backend="congestion_aware"),
        ],
        cancellable=True,
    )
    sends = network_pb2.SendBatch(
        id=list(range(6)), src=[0] * 6, dst=[5, 5, 6, 6, 7, 7], bytes=[4096] * 6, send_time_ps=[0] * 6, flow=[1, 2] * 3
    )

    def run(cancel: bool) -> tuple[dict[int, int], list[int]]:
        network = MixedNetwork()
        network.configure(topology)
        network.inject(sends)
        arrivals: dict[int, int] = {}
        result = network.advance(NS - 1)
        taken = list(network.cancel(1, 3_000 * NS).id) if cancel else []
        while True:
            arrivals.update(zip(result.deliveries.id, result.deliveries.time_ps))
            if not result.has_next:
                return arrivals, taken
            result = network.advance(-1)

    intact, _ = run(False)
    cancelled, taken = run(True)
    assert taken == [0, 2, 4] and set(cancelled) == {1, 3, 5}
    assert all(cancelled[mid] <= intact[mid] for mid in cancelled)
    assert any(cancelled[mid] < intact[mid] for mid in cancelled)


def test_a_network_not_configured_cancellable_refuses_a_cancel_and_keeps_no_record() -> None:
    """Without ``Topology.cancellable`` the congestion-aware network keeps no record of its crossings (a run that
    cannot cancel pays nothing for it), and a cancel is one clear error rather than a partial undo."""
    network = CongestionAwareNetwork()
    topology = _ring()
    topology.cancellable = False
    network.configure(topology)
    network.inject_columns([0, 1], [0, 0], [2, 2], [2**20, 2**20], [0, 0], [1, 2])
    network.advance(NS)
    assert network._log is None
    with pytest.raises(BackendError, match=r"cancel needs a topology configured as cancellable"):
        network.cancel(1, 2 * NS)
