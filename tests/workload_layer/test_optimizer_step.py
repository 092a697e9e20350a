"""The optimizer step closing a transformer training iteration: what it moves, over which parameters, after what."""

from __future__ import annotations

import pytest

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.transformer.optimizer import optimizer_step
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.workload_layer.transformer_helpers import unrolled_graphs

MODEL = dict(layers=4, hidden=256, heads=4, seq_len=128, vocab=1000)


def graphs(**plan: object) -> tuple[TransformerWorkload, list[workload_pb2.ExecutionGraph]]:
    workload = TransformerWorkload(TransformerWorkload.Config.model_validate({"model": MODEL, "parallelism": plan}))
    return workload, unrolled_graphs(workload.graphs(workload.npus_required()))


def step_of(graph: workload_pb2.ExecutionGraph) -> workload_pb2.Node:
    (step,) = [node for node in graph.nodes if node.name == "optimizer step"]
    return step


@pytest.mark.parametrize(("dtype", "per_parameter"), [(compute_pb2.BF16, 28), (compute_pb2.FP32, 32)])
def test_adam_moves_the_master_states_and_the_gradient_and_weight_once(
    dtype: operators.DType, per_parameter: int
) -> None:
    op = optimizer_step(1000, dtype)
    assert op.elementwise.elements == 1000 and op.dtype == dtype and op.elementwise.function == compute_pb2.OPTIMIZER
    assert op.bytes == 1000 * per_parameter  # 24 bytes of fp32 states read and written, gradient and weight
    assert op.flops == 14_000


def test_each_npu_updates_the_parameters_of_its_stage_or_its_zero_shard() -> None:
    plain, plain_graphs = graphs(tp=2, pp=2, dp=2, global_batch=4)
    for npu, graph in enumerate(plain_graphs):
        stage = npu // 2 % 2  # ranks are laid out tp fastest, then pp
        assert step_of(graph).op.elementwise.elements == plain.stage_parameters(stage)
    _, sharded_graphs = graphs(tp=2, pp=2, dp=2, global_batch=4, zero=1)
    for npu, graph in enumerate(sharded_graphs):
        stage = npu // 2 % 2
        assert step_of(graph).op.elementwise.elements == -(-plain.stage_parameters(stage) // 2)


@pytest.mark.parametrize("zero", [0, 1, 3])
def test_the_step_waits_for_every_gradient_reduction_and_ends_the_iteration(zero: int) -> None:
    _, found = graphs(dp=4, global_batch=8, dp_bucket="100KB", zero=zero)
    for graph in found:
        step = step_of(graph)
        reductions = {
            node.id
            for node in graph.nodes
            if node.type == workload_pb2.COMM_COLL_NODE
            and node.comm_type in (workload_pb2.ALL_REDUCE, workload_pb2.REDUCE_SCATTER)
            and node.pg_name == "dp"
        }
        assert len(reductions) > 1 and reductions <= set(step.data_deps)
        assert not any(step.id in node.data_deps for node in graph.nodes)


def test_a_single_npu_steps_after_its_last_backward_pass() -> None:
    _, (graph,) = graphs(global_batch=2)
    step = step_of(graph)
    assert graph.nodes[-1].id == step.id and list(step.data_deps) == [graph.nodes[-2].id]
