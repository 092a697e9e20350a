"""Execution graphs are checked before they run; a broken graph names the NPU and node at fault."""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import SimulationError, WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from tests.system_layer.helpers import RING, topology

TOPO = topology((RING, 4, 50e9, 1000))


def graph(*nodes: dict) -> workload_pb2.ExecutionGraph:
    return workload_pb2.ExecutionGraph(nodes=[workload_pb2.Node(**node) for node in nodes])


def comp(node_id: int, ps: int = 1000, deps: tuple[int, ...] = (), name: str = "") -> dict:
    return dict(id=node_id, name=name, type=workload_pb2.COMP_NODE, duration_ps=ps, data_deps=list(deps))


def run(graphs: list[workload_pb2.ExecutionGraph]):
    return simulate(graphs, AnalyticalNetwork(), TOPO, SystemOptions())


def test_compute_nodes_share_one_stream_in_ready_order() -> None:
    result = run([graph(comp(1, 100), comp(2, 200), comp(3, 50, deps=(1, 2)))] * 4)
    assert result.total_time_ps == 350
    assert result.per_npu[0].compute_ps == 350 and result.per_npu[0].exposed_comm_ps == 0


def test_compute_overlaps_a_collective() -> None:
    coll = dict(id=2, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=4096)
    alone = run([graph(coll)] * 4).total_time_ps
    long_compute = alone * 3
    result = run([graph(coll, comp(1, long_compute))] * 4)
    assert result.total_time_ps == long_compute
    assert result.per_npu[0].comm_ps == alone


@pytest.mark.parametrize(
    ("nodes", "fragment"),
    [
        (
            (comp(1, deps=(2,)), comp(2, deps=(1,), name="loop")),
            r"NPU 0 node \d( \(.*\))?: is part of a dependency cycle: \d.* -> \d.* -> \d",
        ),
        ((comp(1, deps=(9,)),), "NPU 0 node 1: depends on node 9, which is not in the graph"),
        ((comp(1), comp(1)), "the id 1 is used twice"),
        ((dict(id=1, type=workload_pb2.INVALID_NODE),), "node type INVALID_NODE is not supported"),
        ((comp(1, ps=-5),), "negative duration"),
        ((dict(id=1, type=workload_pb2.COMM_COLL_NODE, group=[0, 7]),), "group names NPU 7, but there are only 4"),
    ],
)
def test_broken_graphs_are_named(nodes: tuple[dict, ...], fragment: str) -> None:
    with pytest.raises(WorkloadError, match=fragment):
        run([graph(*nodes)] * 4)


def test_more_npus_than_the_topology_is_an_error() -> None:
    with pytest.raises(WorkloadError, match="needs 5 NPUs but the topology has 4"):
        run([graph(comp(1))] * 5)


def test_mismatched_collectives_are_named() -> None:
    a = graph(dict(id=1, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=10))
    b = graph(dict(id=1, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_GATHER, comm_bytes=10))
    with pytest.raises(WorkloadError, match="all_gather of 10 B here but all_reduce of 10 B on another NPU"):
        run([a, a, b, a])


def test_a_collective_some_members_never_issue_is_a_deadlock() -> None:
    coll = graph(dict(id=1, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=1024))
    with pytest.raises(SimulationError, match="deadlock"):
        run([coll, coll, coll, graph(comp(1))])


def test_results_are_identical_run_to_run() -> None:
    coll = graph(
        dict(id=1, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=99_999),
        comp(2, 12_345, deps=(1,)),
        dict(id=3, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_TO_ALL, comm_bytes=7777),
    )
    first = simulate([coll] * 4, AnalyticalNetwork(), TOPO, SystemOptions(splits=3), record_trace=True)
    second = simulate([coll] * 4, AnalyticalNetwork(), TOPO, SystemOptions(splits=3), record_trace=True)
    assert first == second


def test_memory_nodes_queue_on_the_local_memory_channel_and_metadata_is_free() -> None:
    from stratasim.network_layer.analytical import AnalyticalNetwork
    from stratasim.system_layer import SystemOptions, simulate
    from tests.system_layer.helpers import RING, topology

    g = workload_pb2.ExecutionGraph()
    g.nodes.add(id=1, type=workload_pb2.METADATA_NODE, name="process_group:init")
    g.nodes.add(id=2, type=workload_pb2.MEM_LOAD_NODE, comm_bytes=4000, data_deps=[1])
    g.nodes.add(id=3, type=workload_pb2.MEM_STORE_NODE, comm_bytes=2000, data_deps=[1])  # queues behind the load
    g.nodes.add(id=4, type=workload_pb2.COMP_NODE, duration_ps=500, data_deps=[2])
    topo = topology((RING, 2, 10**9, 1000))
    options = SystemOptions(local_mem_bw="1TB/s")  # 1 byte/ps
    result = simulate([g, g], AnalyticalNetwork(), topo, options)
    assert result.total_time_ps == 6000  # load 0-4000, store 4000-6000, compute 4000-4500
    free = simulate([g, g], AnalyticalNetwork(), topo, SystemOptions())
    assert free.total_time_ps == 500


def test_a_memory_node_stating_its_duration_takes_it_on_the_channel_whatever_its_bytes() -> None:
    # A copy over the host link its workload priced (a serving replay's KV swap): duration_ps, not comm_bytes at
    # local_mem_bw (set or not); the compute waiting on it idles, charged to its communicator, not computing.
    g = workload_pb2.ExecutionGraph()
    g.nodes.add(id=1, type=workload_pb2.MEM_STORE_NODE, comm_bytes=4000, duration_ps=700, pg_name="host")
    g.nodes.add(id=2, type=workload_pb2.MEM_LOAD_NODE, duration_ps=300, pg_name="host", data_deps=[1])
    g.nodes.add(id=3, type=workload_pb2.COMP_NODE, duration_ps=500, data_deps=[2])
    topo = topology((RING, 2, 10**9, 1000))
    for options in (SystemOptions(), SystemOptions(local_mem_bw="1TB/s")):
        result = simulate([g, g], AnalyticalNetwork(), topo, options)
        assert result.total_time_ps == 1500  # store 0-700, load 700-1000, compute 1000-1500
        stats = result.per_npu[0]
        assert stats.compute_ps == 500 and dict(stats.exposed_comm_ps_by_kind) == {"host": 1000}
    g.nodes[0].duration_ps = -1
    with pytest.raises(WorkloadError, match="negative duration -1 ps"):
        simulate([g, g], AnalyticalNetwork(), topo, SystemOptions())


def test_groups_are_interned_once_and_equal_their_members() -> None:
    """A node's group is its sorted members, one object per distinct group, equal to and hashing as the plain
    tuple (so tables keyed by groups behave as before); an empty group stays empty."""
    from stratasim.kernel.grid import Grid
    from stratasim.system_layer.engine.collective_table import CollectiveTable

    table = CollectiveTable(Grid((4,)), SystemOptions(), 4)
    first = table.group(workload_pb2.Node(group=[3, 1, 2]))
    again = table.group(workload_pb2.Node(group=[2, 3, 1]))
    assert first is again and first == (1, 2, 3) and hash(first) == hash((1, 2, 3))
    assert table.group(workload_pb2.Node(group=[0, 1, 2, 3])) == (0, 1, 2, 3)
    assert table.group(workload_pb2.Node()) == ()
