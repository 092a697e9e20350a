"""``plan_graph`` indexes a graph's dependencies exactly as its nodes state them: for any graph (data and control
dependencies, repeated, in any order), each node's dependencies are its dependency ids' positions, deduplicated
and in the order of ``{*data_deps, *ctrl_deps}``; its dependents are the nodes that name it, in node order; its
in-degree is its number of distinct dependencies; memory and milestones are kept by position. The planner treats
a node with one data dependency on a fast path of its own; this checks it against the plain definition."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
