"""The MLP, ResNet-50 and DLRM builders: their counts, their graphs and their simulation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from pydantic import ValidationError

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.operator_shapes import shape_of
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.models.classic import (
    DlrmConfig,
    DlrmWorkload,
    MlpConfig,
    MlpWorkload,
    ResNet50Config,
    ResNet50Workload,
)
from tests.system_layer.helpers import RING, topology

WIDTHS = [1024, 4096, 4096, 1000]
DLRM = dict(bottom_mlp=[13, 512, 256, 64], top_mlp=[512, 256, 1], tables=8, rows=10_000, dim=64, batch=32, dp=4)


def run(graphs: Sequence[workload_pb2.ExecutionGraph]) -> SimulationResult:
    ring = topology((RING, len(graphs), 100 * 10**9, 1_000_000))
    return simulate(graphs, AnalyticalNetwork(), ring, SystemOptions(), compute=RooflineCompute(), device="h100")


def forward_gemm_flops(layers: Sequence[object]) -> int:
    return sum(op.flops for layer in layers for op in layer.forward if op.HasField("gemm"))  # type: ignore[attr-defined]


def node_types(graph: workload_pb2.ExecutionGraph) -> Counter[tuple[int, int]]:
    return Counter(
        (node.type, node.comm_type if node.type == workload_pb2.COMM_COLL_NODE else -1) for node in graph.nodes
    )


def forward_compute_ps(graph: workload_pb2.ExecutionGraph) -> int:
    """Roofline time on an H100 of one NPU's forward pass: the compute nodes before the first backward one."""
    ops = []
    for node in graph.nodes:
        if node.type == workload_pb2.COMM_COLL_NODE and "bwd" in node.name or node.name.endswith((" wg", " bn bwd")):
            break
        if node.type == workload_pb2.COMP_NODE:
            ops.append(node.op)
    response = RooflineCompute().estimate(compute_pb2.EstimateRequest(device="h100", ops=ops))
    return sum(cost.duration_ps for cost in response.costs)


def test_mlp_counts_are_exact() -> None:
    batch, dp = 8, 4
    workload = MlpWorkload(MlpConfig(layers=WIDTHS, batch=batch, dp=dp))
    pairs = list(zip(WIDTHS, WIDTHS[1:]))
    assert workload.npus_required() == dp
    assert workload.parameters() == sum(i * o + o for i, o in pairs)
    graph = workload.graphs(dp)[0]
    flops = sum(node.op.flops for node in graph.nodes if node.type == workload_pb2.COMP_NODE)
    assert flops == 3 * sum(2 * batch * i * o for i, o in pairs)
    reduces = [node for node in graph.nodes if node.type == workload_pb2.COMM_COLL_NODE]
    assert all(node.comm_type == workload_pb2.ALL_REDUCE for node in reduces)
    assert [node.comm_bytes for node in reduces] == [2 * (i * o + o) for i, o in reversed(pairs)]
    assert len(graph.nodes) == 4 * len(pairs)
    op = graph.nodes[0].op
    assert (
        list(shape_of(op).dims()) == [batch, 1024, 4096] and op.bytes == (batch * 1024 + 1024 * 4096 + batch * 4096) * 2
    )


def test_mlp_all_reduces_overlap_the_backward_pass() -> None:
    graph = MlpWorkload(MlpConfig(layers=WIDTHS, batch=8, dp=4)).graphs(4)[0]
    # No compute node waits for an all-reduce: they overlap the rest of the backward pass.
    reduces = {node.id for node in graph.nodes if node.type == workload_pb2.COMM_COLL_NODE}
    assert not any(set(node.data_deps) & reduces for node in graph.nodes)
    assert all(
        len(graph.nodes[r].data_deps) == 1 and "wg" in graph.nodes[graph.nodes[r].data_deps[0]].name for r in reduces
    )


def test_resnet50_matches_the_published_counts() -> None:
    workload = ResNet50Workload(ResNet50Config(batch=1))
    layers = workload.layers()
    assert forward_gemm_flops(layers) == pytest.approx(2 * 4.1e9, rel=0.05)
    total = sum(op.flops for layer in layers for op in layer.forward)
    assert total == pytest.approx(2 * 4.1e9, rel=0.05)
    assert workload.parameters() == pytest.approx(25.5e6, rel=0.02)
    convs = [layer for layer in layers if layer.params and layer.name != "fc"]
    assert len(convs) == 53  # 1 stem + 16 blocks x 3 + 4 projections


def test_resnet50_convs_are_implicit_gemms() -> None:
    workload = ResNet50Workload(ResNet50Config(batch=2))
    stem = workload.layers()[0]
    assert list(shape_of(stem.forward[0]).dims()) == [2 * 112 * 112, 3 * 7 * 7, 64]
    graph = workload.graphs(1)[0]
    counts = node_types(graph)
    assert counts[(workload_pb2.COMM_COLL_NODE, workload_pb2.ALL_REDUCE)] == 54  # 53 convs + fc
    assert sum(counts.values()) == len(graph.nodes)
    assert all(node.op.flops > 0 and node.op.bytes > 0 for node in graph.nodes if node.type == workload_pb2.COMP_NODE)


def test_dlrm_shards_tables_and_exchanges_embeddings() -> None:
    workload = DlrmWorkload(DlrmConfig(**DLRM))  # type: ignore[arg-type]
    graph = workload.graphs(4)[0]
    counts = node_types(graph)
    to_all = [
        node
        for node in graph.nodes
        if node.comm_type == workload_pb2.ALL_TO_ALL and node.type == workload_pb2.COMM_COLL_NODE
    ]
    assert len(to_all) == 2 and all(node.comm_bytes == 32 * 8 * 64 * 2 for node in to_all)
    assert counts[(workload_pb2.COMM_COLL_NODE, workload_pb2.ALL_REDUCE)] == 3 + 3  # bottom and top MLP layers
    lookup = next(node.op for node in graph.nodes if node.name == "embedding lookup")
    assert lookup.bytes == 32 * 4 * (8 // 4) * 64 * 2  # global batch x local tables x dim x bf16
    embedding = next(layer for layer in workload.layers() if layer.name == "embedding")
    assert embedding.params == 2 * 10_000 * 64 and not embedding.data_parallel
    top_in = next(node.op for node in graph.nodes if node.name == "top0 fwd")
    assert list(shape_of(top_in).dims()) == [32, 64 + 9 * 8 // 2, 512]


@pytest.mark.parametrize(
    "make",
    [
        lambda: MlpWorkload(MlpConfig(layers=WIDTHS, batch=8, dp=4)),
        lambda: ResNet50Workload(ResNet50Config(batch=2, dp=4)),
        lambda: DlrmWorkload(DlrmConfig(**DLRM)),  # type: ignore[arg-type]
    ],
    ids=["mlp", "resnet50", "dlrm"],
)
def test_every_model_simulates_on_a_ring(make: object) -> None:
    workload = make()  # type: ignore[operator]
    graphs = workload.graphs(workload.npus_required())
    result = run(graphs)
    assert result.npus == 4 and result.total_time_ps > 0
    assert all(npu.compute_ps > 0 for npu in result.per_npu)
    forward = forward_compute_ps(graphs[0])
    assert 0 < forward < result.total_time_ps
    kinds = {stats.type for stats in result.collectives}
    assert "all_reduce" in kinds
    if workload.name == "dlrm":
        assert "all_to_all" in kinds


def test_graphs_need_dp_npus() -> None:
    with pytest.raises(WorkloadError, match="needs exactly 4 NPUs"):
        MlpWorkload(MlpConfig(layers=WIDTHS, batch=8, dp=4)).graphs(2)


@pytest.mark.parametrize(
    ("config", "keys", "field"),
    [
        (MlpConfig, dict(layers=[], batch=8), "layers"),
        (MlpConfig, dict(layers=[8, 0], batch=8), "layers"),
        (MlpConfig, dict(layers=WIDTHS, batch=8, dp=0), "dp"),
        (ResNet50Config, dict(batch=0), "batch"),
        (ResNet50Config, dict(batch=1, precision="fp7"), "precision"),
        (DlrmConfig, {**DLRM, "tables": 6}, "tables"),
        (DlrmConfig, {**DLRM, "dim": 32}, "bottom_mlp"),
        (DlrmConfig, {**DLRM, "widths": [1]}, "widths"),
    ],
)
def test_bad_configs_name_the_field(config: type, keys: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        config(**keys)
