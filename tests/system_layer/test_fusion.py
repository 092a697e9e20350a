"""Fusing runs of compute nodes changes no reported time, memory figure or milestone, and only happens where
no two compute nodes can be ready at once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from stratasim.system_layer.engine.fusion import fuse_compute_runs
from stratasim.system_layer.engine.graph_plan import plan_graph
from stratasim.v1 import workload_pb2

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def chain(*memory: int, milestone: int = -1) -> workload_pb2.ExecutionGraph:
    graph = workload_pb2.ExecutionGraph()
    for i, size in enumerate(memory):
        graph.nodes.add(
            id=i,
            type=workload_pb2.COMP_NODE,
            duration_ps=10 * (i + 1),
            data_deps=[i - 1] if i else [],
            memory_bytes=size,
            milestone=i == milestone,
            name=f"n{i}",
        )
    return graph


def test_a_chain_fuses_into_runs_cut_at_allocations_releases_and_milestones() -> None:
    plan = plan_graph(chain(0, 5, 0, -5, 0, 0, milestone=4), 0, 1)
    fused, durations = fuse_compute_runs(plan, (10, 20, 30, 40, 50, 60))
    # Runs: [n0] (n1 allocates, so it starts a run), [n1 n2 n3] (n3 frees, so it ends one), [n4] (a milestone
    # ends a run), [n5].
    assert durations == (10, 90, 50, 60)
    assert fused.allocations == {1: 5} and fused.releases == {1: 5} and fused.milestones == {2}
    assert [node.name for node in fused.nodes] == ["n0", "n3", "n4", "n5"]
    assert fused.dependents == ((1,), (2,), (3,), ()) and fused.indegree == (0, 1, 1, 1)


def test_compute_that_could_run_concurrently_is_left_alone() -> None:
    graph = chain(0, 0)
    graph.nodes.add(id=2, type=workload_pb2.COMP_NODE, duration_ps=5)  # independent of the chain
    plan = plan_graph(graph, 0, 1)
    assert fuse_compute_runs(plan, (10, 20, 5)) == (plan, (10, 20, 5))


def test_a_fused_transformer_iteration_reports_what_the_unfused_one_does() -> None:
    study = load_study(
        EXAMPLES / "transformer.yaml",
        ["workload.parallelism.schedule=interleaved", "workload.parallelism.virtual_stages=3"],
    )
    fused = run_study(study)  # fuses: no trace is recorded
    unfused = run_study(study, record_trace=True)
    assert fused.result.events_processed < unfused.result.events_processed
    same = {"events_processed": 0, "spans": (), "counters": (), "trace_detail": ""}
    fused, unfused = (
        replace(report, wall_seconds=0.0, result=replace(report.result, **same)) for report in (fused, unfused)
    )
    assert fused == unfused
