"""Layout conversions: the collective each pair of layouts costs forward, the gradient's backward, weight-gradient
sums, and Megatron's sharding of a GPT layer costing exactly its four all-reduces per layer (two forward after the
row-parallel GEMMs, two backward before the column-parallel ones) and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.kernel import operators
from stratasim.workload_layer.dataflow.graph import LAYOUTS, DataflowGraph, Kernel, Layout, Scheme, Tensor
from stratasim.workload_layer.dataflow.layouts import conversion, gradient_conversion, weight_gradient_sum
from stratasim.workload_layer.dataflow.schemes import (
    attention_schemes,
    elementwise_schemes,
    embedding_schemes,
    gemm_schemes,
    replicated,
)
from tests.workload_layer.dataflow.megatron import collectives, megatron_choice

TABLE: dict[tuple[Layout, Layout], str | None] = {
    ("R", "R"): None,
    ("R", "S0"): None,  # each device slices what it holds
    ("R", "S1"): None,
    ("S0", "R"): "all_gather",
    ("S0", "S0"): None,
    ("S0", "S1"): "all_to_all",
    ("S1", "R"): "all_gather",
    ("S1", "S0"): "all_to_all",
    ("S1", "S1"): None,
    ("P", "R"): "all_reduce",
    ("P", "S0"): "reduce_scatter",
    ("P", "S1"): "reduce_scatter",
}
"""Every pair a producer can make and a consumer can take (``P`` is never an input)."""


def test_the_table_covers_every_pair() -> None:
    assert set(TABLE) == {(have, need) for have in LAYOUTS for need in LAYOUTS if need != "P"}


@pytest.mark.parametrize(("pair", "expected"), TABLE.items())
def test_each_conversion(pair: tuple[Layout, Layout], expected: str | None) -> None:
    assert conversion(*pair) == expected


@pytest.mark.parametrize("have", LAYOUTS)
def test_no_input_is_partial_sums(have: Layout) -> None:
    with pytest.raises(ValueError, match="no kernel takes an input as partial sums"):
        conversion(have, "P")


COLUMN, ROW, ROWS = gemm_schemes(weights=True)[:3]
WHOLE = replicated(1)


@pytest.mark.parametrize(
    ("producer", "consumer", "expected"),
    [
        (WHOLE, COLUMN, "all_reduce"),  # Megatron's f: the column-parallel input's gradient summed
        (COLUMN, ROW, None),  # S1 gradient back into S1
        (ROW, WHOLE, None),  # the whole gradient back into a partial-sums output: each device keeps it
        (ROWS, WHOLE, None),  # a whole gradient back into a rows-split output: each device slices its rows
        (WHOLE, WHOLE, None),
        (WHOLE, ROWS, "all_gather"),  # each device returns its rows' gradient; the whole output wants all of it
    ],
)
def test_gradient_conversions(producer: Scheme, consumer: Scheme, expected: str | None) -> None:
    assert gradient_conversion(producer, consumer, 0) == expected


def test_weight_gradients_are_summed_only_where_work_is_split_and_weights_are_not() -> None:
    assert [weight_gradient_sum(s) for s in gemm_schemes(weights=True)] == [False, False, True, False]
    assert [weight_gradient_sum(s) for s in embedding_schemes()] == [False, False, True, False]


@given(
    st.sampled_from(gemm_schemes(True) + gemm_schemes(False) + elementwise_schemes(1) + attention_schemes()),
    st.sampled_from(gemm_schemes(True) + elementwise_schemes(1) + attention_schemes() + embedding_schemes()),
)
def test_a_gradient_returns_to_where_the_output_was(producer: Scheme, consumer: Scheme) -> None:
    """Backward is a conversion into the producer's output layout (the whole of it where that was partial sums),
    from the consumer's input layout, or partial sums where a split consumer took it whole."""
    taken = consumer.inputs[0]
    arrives: Layout = "P" if taken == "R" and consumer.split else taken
    wanted: Layout = "R" if producer.output == "P" else producer.output
    assert gradient_conversion(producer, consumer, 0) == conversion(arrives, wanted)


def gpt_layer(tokens: int = 64, hidden: int = 32, heads: int = 4) -> DataflowGraph:
    """A GPT layer as DFModel's Fig. 2A, by hand: norm, QKV, attention, projection, residual norm, MLP, residual."""
    h, f, d = hidden, 4 * hidden, hidden // heads

    def gemm(name: str, k: int, n: int) -> Kernel:
        return Kernel(name, operators.gemm(tokens, k, n, name=name), gemm_schemes(True), weight_bytes=2 * k * n)

    def pointwise(name: str, width: int, inputs: int = 1, schemes: tuple[Scheme, ...] | None = None) -> Kernel:
        op = operators.elementwise((tokens, width), inputs=inputs, name=name)
        return Kernel(name, op, schemes or (replicated(inputs),), weight_bytes=4 * h if "norm" in name else 0)

    attention = operators.attention(heads, tokens, tokens, d, causal=True, name="attention")
    kernels = (
        pointwise("norm", h),
        gemm("qkv", h, 3 * h),
        Kernel("attention", attention, attention_schemes()),
        gemm("attention projection", h, h),
        pointwise("residual norm", h, inputs=2),
        gemm("mlp up", h, f),
        pointwise("gelu", f, schemes=elementwise_schemes(1)),
        gemm("mlp down", f, h),
        pointwise("residual", h, inputs=2),
    )
    act, wide = 2 * tokens * h, 2 * tokens * f
    tensors = (
        Tensor("normed", "norm", "qkv", act),
        Tensor("qkv out", "qkv", "attention", 3 * act),
        Tensor("context", "attention", "attention projection", act),
        Tensor("projected", "attention projection", "residual norm", act),
        Tensor("normed 2", "residual norm", "mlp up", act),
        Tensor("stream", "residual norm", "residual", act, slot=1),
        Tensor("up", "mlp up", "gelu", wide),
        Tensor("activated", "gelu", "mlp down", wide),
        Tensor("down", "mlp down", "residual", act),
    )
    return DataflowGraph("gpt layer", kernels, tensors, repeat=2, training=True)


def test_megatron_costs_four_all_reduces_per_layer() -> None:
    graph = gpt_layer()
    found = collectives(graph, megatron_choice(graph))
    assert sorted(found) == [
        ("backward", "normed", "all_reduce"),
        ("backward", "normed 2", "all_reduce"),
        ("forward", "down", "all_reduce"),
        ("forward", "projected", "all_reduce"),
    ]


def test_inference_keeps_the_two_forward_all_reduces() -> None:
    graph = gpt_layer()
    inference = DataflowGraph(graph.name, graph.kernels, graph.tensors)
    assert [c[2] for c in collectives(inference, megatron_choice(graph))] == ["all_reduce", "all_reduce"]


def test_data_parallel_costs_only_weight_gradient_sums() -> None:
    """Two GEMMs split by rows (tokens), each device holding every weight: no conversion, and one weight-gradient
    all-reduce per GEMM."""
    kernels = tuple(
        Kernel(name, operators.gemm(64, 32, 32), gemm_schemes(True), weight_bytes=2048) for name in ("a", "b")
    )
    graph = DataflowGraph("mlp", kernels, (Tensor("ab", "a", "b", 4096),), training=True)
    assert collectives(graph, {"a": "m", "b": "m"}) == [
        ("backward", "a", "all_reduce"),
        ("backward", "b", "all_reduce"),
    ]
