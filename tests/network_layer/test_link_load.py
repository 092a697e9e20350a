"""Link counters for shared fabrics: the time messages queued for each link, and each link's load by flow (the
sending NPU's job), from the congestion-aware network alone and under the mixed network."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import BackendError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.network_layer.flit_level import FlitLevelNetwork
from stratasim.network_layer.mixed import MixedNetwork
from stratasim.v1 import network_pb2
from tests.system_layer.helpers import RING, SWITCH, ser, topology

B, ALPHA, S = 50 * 10**9, 500_000, 1 << 20
RING4 = topology((RING, 4, B, ALPHA))


def counters(
    network: CongestionAwareNetwork | MixedNetwork | FlitLevelNetwork,
    topo: network_pb2.Topology,
    sends: list[tuple[int, int, int, int]],
    flows: list[int] | None = None,
) -> network_pb2.LinkCounters:
    """The counters after ``sends`` (src, dst, bytes, send time) of ``flows`` all arrived."""
    network.configure(topo)
    batch = network_pb2.SendBatch(
        id=list(range(len(sends))),
        src=[s[0] for s in sends],
        dst=[s[1] for s in sends],
        bytes=[s[2] for s in sends],
        send_time_ps=[s[3] for s in sends],
        flow=flows or [],
    )
    network.inject(batch)
    arrived = 0
    while arrived < len(sends):
        arrived += len(network.advance(-1).deliveries.id)
    return network.counters()


def by_link(result: network_pb2.LinkCounters) -> dict[str, dict[int, tuple[int, int, int]]]:
    """Each link's rows by flow: (bytes, messages, queue ps)."""
    rows: dict[str, dict[int, tuple[int, int, int]]] = defaultdict(dict)
    for index, flow, size, messages, queue in zip(
        result.flow_link, result.flow, result.flow_bytes, result.flow_messages, result.flow_queue_ps
    ):
        rows[result.link[index]][flow] = (size, messages, queue)
    return dict(rows)


def test_the_second_of_two_messages_on_a_link_waits_the_first_ones_serialisation() -> None:
    # Both leave NPU 0 for NPU 1 at 0: one starts at once, the other waits for it to be pushed onto the link.
    result = counters(CongestionAwareNetwork(), RING4, [(0, 1, S, 0), (0, 1, S, 0)])
    assert list(result.link) == ["dim 0: 0->1"]
    assert list(result.queue_ps) == [ser(S, B)]
    assert not result.flow_link  # no flows given: no rows


def test_a_message_arriving_after_the_link_is_free_does_not_queue() -> None:
    result = counters(CongestionAwareNetwork(), RING4, [(0, 1, S, 0), (0, 1, S, ser(S, B))])
    assert list(result.queue_ps) == [0]


def test_a_head_that_finds_the_link_busy_waits_the_rest_of_its_transmission() -> None:
    # NPU 1's message starts on 1->2 at 0; NPU 0's head reaches 1->2 one latency later (cut-through).
    result = counters(CongestionAwareNetwork(), RING4, [(1, 2, S, 0), (0, 2, S, 0)], flows=[1, 0])
    queue = dict(zip(result.link, result.queue_ps))
    assert queue == {"dim 0: 0->1": 0, "dim 0: 1->2": ser(S, B) - ALPHA}
    assert by_link(result)["dim 0: 1->2"] == {0: (S, 1, ser(S, B) - ALPHA), 1: (S, 1, 0)}
    assert by_link(result)["dim 0: 0->1"] == {0: (S, 1, 0)}


def test_flow_rows_add_up_to_their_links() -> None:
    sends = [(src, (src + hop) % 4, 4096 * (1 + src), 1000 * hop) for src in range(4) for hop in (1, 2, 3)]
    flows = [src % 3 for src in range(4) for _ in (1, 2, 3)]
    result = counters(CongestionAwareNetwork(), RING4, sends, flows)
    rows = by_link(result)
    assert set(rows) == set(result.link)
    for link, size, messages, queue in zip(result.link, result.bytes, result.messages, result.queue_ps):
        assert [sum(column) for column in zip(*rows[link].values())] == [size, messages, queue]
    assert list(result.flow_link) == sorted(result.flow_link)


def test_flows_all_zero_give_no_rows_and_the_same_counters() -> None:
    sends = [(0, 2, S, 0), (1, 3, S, 0), (3, 1, S, 5)]
    plain = counters(CongestionAwareNetwork(), RING4, sends)
    zeros = counters(CongestionAwareNetwork(), RING4, sends, [0, 0, 0])
    assert zeros == plain


def test_a_flow_column_of_the_wrong_length_is_refused() -> None:
    network = CongestionAwareNetwork()
    network.configure(RING4)
    with pytest.raises(BackendError, match="a batch of 2 messages gives 1 flows"):
        network.inject_columns([0, 1], [0, 1], [1, 2], [8, 8], [0, 0], [1])


def test_the_mixed_network_points_flow_rows_at_its_merged_links() -> None:
    # The flit-level ring's links come first in the merged counters: the congestion-aware switch's rows must point
    # past them.
    topo = topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA))
    topo.dimensions[0].backend = "flit_level"
    topo.dimensions[1].backend = "congestion_aware"
    sends = [(0, 5, S, 0), (1, 5, S, 0), (4, 2, S, 0)]
    result = counters(MixedNetwork(_backends()), topo, sends, [1, 0, 2])
    assert not result.queue_ps  # the flit-level backend measures none, so none is given for the mix
    assert [link[:5] for link in result.link] == ["dim 0"] * 3 + ["dim 1"] * 4
    bytes_by_flow = {link: {flow: row[:2] for flow, row in rows.items()} for link, rows in by_link(result).items()}
    assert bytes_by_flow == {
        "dim 0: 0->1": {1: (S, 1)},
        "dim 0: 4->5": {2: (S, 1)},
        "dim 0: 5->6": {2: (S, 1)},
        "dim 1: 1->switch": {0: (S, 1), 1: (S, 1)},
        "dim 1: switch->5": {0: (S, 1), 1: (S, 1)},
        "dim 1: 6->switch": {2: (S, 1)},
        "dim 1: switch->2": {2: (S, 1)},
    }


def test_the_mixed_network_keeps_queue_times_when_every_backend_with_links_gives_them() -> None:
    topo = topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA))
    topo.dimensions[0].backend = "congestion_aware"
    sends = [(0, 5, S, 0), (0, 5, S, 0)]
    result = counters(MixedNetwork(_backends()), topo, sends)
    assert dict(zip(result.link, result.queue_ps)) == {"dim 0: 0->1": ser(S, B)}


def _backends() -> Callable[[str], NetworkBackend]:
    """A loader of the mixed network's backends by name, without the registry."""
    made: dict[str, Callable[[], NetworkBackend]] = {
        "congestion_aware": CongestionAwareNetwork,
        "flit_level": FlitLevelNetwork,
        "analytical": AnalyticalNetwork,
    }
    return lambda name: made[name]()


def test_the_flit_level_network_counts_a_message_and_its_flow_on_every_link_it_crosses() -> None:
    # Two dimensions make two segments: the links of the second count the message as those of the first do.
    topo = topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA))
    result = counters(FlitLevelNetwork(), topo, [(0, 5, 4096, 0), (1, 5, 4096, 0)], [1, 0])
    assert dict(zip(result.link, result.messages)) == {"dim 0: 0->1": 1, "dim 1: 1->switch": 2, "dim 1: switch->5": 2}
    assert not result.queue_ps
    assert by_link(result) == {
        "dim 0: 0->1": {1: (4096, 1, 0)},
        "dim 1: 1->switch": {0: (4096, 1, 0), 1: (4096, 1, 0)},
        "dim 1: switch->5": {0: (4096, 1, 0), 1: (4096, 1, 0)},
    }
