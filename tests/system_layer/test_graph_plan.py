"""``plan_graph`` indexes a graph's dependencies exactly as its nodes state them: for any graph (data and control
dependencies, repeated, in any order), each node's dependencies are its dependency ids' positions, deduplicated
and in the order of ``{*data_deps, *ctrl_deps}``; its dependents are the nodes that name it, in node order; its
in-degree is its number of distinct dependencies; memory and milestones are kept by position. The planner treats
a node with one data dependency on a fast path of its own; this checks it against the plain definition."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.kernel.errors import WorkloadError
from stratasim.system_layer.engine.graph_plan import plan_graph
from stratasim.v1 import workload_pb2


@st.composite
def graphs(draw: st.DrawFn) -> workload_pb2.ExecutionGraph:
    count = draw(st.integers(1, 12))
    ids = draw(st.permutations(range(100, 100 + count)))  # ids are not positions
    graph = workload_pb2.ExecutionGraph()
    for index, node_id in enumerate(ids):
        earlier = st.sampled_from(ids[:index] or [0])
        most = 3 if index else 0
        graph.nodes.add(
            id=node_id,
            type=workload_pb2.COMP_NODE,
            duration_ps=draw(st.integers(0, 9)),
            data_deps=draw(st.lists(earlier, max_size=most)),
            ctrl_deps=draw(st.lists(earlier, max_size=most)),
            memory_bytes=draw(st.integers(-5, 5)),
            milestone=draw(st.booleans()),
        )
    return graph


@given(graphs())
@settings(max_examples=200, deadline=None)
def test_the_plan_states_the_graphs_dependencies(graph: workload_pb2.ExecutionGraph) -> None:
    plan = plan_graph(graph, 0, 1)
    position = {node.id: index for index, node in enumerate(graph.nodes)}
    expected = [tuple(position[d] for d in {*node.data_deps, *node.ctrl_deps}) for node in graph.nodes]
    assert plan.dependencies == tuple(expected)
    assert plan.indegree == tuple(len(deps) for deps in expected)
    assert plan.dependents == tuple(
        tuple(i for i, deps in enumerate(expected) for d in deps if d == target) for target in range(len(expected))
    )
    assert plan.allocations == {i: n.memory_bytes for i, n in enumerate(graph.nodes) if n.memory_bytes > 0}
    assert plan.releases == {i: -n.memory_bytes for i, n in enumerate(graph.nodes) if n.memory_bytes < 0}
    assert plan.milestones == frozenset(i for i, n in enumerate(graph.nodes) if n.milestone)
    assert sorted(plan.order) == list(range(len(graph.nodes)))
    assert all(plan.order.index(d) < plan.order.index(i) for i, deps in enumerate(expected) for d in deps)


def _pipeline_stage() -> workload_pb2.ExecutionGraph:
    """A stage as the transformer writes one: block nodes, sends and receives at the top, compute in its blocks."""
    graph = workload_pb2.ExecutionGraph()
    for block in range(2):
        graph.blocks.add(name=f"layer {block}").nodes.add(id=0, type=workload_pb2.COMP_NODE, duration_ps=5)
    nodes = graph.nodes
    nodes.add(id=0, type=workload_pb2.COMM_RECV_NODE, peer=1, tag=3)
    nodes.add(id=1, type=workload_pb2.BLOCK_NODE, data_deps=[0], block=1)
    nodes.add(id=2, type=workload_pb2.COMM_SEND_NODE, data_deps=[1], peer=2, tag=4, comm_bytes=8)
    nodes.add(id=3, type=workload_pb2.BLOCK_NODE, data_deps=[1], block=0)
    nodes.add(id=4, type=workload_pb2.COMP_NODE, data_deps=[3], duration_ps=1, milestone=True)
    return graph


def test_planning_gives_the_kinds_and_block_runs_the_nodes_state() -> None:
    """Planning hands the plan each node's type and each block node's block, read while checking them; a plan
    built without them (fusion, inlining) reads them from its nodes: both agree."""
    plan = plan_graph(_pipeline_stage(), 0, 3)
    read = replace(plan, kinds=(), block_runs={})
    assert plan.kinds == read.kinds == tuple(node.type for node in plan.nodes)
    assert plan.block_runs == read.block_runs == {1: 1, 3: 0}
    assert plan.blocks[0].kinds == (workload_pb2.COMP_NODE,) and plan.blocks[0].block_runs == {}


def test_the_inline_checks_refuse_what_the_full_check_refuses() -> None:
    """The checks of block nodes, sends and receives made inline name the same problems as the full check."""
    for field, value, message in [
        ("block", 2, "runs block 2, but the graph has 2 blocks"),
        ("memory_bytes", 4, "a BLOCK_NODE allocates no memory"),
    ]:
        graph = _pipeline_stage()
        setattr(graph.nodes[1], field, value)
        with pytest.raises(WorkloadError, match=message):
            plan_graph(graph, 0, 3)
    for peer in (0, 3):
        graph = _pipeline_stage()
        graph.nodes[2].peer = peer
        with pytest.raises(WorkloadError, match=f"peer NPU {peer} must be another of the 3 NPUs"):
            plan_graph(graph, 0, 3)
