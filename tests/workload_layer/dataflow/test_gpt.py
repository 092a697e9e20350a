"""The GPT layer graph: its kernels are the transformer builder's own steps with the operators the engine prices,
its weights the layer's parameters, and Megatron's sharding of it costs exactly four all-reduces per layer."""

from __future__ import annotations

from typing import Any

import pytest

from stratasim.kernel import operators
from stratasim.workload_layer.dataflow.generators.gpt import GPT3_1T, gpt3_1t, gpt3_1t_config, gpt_layer_graph
from stratasim.workload_layer.dataflow.graph import GraphError
from stratasim.workload_layer.transformer.blocks import layer_parameters, layer_steps
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.step_operators import step_operator
from stratasim.workload_layer.transformer.steps import Attention, Gemm, Pointwise
from tests.workload_layer.dataflow.megatron import collectives, megatron_choice

MODEL = {"layers": 4, "hidden": 256, "heads": 8, "seq_len": 128, "vocab": 1000}


def config(model: dict[str, Any] | None = None, **keys: Any) -> TransformerConfig:
    return TransformerConfig.model_validate({"model": MODEL | (model or {})} | keys)


def test_a_gpt_layer_is_dfmodels_figure_2a() -> None:
    graph = gpt_layer_graph(config())
    assert [k.name for k in graph.order()] == [
        "layernorm",
        "qkv",
        "attention",
        "attention projection",
        "residual layernorm",
        "mlp up",
        "gelu",
        "mlp down",
        "residual",
    ]
    assert graph.repeat == 4 and graph.training
    assert {(t.source, t.target, t.slot) for t in graph.tensors} == {
        ("layernorm", "qkv", 0),
        ("qkv", "attention", 0),
        ("attention", "attention projection", 0),
        ("attention projection", "residual layernorm", 0),
        ("residual layernorm", "mlp up", 0),
        ("residual layernorm", "residual", 1),
        ("mlp up", "gelu", 0),
        ("gelu", "mlp down", 0),
        ("mlp down", "residual", 0),
    }


@pytest.mark.parametrize(
    "keys",
    [
        {},
        {"attention": "unfused"},
        {"model": {"activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope", "bias": False}},
        {"model": {"parallel_block": True}},
        {"model": {"kv_heads": 2}, "precision": "fp16", "gemm_precision": "fp8"},
        {"parallelism": {"micro_batch": 2, "tp": 2, "dp": 2, "sequence_parallel": True}},
    ],
)
def test_kernels_run_the_builders_operators(keys: dict[str, Any]) -> None:
    """Each kernel's operator is the engine's forward operator of the step of the same name on one device."""
    chosen = config(keys.pop("model", None), **keys)
    graph = gpt_layer_graph(chosen)
    single = TransformerConfig.model_validate(
        chosen.model_dump(exclude_unset=True) | {"parallelism": {"micro_batch": chosen.parallelism.micro_batch}}
    )
    dtype = operators.parse_dtype(chosen.precision)
    gemm = None if chosen.gemm_precision is None else operators.parse_dtype(chosen.gemm_precision)
    steps = [s for s in layer_steps(single, 0) if isinstance(s, (Gemm, Pointwise, Attention))]
    assert [k.operator for k in graph.kernels] == [step_operator(s, "forward", dtype, gemm) for s in steps]
    assert sum(k.weight_bytes for k in graph.kernels) == layer_parameters(chosen.model, 0, 1, 1).dense * (
        operators.dtype_bytes(dtype)
    )
    assert all(t.bytes > 0 for t in graph.tensors)


def test_megatron_costs_four_all_reduces_per_layer() -> None:
    graph = gpt_layer_graph(config())
    found = collectives(graph, megatron_choice(graph))
    assert sorted(found) == [
        ("backward", "layernorm -> qkv", "all_reduce"),
        ("backward", "residual layernorm -> mlp up", "all_reduce"),
        ("forward", "attention projection -> residual layernorm", "all_reduce"),
        ("forward", "mlp down -> residual", "all_reduce"),
    ]


def test_megatron_with_an_unfused_core_still_costs_four() -> None:
    graph = gpt_layer_graph(config(attention="unfused"))
    assert [c[2] for c in collectives(graph, megatron_choice(graph))] == ["all_reduce"] * 4


def test_sequence_parallel_norms_turn_each_all_reduce_into_a_gather_and_a_scatter() -> None:
    """Korthikanti et al.: norms and residuals split by tokens; all-gather before each column-parallel GEMM and
    reduce-scatter after each row-parallel one forward, the conjugates backward."""
    graph = gpt_layer_graph(config(parallelism={"tp": 2, "sequence_parallel": True}))
    choice = megatron_choice(graph)
    choice |= {k.name: "split_S0" for k in graph.kernels if choice[k.name] == "replicate"}
    kinds = sorted(c[2] for c in collectives(graph, choice))
    assert kinds == ["all_gather"] * 4 + ["reduce_scatter"] * 4


def test_norms_are_replicated_unless_the_plan_splits_the_sequence() -> None:
    plain = gpt_layer_graph(config()).kernel("layernorm")
    assert [s.name for s in plain.schemes] == ["replicate"]
    split = gpt_layer_graph(config(parallelism={"tp": 2, "sequence_parallel": True})).kernel("residual")
    assert [s.name for s in split.schemes] == ["replicate", "split_S0"]
    assert [s.name for s in gpt_layer_graph(config()).kernel("gelu").schemes] == ["replicate", "split_S0", "split_S1"]


def test_inference_has_no_backward_pass() -> None:
    assert not gpt_layer_graph(config(), training=False).training


def test_the_gpt3_1t_preset() -> None:
    graph = gpt3_1t()
    assert gpt3_1t_config().model == GPT3_1T
    assert graph.repeat == 128 and len(graph.kernels) == 9
    h, tokens = 25600, 2048
    assert graph.kernel("qkv").flops == 2 * tokens * h * 3 * h
    assert graph.kernel("mlp up").flops == 2 * tokens * h * 4 * h
    params = sum(k.weight_bytes for k in graph.kernels) // 2 * graph.repeat
    assert 1.00e12 < params < 1.01e12


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: gpt_layer_graph({"model": MODEL}), "gpt_layer_graph: argument 'config': must be a TransformerConfig"),  # type: ignore[arg-type]
        (lambda: gpt_layer_graph(config(), training="yes"), "argument 'training': must be true or false"),  # type: ignore[arg-type]
        (lambda: gpt_layer_graph(config({"experts": 4})), "argument 'config': model.experts: a mixture of experts"),
        (lambda: gpt3_1t(micro_batch=0), "gpt3_1t_config: argument 'micro_batch': must be an integer of at least 1"),
    ],
)
def test_bad_arguments_are_named(call: Any, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        call()
