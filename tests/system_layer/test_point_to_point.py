"""Point-to-point send and receive nodes: matched by source and tag, completing when the message arrives."""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from tests.system_layer.helpers import RING, ser, topology

B, ALPHA, S = 50 * 10**9, 500_000, 1 << 20
TOPO = topology((RING, 4, B, ALPHA))
HOP = ALPHA + ser(S, B)
COMP, SEND, RECV = workload_pb2.COMP_NODE, workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE


def graph(*nodes: dict) -> workload_pb2.ExecutionGraph:
    return workload_pb2.ExecutionGraph(nodes=[workload_pb2.Node(**node) for node in nodes])


def run(graphs: list[workload_pb2.ExecutionGraph]):
    return simulate(graphs, AnalyticalNetwork(), TOPO, SystemOptions())


def test_a_pipeline_hands_activations_down_the_ring() -> None:
    # NPU 0 computes 10 us then sends to NPU 1, which computes 10 us on it and sends to NPU 2, and so on.
    work = 10_000_000
    stages = []
    for npu in range(4):
        nodes = []
        if npu:
            nodes.append(dict(id=0, type=RECV, peer=npu - 1, comm_bytes=S, tag=7))
        nodes.append(dict(id=1, type=COMP, duration_ps=work, data_deps=[0] if npu else []))
        if npu < 3:
            nodes.append(dict(id=2, type=SEND, peer=npu + 1, comm_bytes=S, tag=7, data_deps=[1]))
        stages.append(graph(*nodes))
    result = run(stages)
    assert result.total_time_ps == 4 * work + 3 * HOP
    assert [npu.finish_ps for npu in result.per_npu] == [
        work + HOP,
        2 * (work + HOP),
        3 * (work + HOP),
        4 * work + 3 * HOP,
    ]


def test_a_receive_ready_after_its_message_arrived_completes_at_once() -> None:
    late = 5 * HOP
    sender = graph(dict(id=1, type=SEND, peer=1, comm_bytes=S, tag=1))
    receiver = graph(dict(id=1, type=COMP, duration_ps=late), dict(id=2, type=RECV, peer=0, tag=1, data_deps=[1]))
    empty = graph()
    result = run([sender, receiver, empty, empty])
    assert result.per_npu[1].finish_ps == late
    assert result.per_npu[0].finish_ps == HOP


def test_messages_are_matched_by_source_and_tag() -> None:
    # NPU 0 sends tags 1 then 2; NPU 1 receives tag 2 first: the tag-1 message cannot satisfy it.
    sender = graph(
        dict(id=1, type=SEND, peer=1, comm_bytes=S, tag=1),
        dict(id=2, type=SEND, peer=1, comm_bytes=4 * S, tag=2, data_deps=[1]),
    )
    receiver = graph(dict(id=1, type=RECV, peer=0, tag=2), dict(id=2, type=RECV, peer=0, tag=1, data_deps=[1]))
    empty = graph()
    result = run([sender, receiver, empty, empty])
    assert result.per_npu[1].finish_ps == HOP + ALPHA + ser(4 * S, B)


def test_a_send_to_itself_or_nowhere_is_named() -> None:
    with pytest.raises(WorkloadError, match="peer NPU 9 must be another of the 4 NPUs"):
        run([graph(dict(id=5, type=SEND, peer=9, comm_bytes=1))] * 4)


def test_point_to_point_studies_are_not_aggregated() -> None:
    sends = [
        graph(
            dict(id=1, type=SEND, peer=(n + 1) % 4, comm_bytes=S, tag=0), dict(id=2, type=RECV, peer=(n - 1) % 4, tag=0)
        )
        for n in range(4)
    ]
    result = run(sends)
    assert result.simulated_npus == 4 and result.total_time_ps == HOP
