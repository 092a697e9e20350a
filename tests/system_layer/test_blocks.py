"""Graphs with blocks simulate exactly as their unrolled graphs, whether blocks are inlined or run whole."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from stratasim.cli import main
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.graph_blocks import unrolled
from stratasim.kernel.grid import Grid
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.engine.graph_plan import plan_graph
from stratasim.system_layer.engine.macros import _ordered_with_all, runnable_whole
from stratasim.system_layer.trace import TraceDetail, TraceSelection
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.chakra import read_chakra_graphs
from stratasim.workload_layer.traces.convert import stratasim_to_chakra, summarize, write_graphs
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.system_layer.helpers import RING, SWITCH, topology

MODEL = dict(layers=4, hidden=256, heads=4, seq_len=128, vocab=1000)


def _workload(model: dict, plan: dict) -> TransformerWorkload:
    return TransformerWorkload(TransformerWorkload.Config.model_validate({"model": model, "parallelism": plan}))


def _simulate(
    workload: TransformerWorkload,
    graphs: list,
    aggregate: bool,
    record_trace: bool | TraceSelection = False,
    **options: object,
) -> SimulationResult:
    plan = workload.config.parallelism
    topo = topology(
        (SWITCH, plan.tp, 200 * 10**9, 500_000),
        (RING, plan.pp, 50 * 10**9, 1_000_000),
        (SWITCH, plan.dp, 25 * 10**9, 2_000_000),
    )
    representatives = workload.representatives(Grid.of(topo)) if aggregate else None
    return simulate(
        graphs,
        AnalyticalNetwork(),
        topo,
        SystemOptions(aggregate=aggregate, **options),
        compute=RooflineCompute(),
        device="h100",
        representatives=representatives,
        record_trace=record_trace,
    )


def _same(blocked: SimulationResult, plain: SimulationResult) -> None:
    """Identical to the picosecond, events aside (running a block whole is one event)."""
    assert replace(blocked, events_processed=0) == replace(plain, events_processed=0)


def _compare(
    workload: TransformerWorkload, aggregate: bool, record_trace: bool | TraceSelection = False, **options: object
) -> tuple[SimulationResult, SimulationResult]:
    graphs = list(workload.graphs(workload.npus_required()))
    blocked = _simulate(workload, graphs, aggregate, record_trace, **options)
    plain = _simulate(workload, [unrolled(graph) for graph in graphs], aggregate, record_trace, **options)
    _same(blocked, plain)
    return blocked, plain


plans = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([1, 2]),
        "pp": st.sampled_from([1, 2]),
        "dp": st.sampled_from([1, 2]),
        "schedule": st.sampled_from(["gpipe", "1f1b", "interleaved"]),
        "recompute": st.sampled_from(["none", "selective", "full"]),
        "zero": st.sampled_from([0, 1, 2, 3]),
        "sequence_parallel": st.booleans(),
        "scatter_gather": st.booleans(),
        "global_batch": st.sampled_from([2, 4]),
        "dp_bucket": st.sampled_from([None, 4 << 20]),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, experts=st.sampled_from([0, 4]), splits=st.sampled_from([1, 2]), aggregate=st.booleans())
def test_blocked_graphs_simulate_exactly_as_their_unrolled_graphs(
    plan: dict, experts: int, splits: int, aggregate: bool
) -> None:
    plan = dict(plan, global_batch=plan["global_batch"] * plan["dp"])
    if plan["schedule"] == "interleaved":
        plan["virtual_stages"] = 2
    model = dict(MODEL, experts=experts, top_k=1) if experts else MODEL
    if experts:
        plan["ep"] = plan["dp"]
    try:
        workload = _workload(model, plan)
    except (ValidationError, WorkloadError):
        assume(False)
        raise
    _compare(workload, aggregate, splits=splits)


def test_passes_run_whole_in_one_event_each() -> None:
    """A 1F1B plan's layer passes run whole on its stage representatives: far fewer events, same results."""
    workload = _workload(MODEL, dict(tp=2, pp=2, dp=2, global_batch=8, recompute="full"))
    blocked, plain = _compare(workload, aggregate=True)
    assert blocked.simulated_npus == 2
    assert blocked.events_processed * 3 < plain.events_processed
    # The collectives, made as they are read, read alike by index, slice and iteration, numbered in order.
    listed = list(blocked.collectives)
    assert [c.collective_id for c in listed] == list(range(len(listed))) and len(listed) > 100
    assert [blocked.collectives[i] for i in range(-3, 3)] == listed[-3:] + listed[:3]
    assert blocked.collectives[40:60] == listed[40:60] and blocked.collectives == tuple(listed)
    assert [c.start_ps for c in listed] == sorted(c.start_ps for c in listed)


@pytest.mark.parametrize(
    "selection",
    [
        True,
        TraceSelection(detail=TraceDetail.COLLECTIVES),
        TraceSelection(npus=frozenset({3}), start_ps=30_000_000, end_ps=90_000_000),
    ],
)
def test_blocks_run_whole_trace_as_their_nodes(selection: bool | TraceSelection) -> None:
    """A traced block run whole shows the spans, collective names and memory samples of its nodes."""
    workload = _workload(MODEL, dict(tp=2, pp=2, dp=2, global_batch=8, recompute="selective"))
    blocked, plain = _compare(workload, aggregate=True, record_trace=selection)
    assert len(blocked.spans) > 0 and blocked.events_processed * 3 < plain.events_processed


def test_every_npu_simulated_inlines_the_blocks() -> None:
    """Simulating every NPU, a tensor-parallel group spans NPUs simulated apart: blocks run node by node."""
    workload = _workload(MODEL, dict(tp=2, pp=2, dp=2, global_batch=8))
    blocked, plain = _compare(workload, aggregate=False)
    assert blocked.events_processed == plain.events_processed


def _graph(*nodes: dict, blocks: tuple[tuple[dict, ...], ...] = ()) -> workload_pb2.ExecutionGraph:
    graph = workload_pb2.ExecutionGraph(nodes=[workload_pb2.Node(**node) for node in nodes])
    for block in blocks:
        graph.blocks.add(nodes=[workload_pb2.Node(**node) for node in block])
    return graph


COMP = workload_pb2.COMP_NODE
BLOCK = workload_pb2.BLOCK_NODE
PASS = (
    {"id": 0, "name": "a", "type": COMP, "duration_ps": 5},
    {"id": 1, "name": "b", "type": COMP, "duration_ps": 7, "data_deps": [0]},
    {"id": 2, "name": "c", "type": COMP, "duration_ps": 1, "data_deps": [0]},
)


def test_unrolled_inlines_each_block_node_in_place() -> None:
    graph = _graph(
        {"id": 0, "name": "start", "type": COMP, "duration_ps": 1},
        {"id": 1, "name": "mb0", "type": BLOCK, "block": 0, "data_deps": [0]},
        {"id": 2, "name": "mb1", "type": BLOCK, "block": 0, "data_deps": [1]},
        {"id": 3, "name": "end", "type": COMP, "duration_ps": 1, "data_deps": [2]},
        blocks=(PASS,),
    )
    flat = unrolled(graph)
    assert [(n.id, n.name, list(n.data_deps)) for n in flat.nodes] == [
        (0, "start", []),
        (4, "mb0 a", [0]),
        (5, "mb0 b", [4]),
        (6, "mb0 c", [4]),
        (7, "mb1 a", [5, 6]),
        (8, "mb1 b", [7]),
        (9, "mb1 c", [7]),
        (3, "end", [8, 9]),
    ]
    # Run by the engine, both are the same timeline.
    topo = topology((RING, 2, 10**9, 1000))
    runs = [simulate([g, g], AnalyticalNetwork(), topo, SystemOptions()) for g in (graph, flat)]
    assert runs[0].total_time_ps == runs[1].total_time_ps == 1 + 2 * (5 + 7 + 1) + 1  # one compute stream


def test_an_empty_block_passes_its_dependencies_on() -> None:
    graph = _graph(
        {"id": 0, "type": COMP, "duration_ps": 3},
        {"id": 1, "name": "nothing", "type": BLOCK, "block": 0, "data_deps": [0]},
        {"id": 2, "type": COMP, "duration_ps": 4, "data_deps": [1]},
        blocks=((),),
    )
    assert [list(n.data_deps) for n in unrolled(graph).nodes] == [[], [0]]
    topo = topology((RING, 2, 10**9, 1000))
    assert simulate([graph, graph], AnalyticalNetwork(), topo, SystemOptions()).total_time_ps == 7


@pytest.mark.parametrize(
    ("nodes", "blocks", "message"),
    [
        (({"id": 0, "type": BLOCK, "block": 2},), (PASS,), "NPU 0 node 0: runs block 2, but the graph has 1 blocks"),
        (({"id": 0, "type": BLOCK, "block": 0, "memory_bytes": 8},), (PASS,), "a BLOCK_NODE allocates no memory"),
        (({"id": 0, "type": BLOCK, "block": 0, "milestone": True},), (PASS,), "is no milestone"),
        (
            ({"id": 0, "type": BLOCK, "block": 0},),
            (({"id": 0, "type": BLOCK, "block": 0},),),
            "NPU 0 block 0 node 0: a block cannot run a block",
        ),
        (
            ({"id": 0, "type": BLOCK, "block": 0},),
            (({"id": 0, "type": COMP, "data_deps": [9]},),),
            "NPU 0 block 0 node 0: depends on node 9, which is not in the block",
        ),
        (
            ({"id": 0, "type": BLOCK, "block": 0},),
            (({"id": 0, "type": COMP, "data_deps": [1]}, {"id": 1, "type": COMP, "data_deps": [0]}),),
            "NPU 0 block 0 node 0: is part of a dependency cycle",
        ),
    ],
)
def test_bad_blocks_are_one_error_naming_the_node(nodes: tuple, blocks: tuple, message: str) -> None:
    graph = _graph(*nodes, blocks=blocks)
    with pytest.raises(WorkloadError, match=message.replace("(", r"\(")):
        plan_graph(graph, 0, 2)
    with pytest.raises(WorkloadError, match=message.replace("(", r"\(")):
        simulate([graph, graph], AnalyticalNetwork(), topology((RING, 2, 10**9, 1000)), SystemOptions())


def _collective(node_id: int, deps: list[int], group: list[int]) -> dict:
    return {
        "id": node_id,
        "type": workload_pb2.COMM_COLL_NODE,
        "comm_type": workload_pb2.ALL_REDUCE,
        "comm_bytes": 1 << 20,
        "group": group,
        "data_deps": deps,
    }


LAYER = (
    {"id": 0, "type": COMP, "duration_ps": 5},
    _collective(1, [0], [0, 1]),
    {"id": 2, "type": COMP, "duration_ps": 5, "data_deps": [1]},
)


def test_a_block_runs_whole_only_alone_on_the_scheduler() -> None:
    """A collective outside that may run at the same time as a block keeps it from running whole."""
    chain = _graph(
        {"id": 0, "type": BLOCK, "block": 0},
        {"id": 1, "type": BLOCK, "block": 0, "data_deps": [0]},
        _collective(2, [1], [0, 1]),
        {"id": 3, "type": BLOCK, "block": 0, "data_deps": [1]},  # beside the collective
        {"id": 4, "type": BLOCK, "block": 0, "data_deps": [2, 3]},
        blocks=(LAYER,),
    )
    plan = plan_graph(chain, 0, 2)
    assert runnable_whole(plan, 0, lambda npu: 0, 2) == {0, 1, 4}
    # With NPU 1 simulated in person, its tensor-parallel partner is not this NPU: nothing runs whole.
    assert runnable_whole(plan, 0, lambda npu: npu, 2) == frozenset()


@given(st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_blocks_ordered_with_every_marked_node_as_reachability_says(data: st.DataObject) -> None:
    """Which marked nodes every other marked node is an ancestor or a descendant of: the chain short cut and the
    bit sets agree with reachability worked out pair by pair."""
    count = data.draw(st.integers(1, 9))
    deps = [data.draw(st.sets(st.integers(0, index - 1), max_size=3)) if index else set() for index in range(count)]
    marked = data.draw(st.lists(st.booleans(), min_size=count, max_size=count))
    graph = workload_pb2.ExecutionGraph()
    for index, before in enumerate(deps):
        graph.nodes.add(id=index, type=workload_pb2.COMP_NODE, duration_ps=1, data_deps=sorted(before))
    behind = [set(before) for before in deps]  # each node's ancestors, in id order
    for index in range(count):
        for dep in deps[index]:
            behind[index] |= behind[dep]
    related = [
        bool(m) and all(i in behind[j] or j in behind[i] for j in range(count) if marked[j] and j != i)
        for i, m in enumerate(marked)
    ]
    assert _ordered_with_all(plan_graph(graph, 0, 1), marked) == related


def _write_blocked_trace(prefix: Path, graph: workload_pb2.ExecutionGraph, ranks: int = 2) -> None:
    copies = [workload_pb2.ExecutionGraph() for _ in range(ranks)]
    for rank, copy in enumerate(copies):
        copy.CopyFrom(graph)
        copy.npu = rank
    write_graphs(prefix, copies)


def test_trace_files_with_blocks_convert_to_chakra_unrolled(tmp_path: Path) -> None:
    graph = _graph(
        {"id": 0, "name": "mb0", "type": BLOCK, "block": 0},
        {"id": 1, "name": "mb1", "type": BLOCK, "block": 0, "data_deps": [0]},
        blocks=(tuple(dict(node, duration_ps=1_000_000) for node in PASS),),
    )
    _write_blocked_trace(tmp_path / "ir", graph)
    stratasim_to_chakra(tmp_path / "ir", tmp_path / "et")
    for back in read_chakra_graphs(tmp_path / "et"):
        assert [(n.name, n.duration_ps) for n in back.nodes] == [
            ("mb0 a", 1_000_000),
            ("mb0 b", 1_000_000),
            ("mb0 c", 1_000_000),
            ("mb1 a", 1_000_000),
            ("mb1 b", 1_000_000),
            ("mb1 c", 1_000_000),
        ]
    summary = summarize(tmp_path / "ir")
    assert summary.nodes == {"COMP_NODE": 12} and summary.compute_ps == 12_000_000  # what the ranks run


def test_a_bad_block_in_a_trace_file_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = _graph({"id": 0, "type": BLOCK, "block": 3}, blocks=(PASS,))
    _write_blocked_trace(tmp_path / "ir", graph)
    assert main(["trace", "convert", str(tmp_path / "ir"), str(tmp_path / "et"), "--to", "chakra"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / 'ir'}.0.pb: NPU 0 node 0: runs block 3, but the graph has 1 blocks"]


def test_a_block_named_too_often_to_unroll_is_one_error_not_gigabytes() -> None:
    """A few kilobytes of graph naming a thousand-node block 20,000 times: refused before it is inlined."""
    chain = tuple({"id": i, "type": COMP, "duration_ps": 1, "data_deps": [i - 1] if i else []} for i in range(1000))
    graph = _graph(
        *({"id": i, "type": BLOCK, "block": 0, "data_deps": [i - 1] if i else []} for i in range(20_000)),
        blocks=(chain,),
    )
    message = "NPU 0: its graph's blocks unroll to 20,000,000 nodes, more than the 10,000,000"
    with pytest.raises(WorkloadError, match=message):
        simulate([graph, graph], AnalyticalNetwork(), topology((RING, 2, 10**9, 1000)), SystemOptions())
    with pytest.raises(WorkloadError, match=message):
        unrolled(graph)
