"""On a switch dimension every permutation of positions is a symmetry, so TP groups smaller than the node (and the
DP groups through them) are simulated one representative per pipeline stage, with every NPU's exact figures; on
a ring dimension only translations are, and such plans still simulate every NPU."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import BlockGrid, Grid, block_grid
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.mixed import MixedNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.symmetry.stand_ins import stand_ins
from stratasim.v1 import network_pb2, workload_pb2
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.system_layer.helpers import RING, SWITCH, topology

FULLY_CONNECTED = network_pb2.Dimension.FULLY_CONNECTED
MODEL = dict(layers=4, hidden=256, heads=8, seq_len=128, vocab=1000)
NODE = (SWITCH, 8, 300 * 10**9, 500_000)
"""Two nodes of 8 behind a second switch: 16 NPUs, the node cut by TP below 8."""
TWO_NODES = topology(NODE, (SWITCH, 2, 25 * 10**9, 2_000_000))
FULLY_CONNECTED_NODES = topology((FULLY_CONNECTED, 4, 100 * 10**9, 700_000), (SWITCH, 4, 25 * 10**9, 2_000_000))


def _workload(**plan: object) -> TransformerWorkload:
    config = {"model": MODEL, "parallelism": {"schedule": "1f1b", **plan}}
    return TransformerWorkload(TransformerWorkload.Config.model_validate(config))


def _run(workload: TransformerWorkload, topo: network_pb2.Topology, aggregate: bool) -> SimulationResult:
    graphs = workload.graphs(workload.npus_required())
    representatives = workload.representatives(Grid.of(topo)) if aggregate else None
    return simulate(
        graphs,
        AnalyticalNetwork(),
        topo,
        SystemOptions(aggregate=aggregate),
        compute=RooflineCompute(),
        device="a100",
        representatives=representatives,
    )


def _same(on: SimulationResult, off: SimulationResult) -> None:
    """Every figure to the picosecond: total time, each NPU's (stage's) finish, compute, exposed comm, memory."""
    assert on.total_time_ps == off.total_time_ps
    assert on.per_npu == off.per_npu
    assert on.milestones == off.milestones
    everyone = {(c.type, c.bytes, c.start_ps, c.end_ps) for c in off.collectives}
    assert {(c.type, c.bytes, c.start_ps, c.end_ps) for c in on.collectives} <= everyone


@pytest.mark.parametrize(
    ("plan", "topo"),
    [
        *(
            (dict(tp=tp, pp=pp, dp=dp), TWO_NODES)
            for tp, pp, dp in [(2, 2, 4), (4, 2, 2), (2, 4, 2), (1, 2, 8), (4, 4, 1), (8, 2, 1)]
        ),
        # DP innermost: the TP group is every other position of a node, the DP group a block of 2.
        (dict(tp=4, pp=2, dp=2, order=["dp", "tp", "pp"]), TWO_NODES),
        (dict(tp=2, pp=2, dp=4), FULLY_CONNECTED_NODES),
    ],
)
def test_tp_below_the_node_simulates_one_npu_per_stage_exactly(plan: dict, topo: network_pb2.Topology) -> None:
    workload = _workload(**plan, global_batch=2 * plan["dp"])
    on, off = _run(workload, topo, True), _run(workload, topo, False)
    assert on.simulated_npus == plan["pp"] and off.simulated_npus == 16
    _same(on, off)


def test_a_ring_node_keeps_translations_only_and_simulates_every_npu() -> None:
    topo = topology((RING, 8, 300 * 10**9, 500_000), (SWITCH, 2, 25 * 10**9, 2_000_000))
    workload = _workload(tp=2, pp=2, dp=4, global_batch=4)
    assert AnalyticalNetwork().configure(topo).permutable_dimensions == [1]
    graphs = workload.graphs(16)
    assert workload.representatives(Grid.of(topo)) is None  # the study's grid does not cut a ring either
    declared = workload.representatives(Grid.of(TWO_NODES))  # what it declares when the node is a switch
    assert declared is not None
    mapping, why = stand_ins(graphs, AnalyticalNetwork().configure(topo), SystemOptions(), Grid.of(topo), declared)
    assert mapping is None and why is not None and "carry it onto itself" in why
    on = simulate(
        graphs,
        AnalyticalNetwork(),
        topo,
        SystemOptions(),
        compute=RooflineCompute(),
        device="a100",
        representatives=declared,
    )
    off = _run(workload, topo, False)
    assert on.simulated_npus == 16
    assert replace(on, events_processed=0) == replace(off, events_processed=0)


def test_a_fabric_is_never_permutable() -> None:
    topo = topology(NODE, (SWITCH, 2, 25 * 10**9, 2_000_000))
    topo.torus.shape[:] = [8, 2]
    topo.torus.link.add(bandwidth_bytes_per_s=10**11, latency_ps=1000)
    assert Grid.of(topo).permutable == frozenset()
    assert not AnalyticalNetwork().configure(topo).permutable_dimensions


def test_a_mixed_network_keeps_the_permutable_dimensions_of_its_analytical_legs() -> None:
    topo = topology((RING, 4, 10**11, 1000), (SWITCH, 4, 10**11, 1000), (FULLY_CONNECTED, 2, 10**11, 1000))
    assert list(MixedNetwork().configure(topo).permutable_dimensions) == [1, 2]


def test_a_group_spanning_blocks_and_their_positions_leaves_the_dimension_whole_and_says_why() -> None:
    # NPU 0 issues an all-reduce over its node (8) and one over its pair {0, 1}: the pair would cut the node into
    # blocks of 2, which the whole node spans at two levels (moving blocks and offsets would not rotate its ring),
    # so the node keeps its plain translations, which do not carry the pair onto itself.
    graph = workload_pb2.ExecutionGraph()
    graph.nodes.add(
        id=0,
        type=workload_pb2.COMM_COLL_NODE,
        comm_type=workload_pb2.ALL_REDUCE,
        comm_bytes=1 << 20,
        group=list(range(8)),
    )
    graph.nodes.add(
        id=1,
        type=workload_pb2.COMM_COLL_NODE,
        comm_type=workload_pb2.ALL_REDUCE,
        comm_bytes=1 << 20,
        group=[0, 1],
        data_deps=[0],
    )
    topo = topology(NODE)
    mapping, why = stand_ins([graph] * 8, AnalyticalNetwork().configure(topo), SystemOptions(), Grid.of(topo), (0,) * 8)
    assert mapping is None
    assert why == (
        "NPU 0 collective node 1: the translations between its members do not carry it onto itself; "
        "dimension 0 is not cut into blocks: a group of 8 positions 1 apart spans more than one level of "
        "the blocks others cut"
    )


def test_a_group_simulated_in_person_cuts_nothing() -> None:
    # NPU 0 stands in for 1 (their pair is mirrored); 2, 3 and 4 stand for themselves, so their group of three,
    # which no blocks of the node make one level, does not keep the pair from cutting the node.
    def graph(group: list[int]) -> workload_pb2.ExecutionGraph:
        made = workload_pb2.ExecutionGraph()
        made.nodes.add(
            id=0, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=1 << 20, group=group
        )
        return made

    graphs = [graph([0, 1])] * 2 + [graph([2, 3, 4])] * 3 + [graph([5, 6, 7])] * 3
    declared = (0, 0, 2, 3, 4, 5, 6, 7)
    topo = topology(NODE)
    found, why = stand_ins(graphs, AnalyticalNetwork().configure(topo), SystemOptions(), Grid.of(topo), declared)
    assert (found, why) == (declared, None)
    on = simulate(graphs, AnalyticalNetwork(), topo, SystemOptions(), representatives=declared)
    off = simulate(graphs, AnalyticalNetwork(), topo, SystemOptions(aggregate=False))
    assert on.simulated_npus == 7 and (on.total_time_ps, on.per_npu) == (off.total_time_ps, off.per_npu)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([(0, 1), tuple(range(0, 32, 2))], BlockGrid(Grid((2, 4, 4, 32)), (0, 0, 1, 1))),  # TP 2, DP 16: GPT-3's
        ([tuple(range(8))], BlockGrid(Grid((8, 128)), (0, 1))),  # TP 8: the node whole, nothing cut
        ([(0, 2)], BlockGrid(Grid((2, 2, 2, 128)), (0, 0, 0, 1))),  # a middle level: blocks of 2 within blocks of 4
        ([(1, 5)], BlockGrid(Grid((4, 2, 128)), (0, 0, 1))),  # one offset in each block of 4
        ([(1, 2)], BlockGrid(Grid((8, 128)), (0, 1), {0: "positions [1, 2] are not evenly spaced within one block"})),
        (
            [tuple(range(8)), (0, 4)],
            BlockGrid(
                Grid((8, 128)),
                (0, 1),
                {0: "a group of 8 positions 1 apart spans more than one level of the blocks others cut"},
            ),
        ),
    ],
)
def test_groups_cut_permutable_dimensions_into_nested_blocks(groups: list, expected: BlockGrid) -> None:
    assert block_grid(Grid((8, 128), frozenset({0, 1})), groups) == expected


def test_cuts_that_do_not_nest_leave_the_dimension_whole() -> None:
    assert block_grid(Grid((12,), frozenset({0})), [(0, 4, 8), (0, 6)]).whole == {
        0: "blocks of 4 and of 6 positions do not nest"
    }


def test_a_dimension_that_is_not_permutable_is_never_cut() -> None:
    assert block_grid(Grid((8, 2), frozenset({1})), [(0, 1)]) == BlockGrid(Grid((8, 2)), (0, 1))


plans = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([1, 2, 4]),
        "pp": st.sampled_from([1, 2, 4]),
        "schedule": st.sampled_from(["gpipe", "1f1b", "interleaved"]),
        "recompute": st.sampled_from(["none", "selective", "full"]),
        "zero": st.sampled_from([0, 1, 3]),
        "sequence_parallel": st.booleans(),
        "scatter_gather": st.booleans(),
        "order": st.sampled_from([None, ["dp", "tp", "pp"], ["tp", "pp", "dp"]]),
    }
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, node=st.sampled_from([4, 8]))
@example(  # a DP and a PP wait ending at the same time: idle time charged to the same one either way
    plan={
        "tp": 1,
        "pp": 2,
        "schedule": "interleaved",
        "recompute": "none",
        "zero": 3,
        "sequence_parallel": False,
        "scatter_gather": False,
        "order": ["dp", "tp", "pp"],
    },
    node=8,
)
def test_aggregated_plans_match_every_npu(plan: dict, node: int) -> None:
    """Any plan on nodes of ``node`` behind a switch, 16 NPUs: aggregated or not, the same figures."""
    plan = {key: value for key, value in plan.items() if value is not None}
    plan["dp"] = 16 // (plan["tp"] * plan["pp"])
    plan["global_batch"] = 2 * plan["dp"]
    if plan["schedule"] == "interleaved":
        plan["virtual_stages"] = 2
    topo = topology((SWITCH, node, 300 * 10**9, 500_000), (SWITCH, 16 // node, 25 * 10**9, 2_000_000))
    try:
        workload = _workload(**plan)
    except (ValidationError, WorkloadError):
        assume(False)
        raise
    on, off = _run(workload, topo, True), _run(workload, topo, False)
    assert on.simulated_npus == plan["pp"]
    _same(on, off)
