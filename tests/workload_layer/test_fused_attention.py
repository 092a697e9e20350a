"""``workload.attention: fused`` (the default): one FlashAttention kernel per pass in training and inference, its
FLOPs the unfused GEMMs' times the causal share, its activations the row statistics, and faster than unfused on an
H100 for long sequences; ``attention: bogus`` is one clear error."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from stratasim.kernel import operator_shapes
from stratasim.kernel.graph_blocks import unrolled
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.inference.workload import TransformerInferenceWorkload
from stratasim.workload_layer.transformer.memory import layer_activations
from tests.workload_layer.transformer_helpers import GPT, LLAMA_2_7B, all_graphs, build, run

ROOT = Path(__file__).resolve().parents[2]


def _ops(graph: workload_pb2.ExecutionGraph, fragment: str) -> list[workload_pb2.Node]:
    return [n for n in graph.nodes if n.type == workload_pb2.COMP_NODE and n.name.endswith(fragment)]


def test_the_default_is_fused_with_one_kernel_forward_and_one_backward() -> None:
    assert type(build(GPT).config).model_validate({"model": GPT}).attention == "fused"
    graph = all_graphs(build(GPT, attention="fused"))[0]
    forward = [n for n in _ops(graph, "attention") if not n.op.attention.backward]
    backward = [n for n in _ops(graph, "attention") if n.op.attention.backward]
    assert len(forward) == len(backward) == GPT["layers"]
    assert not _ops(graph, "attention scores") and not _ops(graph, "softmax")
    shape = operator_shapes.shape_of(forward[0].op)
    assert shape == operator_shapes.AttentionShape(
        batch=4, queries=128, keys=128, head_dim=64, group=1, causal=True, backward=False
    )


def test_fused_flops_are_the_unfused_gemms_times_the_causal_share_plus_the_softmax() -> None:
    # s = 512 over 128-blocks: 10 of 16 blocks; scores + context GEMMs 2 x 2 b a s^2 d, softmax 5 per score.
    model = {**GPT, "seq_len": 512}
    fused = all_graphs(build(model, attention="fused"))[0]
    unfused = all_graphs(build(model))[0]
    kernel = _ops(fused, "attention")[0].op
    gemms = _ops(unfused, "attention scores")[0].op.flops + _ops(unfused, "attention context")[0].op.flops
    share = Fraction(10, 16)
    heads, s = GPT["heads"], 512
    assert gemms == 2 * 2 * heads * s * s * 64
    assert kernel.flops == gemms * share + 5 * heads * s * s * share
    # Backward: the same products' gradients (2x) plus the scores recomputed on chip, so 5/2 of the forward's.
    grad = next(n.op for n in _ops(fused, "attention") if n.op.attention.backward)
    assert grad.flops == gemms * share * 5 // 2 + 5 * heads * s * s * share + 2 * heads * s * 64


def test_fused_activations_keep_the_row_statistics_and_selective_recomputes_nothing() -> None:
    s, b, a, tp = 4096, 1, 32, 2  # LLaMA-2 7B's sequence and heads, one sequence per micro-batch
    unfused = layer_activations(build(LLAMA_2_7B, tp=tp).config)
    fused = layer_activations(build(LLAMA_2_7B, attention="fused", tp=tp).config)
    assert unfused.kept_bytes - fused.kept_bytes == 5 * a * s * s * b // tp - 4 * a * s * b // tp
    selective = layer_activations(build(LLAMA_2_7B, attention="fused", tp=tp, recompute="selective").config)
    assert selective == fused and selective.recomputed_bytes == 0
    graph = all_graphs(build(GPT, attention="fused", recompute="selective"))[0]
    assert not [n for n in graph.nodes if "recompute" in n.name]


def test_fused_is_faster_than_unfused_on_an_h100_for_long_sequences() -> None:
    model = {**GPT, "seq_len": 4096, "layers": 2}
    fused = run(build(model, attention="fused")).total_time_ps
    unfused = run(build(model)).total_time_ps
    assert fused < 0.8 * unfused


def test_inference_prefill_and_decode_run_the_fused_kernel() -> None:
    model = {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 2, "seq_len": 512, "vocab": 1000}
    data = {"model": model, "serving": {"batch": 2, "prompt_len": 300, "generate": 3}}
    workload = TransformerInferenceWorkload(TransformerInferenceWorkload.Config.model_validate(data))
    graph = unrolled(workload.graphs(1)[0])
    shapes = [
        operator_shapes.shape_of(n.op)
        for n in graph.nodes
        if n.type == workload_pb2.COMP_NODE and n.name.endswith("attention")
    ]
    batch, group = 2 * 8, 8 // 2
    assert (
        shapes
        == [operator_shapes.AttentionShape(batch, 300, 300, 64, group, True, False)] * 2
        + [operator_shapes.AttentionShape(batch, 1, 301, 64, group, True, False)] * 2
        + [operator_shapes.AttentionShape(batch, 1, 302, 64, group, True, False)] * 2
    )


def test_a_bad_attention_is_one_clear_error_naming_the_key() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stratasim", "check", "examples/transformer.yaml", "--set", "workload.attention=bogus"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "workload.attention" in done.stderr and "fused" in done.stderr and "unfused" in done.stderr


@pytest.mark.parametrize("kind", ["fused", "unfused"])
def test_both_forms_simulate_with_selective_recomputation(kind: str) -> None:
    assert run(build(GPT, attention=kind, tp=2, recompute="selective")).total_time_ps > 0
