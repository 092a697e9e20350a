"""A graph's ``start_ps`` (a job starting later) delays its NPU's start; the NPU's compute and exposed
communication count from then, so the wait inflates neither."""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from tests.system_layer.helpers import RING, collective_graph, ser, topology

BW, LAT = 50 * 10**9, 500_000


def _compute_then_all_reduce(start_ps: int) -> workload_pb2.ExecutionGraph:
    graph = collective_graph("all_reduce", 1 << 20)
    graph.nodes[0].data_deps.append(1)
    graph.nodes.add(id=1, type=workload_pb2.COMP_NODE, duration_ps=10_000_000)
    graph.start_ps = start_ps
    return graph


def test_a_later_start_shifts_the_timeline_and_inflates_no_figure() -> None:
    ring = topology((RING, 2, BW, LAT))
    now = simulate([_compute_then_all_reduce(0)] * 2, AnalyticalNetwork(), ring, SystemOptions())
    later = simulate([_compute_then_all_reduce(7_000_000)] * 2, AnalyticalNetwork(), ring, SystemOptions())
    # A ring all-reduce of 2: 2 steps of half the buffer, after 10 us of compute.
    assert now.total_time_ps == 10_000_000 + 2 * (ser(1 << 19, BW) + LAT)
    assert later.total_time_ps == now.total_time_ps + 7_000_000
    for early, late in zip(now.per_npu, later.per_npu):
        assert late.finish_ps == early.finish_ps + 7_000_000
        assert late.compute_ps == early.compute_ps == 10_000_000
        assert late.exposed_comm_ps == early.exposed_comm_ps
        assert late.exposed_comm_ps_by_kind == early.exposed_comm_ps_by_kind


def test_a_negative_start_is_refused() -> None:
    with pytest.raises(WorkloadError, match=r"NPU 0: its graph starts at -1 ps \(start_ps\)"):
        simulate([_compute_then_all_reduce(-1)] * 2, AnalyticalNetwork(), topology((RING, 2, BW, LAT)), SystemOptions())
