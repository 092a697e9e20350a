"""The model builders name what each element-wise operator computes: a LLaMA-shaped model's norms are RMSNorm and its
MLP's gate SiLU times up, a GPT-shaped one's LayerNorm and GeLU; every builder-made element-wise operator names a
function, and a training loop's is what its study says (or unspecified)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from pydantic import ValidationError

from stratasim.kernel import elementwise_functions
from stratasim.kernel.serving import Compute
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.inference.layer_operators import DecoderOperators
from stratasim.workload_layer.models.classic import DlrmConfig, DlrmWorkload, ResNet50Config, ResNet50Workload
from stratasim.workload_layer.traces.convert import read_graphs, write_graphs
from stratasim.workload_layer.training_loop import TrainingLoopConfig, TrainingLoopWorkload
from stratasim.workload_layer.transformer.config import ModelConfig
from tests.workload_layer.test_models import DLRM
from tests.workload_layer.transformer_helpers import GPT, LLAMA_2_7B, all_graphs, build

LLAMA = {**LLAMA_2_7B, "layers": 2, "seq_len": 256}
MOE = {**LLAMA, "experts": 4, "top_k": 2}
UNSPECIFIED = compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED


def _functions(ops: Iterable[compute_pb2.OperatorDesc]) -> dict[str, str]:
    """Each element-wise operator's name and function name; one name never has two functions."""
    found: dict[str, str] = {}
    for op in ops:
        if op.HasField("elementwise"):
            function = elementwise_functions.function_name(op.elementwise.function)
            assert found.setdefault(op.name, function) == function, op.name
    return found


def _graph_functions(model: Mapping[str, object], **plan: object) -> dict[str, str]:
    graphs = all_graphs(build(model, **plan))
    return _functions(n.op for g in graphs for n in g.nodes if n.type == workload_pb2.COMP_NODE)


def test_a_llama_shaped_training_graph_names_rmsnorm_and_silu_mul() -> None:
    assert _graph_functions(LLAMA, attention="fused") == {
        "embedding": "embedding",
        "rmsnorm": "rmsnorm",
        "rotary embedding": "rotary",
        "residual rmsnorm": "rmsnorm",
        "swiglu": "silu_mul",
        "residual": "add",
        "final rmsnorm": "rmsnorm",
        "loss": "cross_entropy",
        "optimizer step": "optimizer",
    }


def test_a_gpt_shaped_training_graph_names_layernorm_gelu_and_softmax() -> None:
    functions = _graph_functions(GPT)  # the unfused attention core: its softmax is an operator of its own
    assert functions["layernorm"] == functions["residual layernorm"] == functions["final layernorm"] == "layernorm"
    assert (functions["gelu"], functions["softmax"]) == ("gelu", "softmax")


def test_a_stratasim_trace_keeps_the_functions(tmp_path: Path) -> None:
    # Chakra traces carry no operators (an export prices each into its node's duration); StrataSim's own keep them.
    graphs = all_graphs(build(LLAMA, attention="fused"))
    write_graphs(tmp_path / "llama", graphs)
    replayed = read_graphs(tmp_path / "llama")
    assert replayed == graphs
    assert _functions(n.op for n in replayed[0].nodes)["rmsnorm"] == "rmsnorm"


def test_a_mixture_of_experts_names_its_router_and_combine() -> None:
    functions = _graph_functions(MOE, attention="fused")
    assert (functions["router softmax"], functions["moe combine"]) == ("softmax", "weighted_sum")


def _inference_ops(model: Mapping[str, object]) -> list[compute_pb2.OperatorDesc]:
    decoder = DecoderOperators(ModelConfig.model_validate(model), tp=1, dtype=compute_pb2.BF16, attention="unfused")
    steps = [
        *decoder.layer(16, decoder.attention_core(1, 16, 16)),
        *(decoder.moe(16) if decoder.model.experts else ()),
        *decoder.embedding(16),
        *decoder.head(1),
    ]
    return [step.op for step in steps if isinstance(step, Compute)]


def test_a_llama_shaped_decoder_names_rmsnorm_and_silu_mul() -> None:
    # The operators keep their names ("layernorm"), but say the function they compute.
    assert _functions(_inference_ops(MOE)) == {
        "layernorm": "rmsnorm",
        "kv append": "copy",
        "softmax": "softmax",
        "residual layernorm": "rmsnorm",
        "swiglu": "silu_mul",
        "residual": "add",
        "router softmax": "softmax",
        "expert combine": "weighted_sum",
        "embedding": "embedding",
        "final layernorm": "rmsnorm",
        "sample": "sample",
    }


def test_a_gpt_shaped_decoder_names_layernorm_and_gelu() -> None:
    functions = _functions(_inference_ops(GPT))
    assert (functions["layernorm"], functions["final layernorm"], functions["gelu"]) == ("layernorm",) * 2 + ("gelu",)


def test_the_classic_models_name_every_element_wise_function() -> None:
    graphs = [*ResNet50Workload(ResNet50Config(batch=1)).graphs(1), *DlrmWorkload(DlrmConfig(**DLRM)).graphs(4)]  # type: ignore[arg-type]
    functions = _functions(n.op for g in graphs for n in g.nodes if n.type == workload_pb2.COMP_NODE)
    assert "unspecified" not in functions.values()
    assert functions["stem bn fwd"] == "batchnorm" and functions["maxpool fwd"] == "pool"
    assert functions["stage1.0.add_relu fwd"] == "add" and functions["embedding lookup"] == "embedding"


def _loop(elementwise: dict[str, object]) -> compute_pb2.OperatorDesc:
    config = TrainingLoopConfig.model_validate({"layers": [{"name": "norm", "forward": {"elementwise": elementwise}}]})
    (graph,) = TrainingLoopWorkload(config).graphs(1)
    return next(n.op for n in graph.nodes if n.HasField("op"))


def test_a_training_loop_names_the_function_its_study_gives() -> None:
    assert _loop({"shape": [4, 4096], "flops_per_element": 8, "function": "rmsnorm"}).elementwise.function == (
        compute_pb2.RMSNORM
    )
    assert _loop({"shape": [4, 4096]}).elementwise.function == UNSPECIFIED
    with pytest.raises(ValidationError, match="unknown element-wise function 'rms'; expected one of add"):
        _loop({"shape": [4, 4096], "function": "rms"})
