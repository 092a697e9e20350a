"""Several logical scheduling queues per dimension, and collectives on a logical topology."""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from tests.system_layer.helpers import RING, SWITCH, collective_graph, run_collective, ser, topology

B, ALPHA = 50 * 10**9, 500_000


def test_two_queues_run_two_chunks_at_once_in_opposite_directions() -> None:
    n, size = 8, 1 << 20
    one_chunk = 2 * (n - 1) * (ALPHA + ser(size // 2 // n, B))
    topo = topology((RING, n, B, ALPHA))
    assert run_collective(topo, "all_reduce", size, splits=2).total_time_ps == 2 * one_chunk
    two_queues = run_collective(topo, "all_reduce", size, splits=2, queues_per_dim=2, record_trace=True)
    assert two_queues.total_time_ps == one_chunk
    # Chunk 1 rings backwards: NPU 0 sends it to NPU 7 (same bytes either way round).
    assert dict(two_queues.per_npu[0].bytes_sent_per_dim) == {0: 2 * (n - 1) * 2 * (size // 2 // n)}


def test_a_logical_two_dimensional_grid_on_a_physical_switch() -> None:
    # 16 NPUs behind one switch, used as a logical 4x4: each phase is a ring all-reduce of 4 NPUs whose every
    # hop crosses the switch (2 latencies): 2 * 2(4-1)(2 alpha + ser(S/4)).
    size = 1 << 20
    topo = topology((SWITCH, 16, B, ALPHA))
    graphs = [collective_graph("all_reduce", size)] * 16
    result = simulate(graphs, AnalyticalNetwork(), topo, SystemOptions(logical_topology=(4, 4)))
    assert result.total_time_ps == 2 * 2 * 3 * (2 * ALPHA + ser(size // 4, B))
    assert result.collectives[0].phase_dims == (0, 1)
    assert result.simulated_npus == 16  # no aggregation on a logical topology


def test_a_logical_topology_must_hold_every_npu() -> None:
    topo = topology((SWITCH, 16, B, ALPHA))
    with pytest.raises(
        WorkloadError, match=r"logical_topology: \[4, 8\] holds 32 NPUs but the physical topology has 16"
    ):
        simulate(
            [collective_graph("all_reduce", 1024)] * 16,
            AnalyticalNetwork(),
            topo,
            SystemOptions(logical_topology=(4, 8)),
        )
