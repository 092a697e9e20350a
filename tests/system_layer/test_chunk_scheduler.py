"""Chunked, pipelined collectives against schedules derived by hand."""

from __future__ import annotations

from stratasim.system_layer import Scheduling
from tests.system_layer.helpers import RING, run_collective, ser, topology

B = 50 * 10**9
ALPHA = 500_000


def test_chunks_run_one_after_another_on_one_dimension() -> None:
    # With one active chunk per dimension, k chunks of S/k take k times one chunk's ring all-reduce.
    n, size, splits = 8, 1 << 20, 4
    result = run_collective(topology((RING, n, B, ALPHA)), "all_reduce", size, splits=splits)
    one_chunk = 2 * (n - 1) * (ALPHA + ser(size // splits // n, B))
    assert result.total_time_ps == splits * one_chunk


def test_two_active_chunks_overlap_on_the_congestion_free_network() -> None:
    n, size = 8, 1 << 20
    result = run_collective(topology((RING, n, B, ALPHA)), "all_reduce", size, splits=2, active_chunks=2)
    assert result.total_time_ps == 2 * (n - 1) * (ALPHA + ser(size // 2 // n, B))


def test_chunks_pipeline_across_dimensions() -> None:
    # Two chunks, phases P0 (dim 0) and P1 (dim 1). Chunk 0: [0, P0] then [P0, P0+P1]. Chunk 1 enters dim 0
    # at P0 and dim 1 once both it finished dim 0 (2 P0) and chunk 0 left dim 1 (P0 + P1).
    n0, n1, size = 4, 8, 1 << 20
    a1, b1 = 2_000_000, 10 * 10**9
    chunk = size // 2
    p0 = 2 * (n0 - 1) * (ALPHA + ser(chunk // n0, B))
    p1 = 2 * (n1 - 1) * (a1 + ser(chunk // n1, b1))
    result = run_collective(topology((RING, n0, B, ALPHA), (RING, n1, b1, a1)), "all_reduce", size, splits=2)
    assert result.total_time_ps == max(2 * p0, p0 + p1) + p1
    stats = result.collectives[0]
    # Chunk 0 waits nowhere; chunk 1 waits P0 for dim 0 and max(0, P1 - P0) for dim 1.
    assert stats.queue_delay_ps_per_phase == (p0 // 2, max(0, p1 - p0) // 2)


def test_lifo_serves_the_newest_collective_first_and_fifo_the_oldest() -> None:
    from stratasim.network_layer.analytical import AnalyticalNetwork
    from stratasim.system_layer import SystemOptions, simulate
    from stratasim.v1 import workload_pb2

    # Three independent all-reduces issued at time 0, one after another: the first starts at once, then the
    # policy picks among the two still waiting.
    graph = workload_pb2.ExecutionGraph()
    for i in range(3):
        graph.nodes.add(id=i, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=1 << 20)
    topo = topology((RING, 4, B, ALPHA))
    finish = {}
    for policy in Scheduling:
        result = simulate([graph] * 4, AnalyticalNetwork(), topo, SystemOptions(scheduling=policy))
        finish[policy] = [c.end_ps for c in result.collectives]
    first, second, third = sorted(finish[Scheduling.FIFO])
    assert finish[Scheduling.FIFO] == [first, second, third]
    assert finish[Scheduling.LIFO] == [first, third, second]
