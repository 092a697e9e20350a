"""The collective microbenchmark and the data-parallel training loop build the graphs they promise."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.collective import CollectiveWorkload
from stratasim.workload_layer.training_loop import TrainingLoopWorkload
from tests.system_layer.helpers import RING, ser, topology

B, ALPHA, N = 50 * 10**9, 500_000, 8
TOPO = topology((RING, N, B, ALPHA))


def ring_all_reduce_ps(size: int) -> int:
    return 2 * (N - 1) * (ALPHA + ser(size // N, B))


def test_collective_repeats_run_back_to_back() -> None:
    workload = CollectiveWorkload(CollectiveWorkload.Config(collective="all_reduce", size="1MiB", repeat=3))
    graphs = workload.graphs(N)
    assert len(graphs) == N and len(graphs[0].nodes) == 3
    result = simulate(graphs, AnalyticalNetwork(), TOPO, SystemOptions())
    assert result.total_time_ps == 3 * ring_all_reduce_ps(1 << 20)


def loop(**config: object) -> TrainingLoopWorkload:
    return TrainingLoopWorkload(TrainingLoopWorkload.Config(**config))


def test_weight_gradient_all_reduce_overlaps_the_input_gradient() -> None:
    # One layer, one pass: forward F, weight gradient W, then the all-reduce A runs beside the input gradient I.
    f, w, i = 100_000_000, 50_000_000, 400_000_000
    size = 1 << 20
    workload = loop(
        layers=[
            dict(
                name="l0",
                forward=f"{f}ps",
                weight_grad=f"{w}ps",
                input_grad=f"{i}ps",
                weight_grad_comm=dict(collective="all_reduce", size=f"{size}B"),
            )
        ]
    )
    result = simulate(workload.graphs(N), AnalyticalNetwork(), TOPO, SystemOptions())
    assert result.total_time_ps == f + w + max(i, ring_all_reduce_ps(size))
    assert result.per_npu[0].compute_ps == f + w + i


def test_next_pass_forward_waits_for_the_weight_update() -> None:
    # Two passes of one layer whose all-reduce outlasts the input gradient: pass 2 starts when it ends.
    f, w, i = 1_000_000, 1_000_000, 1_000_000
    size = 1 << 20
    workload = loop(
        passes=2,
        layers=[
            dict(
                name="l0",
                forward=f"{f}ps",
                weight_grad=f"{w}ps",
                input_grad=f"{i}ps",
                weight_grad_comm=dict(collective="all_reduce", size=f"{size}B"),
            )
        ],
    )
    result = simulate(workload.graphs(N), AnalyticalNetwork(), TOPO, SystemOptions())
    one = f + w + max(i, ring_all_reduce_ps(size))
    assert result.total_time_ps == 2 * one


def test_blocking_input_gradient_communication_delays_the_next_layer() -> None:
    size = 1 << 20
    layer = dict(
        name="l",
        repeat=2,
        forward="1us",
        input_grad="1us",
        weight_grad="1us",
        input_grad_comm=dict(collective="all_gather", size=f"{size}B"),
    )
    result = simulate(loop(layers=[layer]).graphs(N), AnalyticalNetwork(), TOPO, SystemOptions())
    all_gather = (N - 1) * (ALPHA + ser(size // N, B))
    assert result.total_time_ps == 6_000_000 + 2 * all_gather


def test_operators_become_compute_nodes_with_descriptors() -> None:
    workload = loop(
        layers=[dict(name="fc", forward=dict(gemm=[128, 256, 512]), input_grad=dict(elementwise=dict(shape=[4, 8])))]
    )
    nodes = workload.graphs(1)[0].nodes
    forward = nodes[0]
    assert forward.type == workload_pb2.COMP_NODE and forward.op.flops == 2 * 128 * 256 * 512
    input_grad = nodes[2]
    assert input_grad.op.HasField("elementwise") and input_grad.op.flops == 32


@pytest.mark.parametrize(
    "layer",
    [
        dict(name="x", forward=dict(time="1us", gemm=[1, 2, 3])),
        dict(name="x", forward=dict(gemm=[1, 2])),
        dict(name="x", forward="1 fortnight"),
        dict(name="x", weight_grad_comm=dict(collective="all_reduce", size="0B")),
        dict(name="x", weight_grad_comm=dict(collective="gossip", size="10B")),
    ],
)
def test_bad_layers_are_rejected(layer: dict) -> None:
    with pytest.raises(ValidationError):
        TrainingLoopWorkload.Config(layers=[layer])


def test_unknown_dtype_is_rejected() -> None:
    with pytest.raises(ValidationError, match="dtype"):
        TrainingLoopWorkload.Config(layers=[dict(name="x")], dtype="fp13")
