"""Collectives on communicator groups: sub-grids run one phase per spanned dimension, others one flat phase."""

from __future__ import annotations

from stratasim.kernel.grid import Grid
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.system_layer.collectives.groups import FLAT, phases_of
from stratasim.v1 import workload_pb2
from tests.system_layer.helpers import FC, RING, ser, topology

B, ALPHA = 50 * 10**9, 500_000


def test_a_whole_dimension_is_one_phase_along_it() -> None:
    (phase,) = phases_of(tuple(range(0, 32, 4)), Grid((4, 8)))
    assert (phase.dim, phase.size) == (1, 8)
    assert phase.line(13) == ((1, 5, 9, 13, 17, 21, 25, 29), 3)


def test_a_group_across_two_dimensions_runs_a_phase_in_each() -> None:
    grid = Grid((4, 2, 2))
    phases = phases_of((1, 5, 9, 13), grid)
    assert [(p.dim, p.size) for p in phases] == [(1, 2), (2, 2)]
    assert phases[0].line(9) == ((9, 13), 0)
    assert phases[1].line(9) == ((1, 9), 1)


def test_part_of_a_dimension_is_a_shorter_line() -> None:
    (phase,) = phases_of((2, 3, 4, 5), Grid((8,)))
    assert phase.line(4) == ((2, 3, 4, 5), 2)


def test_a_group_that_is_not_a_product_runs_flat() -> None:
    (phase,) = phases_of((0, 1, 5), Grid((4, 2)))
    assert phase.dim == FLAT and phase.line(5) == ((0, 1, 5), 2)


def graph(group: list[int], size: int = 1 << 20) -> workload_pb2.ExecutionGraph:
    return workload_pb2.ExecutionGraph(
        nodes=[
            workload_pb2.Node(
                id=1, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=size, group=group
            )
        ]
    )


def test_sub_group_collectives_leave_the_other_npus_idle() -> None:
    # The dim-0 lines of a 4x2 grid all-reduce among themselves: the closed form of one 4-ring, twice at once.
    topo = topology((RING, 4, B, ALPHA), (FC, 2, B, ALPHA))
    low, high = graph([0, 1, 2, 3]), graph([4, 5, 6, 7])
    result = simulate([low] * 4 + [high] * 4, AnalyticalNetwork(), topo, SystemOptions())
    expected = 2 * 3 * (ALPHA + ser((1 << 20) // 4, B))
    assert [c.end_ps for c in result.collectives] == [expected, expected]
    assert [c.group_size for c in result.collectives] == [4, 4]


def test_npus_outside_every_group_finish_at_once() -> None:
    topo = topology((RING, 8, B, ALPHA))
    idle = workload_pb2.ExecutionGraph()
    result = simulate([graph([0, 1, 2, 3])] * 4 + [idle] * 4, AnalyticalNetwork(), topo, SystemOptions())
    assert [npu.finish_ps for npu in result.per_npu[4:]] == [0, 0, 0, 0]
    assert result.per_npu[0].finish_ps > 0


def test_a_group_of_one_npu_completes_immediately() -> None:
    result = simulate([graph([0])], AnalyticalNetwork(), topology((RING, 4, B, ALPHA)), SystemOptions())
    assert result.total_time_ps == 0


def test_a_flat_group_routes_across_dimensions() -> None:
    # NPUs 0=(0,0), 1=(1,0) and 5=(1,1) of a 4x2 grid all-gather in ring order 0 -> 1 -> 5 -> 0. With h one hop,
    # 0->1 and 1->5 take h, 5->0 crosses both dimensions and takes 2h. Step 0 leaves at 0 and lands at NPU 1
    # and 5 at h, at NPU 0 at 2h; step 1 then lands at 5 at 2h, at 0 at h + 2h and at 1 at 2h + h: 3h in all.
    topo = topology((RING, 4, B, ALPHA), (FC, 2, B, ALPHA))
    g = workload_pb2.ExecutionGraph(
        nodes=[
            workload_pb2.Node(
                id=1,
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=workload_pb2.ALL_GATHER,
                comm_bytes=3000,
                group=[0, 1, 5],
            )
        ]
    )
    empty = workload_pb2.ExecutionGraph()
    result = simulate([g, g, empty, empty, empty, g], AnalyticalNetwork(), topo, SystemOptions())
    one_hop = ALPHA + ser(1000, B)
    assert result.total_time_ps == 3 * one_hop
