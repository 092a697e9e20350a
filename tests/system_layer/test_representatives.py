"""Simulating one representative per class of symmetric NPUs gives every NPU's exact timeline, and only where
the topology keeps the symmetry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratasim.kernel.grid import Grid
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.symmetry.stand_ins import stand_ins
from stratasim.v1 import network_pb2, workload_pb2
from stratasim.workload_layer.rank_symmetry import translated_representatives
from tests.system_layer.helpers import RING, SWITCH, topology

B, ALPHA = 50 * 10**9, 500_000
TP, PP, DP = 2, 2, 2


def pipeline_graph(npu: int) -> workload_pb2.ExecutionGraph:
    """A two-stage pipeline step with a TP all-reduce per pass and a DP all-reduce at the end;
    ``npu = t + TP * (s + PP * d)``."""
    t, s = npu % TP, npu // TP % PP
    tp_group = [npu - t + i for i in range(TP)]
    dp_group = [t + TP * (s + PP * k) for k in range(DP)]
    graph = workload_pb2.ExecutionGraph(npu=npu, resident_bytes={"weights": 1000, "optimizer": 3000})
    last: list[int] = []

    def add(**fields: object) -> None:
        node = graph.nodes.add(id=len(graph.nodes), data_deps=list(last), **fields)
        last[:] = [node.id]

    if s > 0:
        add(type=workload_pb2.COMM_RECV_NODE, peer=npu - TP, tag=0, comm_bytes=1 << 20, pg_name="pp")
    add(type=workload_pb2.COMP_NODE, duration_ps=1_000_000 * (1 + s), memory_bytes=100)
    add(
        type=workload_pb2.COMM_COLL_NODE,
        comm_type=workload_pb2.ALL_REDUCE,
        comm_bytes=1 << 20,
        group=tp_group,
        pg_name="tp",
    )
    if s < PP - 1:
        add(type=workload_pb2.COMM_SEND_NODE, peer=npu + TP, tag=0, comm_bytes=1 << 20, pg_name="pp")
        add(type=workload_pb2.COMM_RECV_NODE, peer=npu + TP, tag=1, comm_bytes=1 << 20, pg_name="pp")
    add(type=workload_pb2.COMP_NODE, duration_ps=2_000_000, memory_bytes=-100)
    if s > 0:
        add(type=workload_pb2.COMM_SEND_NODE, peer=npu - TP, tag=1, comm_bytes=1 << 20, pg_name="pp")
    add(
        type=workload_pb2.COMM_COLL_NODE,
        comm_type=workload_pb2.ALL_REDUCE,
        comm_bytes=4 << 20,
        group=dp_group,
        pg_name="dp",
        milestone=True,
        name="step done",
    )
    return graph


def representative(npu: int) -> int:
    return TP * (npu // TP % PP)


GRAPHS = [pipeline_graph(npu) for npu in range(TP * PP * DP)]
REPRESENTATIVES = tuple(representative(npu) for npu in range(TP * PP * DP))


def both(topo: network_pb2.Topology, **options: object) -> tuple[SimulationResult, SimulationResult]:
    on = simulate(GRAPHS, AnalyticalNetwork(), topo, SystemOptions(**options), representatives=REPRESENTATIVES)
    off = simulate(GRAPHS, AnalyticalNetwork(), topo, SystemOptions(aggregate=False, **options))
    return on, off


@pytest.mark.parametrize(
    "dims",
    [
        [(RING, 2, B, ALPHA), (RING, 4, B // 2, 2 * ALPHA)],
        [(SWITCH, 2, B, ALPHA), (RING, 2, B, ALPHA), (SWITCH, 2, B // 4, 3 * ALPHA)],
    ],
)
def test_representatives_live_every_npu_timeline(dims: list) -> None:
    on, off = both(topology(*dims), splits=2)
    assert on.simulated_npus == PP and off.simulated_npus == TP * PP * DP
    assert on.per_npu == off.per_npu
    assert (on.total_time_ps, on.milestones) == (off.total_time_ps, off.milestones)
    # The representatives' collectives are a subset of everyone's, with the same timing.
    everyone = {(c.type, c.bytes, c.start_ps, c.end_ps) for c in off.collectives}
    assert {(c.type, c.bytes, c.start_ps, c.end_ps) for c in on.collectives} <= everyone


def test_exposed_time_is_split_by_communicator_and_adds_up() -> None:
    _, off = both(topology((RING, 2, B, ALPHA), (RING, 4, B // 2, 2 * ALPHA)))
    for npu in off.per_npu:
        kinds = dict(npu.exposed_comm_ps_by_kind)
        assert sum(kinds.values()) == npu.exposed_comm_ps
        assert kinds["tp"] > 0 and kinds["dp"] > 0
    stage0, stage1 = off.per_npu[0], off.per_npu[TP]
    assert dict(stage0.exposed_comm_ps_by_kind)["pp"] > 0  # waits for the gradient coming back
    assert dict(stage1.exposed_comm_ps_by_kind)["pp"] > 0  # waits for the first activation


def test_memory_peaks_with_the_activation_held_over_the_pipeline() -> None:
    _, off = both(topology((RING, 2, B, ALPHA), (RING, 4, B // 2, 2 * ALPHA)))
    for npu in off.per_npu:
        assert npu.peak_memory_bytes == 1000 + 3000 + 100
        assert npu.memory_at_peak == (("optimizer", 3000), ("weights", 1000), ("working", 100))
    stage1 = off.per_npu[TP]
    assert stage1.peak_memory_ps > 1_000_000  # allocated when its first compute starts, after the receive


def test_milestone_is_the_latest_finish_of_the_named_node() -> None:
    _, off = both(topology((RING, 2, B, ALPHA), (RING, 4, B // 2, 2 * ALPHA)))
    assert off.milestones == {"step done": off.total_time_ps}


def test_a_group_off_the_dimensions_lines_blocks_the_representatives() -> None:
    # TP pairs inside rings of 4 are not carried onto themselves by the translation between their members.
    topo = topology((RING, 4, B, ALPHA), (RING, 2, B, ALPHA))
    info = AnalyticalNetwork().configure(topo)
    mapping, why = stand_ins(GRAPHS, info, SystemOptions(), Grid((4, 2)), REPRESENTATIVES)
    assert mapping is None and "carry it onto itself" in (why or "")
    on = simulate(GRAPHS, AnalyticalNetwork(), topo, SystemOptions(), representatives=REPRESENTATIVES)
    off = simulate(GRAPHS, AnalyticalNetwork(), topo, SystemOptions(aggregate=False))
    assert on.simulated_npus == TP * PP * DP and replace(on, events_processed=0) == replace(off, events_processed=0)


@pytest.mark.parametrize(
    ("mapping", "reason"),
    [
        ((0,) * 8, "which is not a representative"),
        ((0, 1, 2, 3, 1, 0, 3, 2), "another representative"),
        (tuple(range(8)), None),
        ((0, 0, 2, 2, 4, 4, 6, 6), None),  # DP peers simulated in person, TP ranks mirrored
        ((0, 1, 2, 3, 0, 1, 2, 3), None),  # the other way round
        ((1, 0, 2, 3, 4, 5, 6, 7), "not a mapping"),
    ],
)
def test_declared_representatives_are_checked(mapping: tuple[int, ...], reason: str | None) -> None:
    topo = topology((RING, 2, B, ALPHA), (RING, 4, B, ALPHA))
    info = AnalyticalNetwork().configure(topo)
    found, why = stand_ins(GRAPHS, info, SystemOptions(), Grid((2, 4)), mapping)
    if reason is None:
        assert found == mapping
    else:
        assert found is None and reason in (why or "")


def partners(npu: int) -> tuple[tuple[int, ...], ...]:
    graph = pipeline_graph(npu)
    groups = [tuple(node.group) for node in graph.nodes if node.type == workload_pb2.COMM_COLL_NODE]
    peers = sorted({node.peer for node in graph.nodes if node.type == workload_pb2.COMM_SEND_NODE})
    return (*groups, tuple(peers))


def test_workload_side_check_follows_the_grid() -> None:
    assert translated_representatives(Grid((2, 4)), 8, representative, partners) == REPRESENTATIVES
    assert translated_representatives(Grid((2, 2, 2)), 8, representative, partners) == REPRESENTATIVES
    assert translated_representatives(Grid((4, 2)), 8, representative, partners) is None
    assert translated_representatives(Grid((2, 8)), 8, representative, partners) is None  # grid not filled
