"""DLRM as a dataflow graph: bottom MLP, embeddings, interaction, top MLP; model-parallel embeddings meeting a
sample-split interaction cost DLRM's all-to-all forward and backward; the 793B preset holds 793 billion
parameters."""

from __future__ import annotations

from typing import Any

import pytest

from stratasim.workload_layer.dataflow.generators.dlrm import dlrm_793b, dlrm_graph
from stratasim.workload_layer.dataflow.graph import GraphError
from tests.workload_layer.dataflow.megatron import collectives

SMALL: dict[str, Any] = dict(
    tables=8, rows=1000, embedding_dim=16, pooling=4, mlp_dim=64, bottom_layers=2, top_layers=3
)


def test_the_graph_is_dlrms() -> None:
    graph = dlrm_graph(32, **SMALL)
    assert [k.name for k in graph.kernels] == [
        "bottom mlp 1",
        "bottom mlp 2",
        "embeddings",
        "interaction",
        "top mlp 1",
        "top mlp 2",
        "top mlp 3",
    ]
    assert graph.kernel("interaction").flops == 2 * 32 * 9 * 16 * 9
    assert graph.kernel("top mlp 1").operator.gemm.k == 9 * 8 // 2 + 16
    assert graph.kernel("top mlp 3").operator.gemm.n == 1
    assert graph.kernel("embeddings").weight_bytes == 8 * 1000 * 16 * 2
    assert graph.kernel("embeddings").flops == 32 * 8 * 16 * 3


def test_model_parallel_embeddings_cost_the_all_to_all() -> None:
    """Tables spread over devices (``columns``), everything else data parallel: an all-to-all each way and the
    MLPs' weight-gradient sums."""
    graph = dlrm_graph(32, **SMALL)
    choice = {k.name: "m" for k in graph.kernels} | {"embeddings": "columns", "interaction": "samples"}
    found = collectives(graph, choice)
    assert [c for c in found if c[1] == "pooled embeddings"] == [
        ("forward", "pooled embeddings", "all_to_all"),
        ("backward", "pooled embeddings", "all_to_all"),
    ]
    assert sorted(c[1] for c in found if c[1] != "pooled embeddings") == sorted(
        k.name for k in graph.kernels if "mlp" in k.name
    )


def test_the_793b_preset() -> None:
    graph = dlrm_793b()
    params = sum(k.weight_bytes for k in graph.kernels) // 2
    assert abs(params - 793e9) < 1e6
    assert len(graph.kernels) == 22 and graph.training
    assert graph.kernel("embeddings").operator.elementwise.elements == 65536 * 600 * 93


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tables": 0}, "dlrm_graph: argument 'tables': must be an integer of at least 1, not 0"),
        ({"pooling": 2.5}, "argument 'pooling': must be an integer"),
        ({"dense_features": -1}, "argument 'dense_features': must be an integer of at least 1"),
        ({"dtype": "fp12"}, "argument 'dtype': unknown dtype 'fp12'"),
        ({"training": 1}, "argument 'training': must be true or false, not 1"),
    ],
)
def test_bad_arguments_are_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        dlrm_graph(32, **(SMALL | changes))
