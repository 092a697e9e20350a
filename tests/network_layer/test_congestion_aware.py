"""The congestion-aware network: zero-load agreement with the analytical one, queueing under contention."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import network_pb2, workload_pb2
from tests.system_layer.helpers import FC, RING, SWITCH, collective_graph, ser, topology

B, ALPHA = 50 * 10**9, 500_000
KINDS = st.sampled_from([RING, FC, SWITCH])


def deliver(net: CongestionAwareNetwork | AnalyticalNetwork, messages: list[tuple[int, int, int]]) -> list[int]:
    """Send (src, dst, bytes) at time 0; the arrival time of each, in send order."""
    batch = network_pb2.SendBatch(
        id=list(range(len(messages))),
        src=[m[0] for m in messages],
        dst=[m[1] for m in messages],
        bytes=[m[2] for m in messages],
        send_time_ps=[0] * len(messages),
    )
    net.inject(batch)
    result = net.advance(10**15)
    arrival = dict(zip(result.deliveries.id, result.deliveries.time_ps))
    return [arrival[i] for i in range(len(messages))]


@settings(max_examples=60, deadline=None)
@given(
    dims=st.lists(
        st.tuples(KINDS, st.integers(2, 6), st.integers(1, 400), st.integers(0, 5000)), min_size=1, max_size=3
    ),
    data=st.data(),
)
def test_a_lone_message_costs_what_the_analytical_network_charges(dims: list, data: st.DataObject) -> None:
    topo = topology(*[(kind, n, gbps * 10**9 / 8, lat) for kind, n, gbps, lat in dims])
    npus = 1
    for _, n, _, _ in dims:
        npus *= n
    src = data.draw(st.integers(0, npus - 1))
    dst = data.draw(st.integers(0, npus - 1).filter(lambda d: d != src))
    size = data.draw(st.integers(0, 1 << 22))
    aware, analytical = CongestionAwareNetwork(), AnalyticalNetwork()
    aware.configure(topo)
    analytical.configure(topo)
    assert deliver(aware, [(src, dst, size)]) == deliver(analytical, [(src, dst, size)])


def test_many_to_one_through_a_switch_queues_on_the_down_link() -> None:
    # Seven NPUs send m bytes to NPU 0 at once: their up-links are their own, but NPU 0's down-link carries
    # the messages one after another: arrivals 2 alpha + k ser(m), k = 1..7, against 2 alpha + ser(m) for all.
    m = 1 << 20
    topo = topology((SWITCH, 8, B, ALPHA))
    aware, analytical = CongestionAwareNetwork(), AnalyticalNetwork()
    aware.configure(topo)
    analytical.configure(topo)
    messages = [(src, 0, m) for src in range(1, 8)]
    assert sorted(deliver(aware, messages)) == [2 * ALPHA + k * ser(m, B) for k in range(1, 8)]
    assert deliver(analytical, messages) == [2 * ALPHA + ser(m, B)] * 7
    counters = dict(zip(aware.counters().link, zip(aware.counters().busy_ps, aware.counters().messages)))
    assert counters["dim 0: switch->0"] == (7 * ser(m, B), 7)
    assert counters["dim 0: 3->switch"] == (ser(m, B), 1)
    assert len(counters) == 8  # seven up-links and one down-link carried traffic


def test_store_and_forward_pays_each_link_in_full() -> None:
    topo = topology((RING, 8, B, ALPHA))
    topo.store_and_forward = True
    net = CongestionAwareNetwork()
    net.configure(topo)
    assert deliver(net, [(0, 3, 1000)]) == [3 * (ALPHA + ser(1000, B))]


def test_all_to_all_is_slower_than_the_analytical_estimate_under_contention() -> None:
    # A direct all-to-all over a ring: the far messages share links with the near ones.
    topo = topology((RING, 8, B, ALPHA))
    graphs = [collective_graph("all_to_all", 1 << 20)] * 8
    options = SystemOptions(algorithm={"*": ("direct",)})
    fast = simulate(graphs, AnalyticalNetwork(), topo, options).total_time_ps
    slow = simulate(graphs, CongestionAwareNetwork(), topo, options).total_time_ps
    assert slow > fast


def test_a_ring_all_reduce_meets_no_contention() -> None:
    topo = topology((RING, 8, B, ALPHA), (SWITCH, 4, B, ALPHA))
    graphs = [collective_graph("all_reduce", 1 << 20)] * 32
    options = SystemOptions(splits=4, aggregate=False)
    assert (
        simulate(graphs, CongestionAwareNetwork(), topo, options).total_time_ps
        == simulate(graphs, AnalyticalNetwork(), topo, options).total_time_ps
    )


def test_it_is_never_aggregated_and_sends_must_not_come_late() -> None:
    net = CongestionAwareNetwork()
    info = net.configure(topology((RING, 4, B, ALPHA)))
    assert not info.stateless and info.lookahead_ps == ALPHA
    net.advance(10 * ALPHA)
    with pytest.raises(Exception, match="before the network's committed time"):
        net.inject(network_pb2.SendBatch(id=[1], src=[0], dst=[1], bytes=[1], send_time_ps=[ALPHA]))


def test_point_to_point_sends_share_links_too() -> None:
    # NPUs 1 and 2 both send to NPU 3 of a switch at once: the second arrival waits a serialisation.
    topo = topology((SWITCH, 4, B, ALPHA))
    m = 1 << 16
    send = workload_pb2.COMM_SEND_NODE
    graphs = (
        [workload_pb2.ExecutionGraph()]
        + [
            workload_pb2.ExecutionGraph(nodes=[workload_pb2.Node(id=1, type=send, peer=3, comm_bytes=m, tag=n)])
            for n in (1, 2)
        ]
        + [
            workload_pb2.ExecutionGraph(
                nodes=[
                    workload_pb2.Node(id=1, type=workload_pb2.COMM_RECV_NODE, peer=1, tag=1),
                    workload_pb2.Node(id=2, type=workload_pb2.COMM_RECV_NODE, peer=2, tag=2),
                ]
            )
        ]
    )
    result = simulate(graphs, CongestionAwareNetwork(), topo, SystemOptions())
    assert result.per_npu[3].finish_ps == 2 * ALPHA + 2 * ser(m, B)


def test_in_process_and_spawned_runs_agree() -> None:
    from pathlib import Path

    from stratasim.config.study_file import load_study
    from stratasim.study.run import run_study

    quickstart = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
    common = ["network.backend=congestion_aware", "system.algorithm=direct", "system.active_chunks=2"]
    local = run_study(load_study(quickstart, common)).to_dict()
    remote = run_study(load_study(quickstart, [*common, "network.spawn=true"])).to_dict()
    for report in (local, remote):
        del report["wall_seconds"], report["backends"]
    assert local == remote


def test_a_batch_in_any_order_is_decided_in_send_order_as_if_sent_one_by_one() -> None:
    # Sends of one batch need not be in time order, and messages seen before reuse their routes: the network
    # decides each link in (send time, send order) either way, as it would for one message per batch.
    topo = topology((RING, 4, B, ALPHA), (SWITCH, 2, B, 2 * ALPHA))
    messages = [(0, 5, 1 << 16, 3), (2, 7, 1000, 0), (1, 5, 1 << 16, 3), (0, 5, 1 << 16, 0), (3, 4, 0, 3)] * 2
    together = CongestionAwareNetwork()
    together.configure(topo)
    together.inject(
        network_pb2.SendBatch(
            id=list(range(len(messages))),
            src=[m[0] for m in messages],
            dst=[m[1] for m in messages],
            bytes=[m[2] for m in messages],
            send_time_ps=[1 + m[3] for m in messages],
        )
    )
    one_by_one = CongestionAwareNetwork()
    one_by_one.configure(topo)
    for i, (src, dst, size, sent) in sorted(enumerate(messages), key=lambda item: (item[1][3], item[0])):
        one_by_one.inject(network_pb2.SendBatch(id=[i], src=[src], dst=[dst], bytes=[size], send_time_ps=[1 + sent]))
    results = [network.advance(10**12) for network in (together, one_by_one)]
    assert results[0] == results[1] and len(results[0].deliveries.id) == len(messages)
    assert together.counters() == one_by_one.counters()
    with pytest.raises(Exception, match="message 7: cannot send from NPU 2 to NPU 2"):
        together.inject(
            network_pb2.SendBatch(id=[6, 7], src=[0, 2], dst=[5, 2], bytes=[1, 1], send_time_ps=[10**13] * 2)
        )
