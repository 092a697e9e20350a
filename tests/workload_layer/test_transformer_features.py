"""Model and plan features of the transformer: GQA/MQA, SwiGLU, LLaMA-style options, sequence parallelism,
selective recomputation and ZeRO; checked against published parameter counts and the papers' closed forms."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stratasim.kernel.operator_shapes import shape_of
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.blocks import model_parameters
from stratasim.workload_layer.transformer.memory import layer_activation_bytes, layer_activations
from tests.workload_layer.transformer_helpers import (
    GPT,
    LLAMA_2_7B,
    all_graphs,
    build,
    collectives,
    gemm_flops,
    kinds,
    run,
)

LLAMA_2_70B = {**LLAMA_2_7B, "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn": 28672}
GQA = {**GPT, "heads": 8, "kv_heads": 2, "activation": "swiglu", "ffn": 512}
L, H, A, S, V = 4, 256, 4, 128, 1000


def test_llama_2_parameter_counts_match_the_published_figures() -> None:
    # Untied embeddings, no biases, RMSNorm, rotary positions: per layer 4 h^2 (attention) + 3 h ffn (SwiGLU)
    # + 2 h (norms); plus input and output embeddings 2 V h and the final norm h.
    h, f = 4096, 11008
    assert 32 * (4 * h * h + 3 * h * f + 2 * h) + 2 * 32000 * h + h == 6_738_415_616
    assert model_parameters(build(LLAMA_2_7B).config.model) == 6_738_415_616
    assert build(LLAMA_2_7B).stage_parameters(0) == 6_738_415_616  # one NPU holds every parameter
    # 70B: grouped-query attention with 8 key-value heads of 128: K and V are 8192 x 1024 each.
    h, f = 8192, 28672
    assert 80 * (2 * h * h + 2 * h * 1024 + 3 * h * f + 2 * h) + 2 * 32000 * h + h == 68_976_648_192
    assert model_parameters(build(LLAMA_2_70B).config.model) == 68_976_648_192


def test_tied_embeddings_count_once_but_the_last_stage_keeps_a_copy() -> None:
    tied, untied = build(GPT), build({**GPT, "tie_embeddings": False})
    assert model_parameters(untied.config.model) - model_parameters(tied.config.model) == V * H
    assert tied.stage_parameters(0) == model_parameters(tied.config.model)
    two_stages = build(GPT, pp=2)
    assert sum(two_stages.stage_parameters(p) for p in range(2)) == model_parameters(tied.config.model) + V * H


def test_grouped_query_attention_narrows_the_qkv_gemm_and_its_parameters() -> None:
    # 8 heads of 32 share 2 key-value heads: QKV is (8 + 2 * 2) * 32 = 384 wide, 192 per TP rank of 2.
    workload = build(GQA, tp=2)
    qkv = [n for n in all_graphs(workload)[0].nodes if n.name == "mb0 layer0 fwd qkv"]
    assert [list(shape_of(n.op).dims()) for n in qkv] == [[128, 256, 192]]
    # Per TP rank: QKV 256 * 192 + bias 192, projection 128 * 256 + bias 256, SwiGLU up 256 * 512 + bias 512,
    # down 256 * 256 + bias 256, two layernorms 4 * 256.
    layer = 256 * 192 + 192 + 128 * 256 + 256 + 256 * 512 + 512 + 256 * 256 + 256 + 4 * 256
    embeddings, final = 500 * 256 + 128 * 256, 512
    assert workload.stage_parameters(0) == 4 * layer + embeddings + final


def test_multi_query_attention_needs_one_tp_rank_per_key_value_head() -> None:
    assert build({**GPT, "kv_heads": 1}).stage_parameters(0) < build(GPT).stage_parameters(0)
    with pytest.raises(ValidationError, match=r"model.kv_heads \(1\) must be divisible by parallelism.tp \(2\)"):
        build({**GPT, "kv_heads": 1}, tp=2)


PLANS = [
    (GQA, dict(tp=2, pp=2, global_batch=4)),
    (GPT, dict(tp=2, pp=2, sequence_parallel=True, global_batch=4)),
    (GPT, dict(tp=2, recompute="selective", global_batch=2)),
    (GPT, dict(tp=2, recompute="selective", sequence_parallel=True, global_batch=2)),
    (GPT, dict(tp=2, recompute="full", sequence_parallel=True, global_batch=2)),
    ({**GPT, "vocab": 999}, dict(tp=2, zero=3, dp=2, global_batch=4)),
    ({**GPT, "position_embedding": "rope", "norm": "rmsnorm", "bias": False}, dict(tp=2, zero=1, dp=2)),
    ({**GPT, "heads": 6, "head_dim": 32}, dict(tp=2, recompute="full", global_batch=2)),
    ({**GPT, "parallel_block": True}, dict(tp=2, pp=2, sequence_parallel=True, global_batch=4)),
]


@pytest.mark.parametrize(("model", "plan"), PLANS)
def test_model_flops_are_the_gemm_flops_the_graphs_run(model: dict[str, object], plan: dict[str, object]) -> None:
    workload = build(model, **plan)
    assert gemm_flops(all_graphs(workload)) == workload.model_flops_per_iteration()


def test_gqa_and_swiglu_flops_by_hand() -> None:
    # Per token and layer, forward: QKV 2 h (a + 2 g) d, attention core 4 s h, projection 2 h^2, SwiGLU MLP
    # 2 h (2 ffn + ffn); three passes; the LM head 3 * 2 h V.
    h, f, s, tokens = 256, 512, 128, 4 * 128
    layer = 2 * h * (8 + 4) * 32 + 4 * s * h + 2 * h * h + 2 * h * 3 * f
    assert build(GQA, dp=2, global_batch=4).model_flops_per_iteration() == tokens * (3 * L * layer + 6 * h * V)


def test_head_dim_sets_the_heads_width_apart_from_hidden() -> None:
    # MaxText's scaled models: 6 heads of 32 (192 wide) on h = 256, so hidden need not divide by heads. QKV is
    # [T, 256] x [256, 3 * 192 / 2] on a TP rank of 2, the projection [T, 96] x [96, 256].
    model = {**GPT, "heads": 6, "head_dim": 32, "bias": False, "norm": "rmsnorm"}
    workload = build(model, tp=2)
    shapes = {
        n.name.split(" fwd ")[1]: list(shape_of(n.op).dims())
        for n in all_graphs(workload)[0].nodes
        if n.name.startswith("mb0 layer0 fwd ") and n.name.endswith(("qkv", "projection"))
    }
    assert shapes == {"qkv": [128, 256, 288], "attention projection": [128, 96, 256]}
    h, width, f, s = 256, 192, 1024, 128
    layer = 3 * h * width + width * h + 2 * h * f + 2 * h
    assert model_parameters(workload.config.model) == L * layer + V * h + S * h + h
    # Per token and layer, forward: QKV 2 h 3 a d, attention core 4 s a d, projection 2 a d h, MLP 4 h f.
    per_token = 2 * h * 3 * width + 4 * s * width + 2 * width * h + 4 * h * f
    assert build(model, global_batch=1).model_flops_per_iteration() == s * (3 * L * per_token + 6 * h * V)
    with pytest.raises(ValidationError, match=r"model.hidden \(256\) must be divisible by model.heads \(6\)"):
        build({**GPT, "heads": 6})


def test_a_parallel_block_has_one_norm_and_one_tp_operator_each_way() -> None:
    # PaLM's layer: attention and MLP read one norm's output inside one TP region, their sum joins the residual.
    parallel, sequential = build({**GPT, "parallel_block": True}, tp=2), build(GPT, tp=2)
    graph = all_graphs(parallel)[0]
    assert kinds(collectives(graph, "mb0 layer1 fwd")) == ["ALL_REDUCE"]
    assert kinds(collectives(graph, "mb0 layer1 bwd")) == ["ALL_REDUCE"]
    assert len(collectives(all_graphs(sequential)[0], "mb0 layer1 fwd")) == 2
    # The same GEMMs, one layernorm (scale and shift, h each) fewer per layer.
    assert parallel.model_flops_per_iteration() == sequential.model_flops_per_iteration()
    assert model_parameters(sequential.config.model) - model_parameters(parallel.config.model) == L * 2 * H
    with pytest.raises(ValidationError, match="model.parallel_block applies to dense models only"):
        build({**GPT, "parallel_block": True, "experts": 4})


def test_selective_recomputation_reruns_the_attention_core_only() -> None:
    workload = build(GPT, recompute="selective", global_batch=3)
    recomputed = {n.name.split(" recompute ")[1] for n in all_graphs(workload)[0].nodes if " recompute " in n.name}
    assert recomputed == {"attention scores", "softmax", "attention context"}
    # 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) plus one forward pass of the core, 4 B s^2 h per layer:
    # 72 B s l h^2 (1 + 2s/(9h) + V/(12 l h)).
    formula = 72 * 3 * S * L * H**2 * (1 + 2 * S / (9 * H) + V / (12 * L * H))
    assert workload.model_flops_per_iteration() == pytest.approx(formula, rel=1e-12)
    none = build(GPT, global_batch=3).model_flops_per_iteration()
    assert workload.model_flops_per_iteration() - none == L * 4 * 3 * S * S * H


def test_sequence_parallelism_turns_each_all_reduce_into_a_reduce_scatter_and_an_all_gather() -> None:
    workload = build(GPT, tp=2, pp=2, sequence_parallel=True, global_batch=2)
    graphs = all_graphs(workload)
    layer = collectives(graphs[0], "mb0 layer1 fwd")
    # g before QKV, g-bar after the projection, g before the MLP, g-bar after it; conjugate backward.
    assert kinds(layer) == ["ALL_GATHER", "REDUCE_SCATTER", "ALL_GATHER", "REDUCE_SCATTER"]
    assert kinds(collectives(graphs[0], "mb0 layer1 bwd")) == ["ALL_GATHER", "REDUCE_SCATTER"] * 2
    full = S * H * 2  # the gathered activation of one micro-batch, in bf16
    assert {n.comm_bytes for n in collectives(graphs[0])} == {full}
    assert {tuple(n.group) for n in collectives(graphs[0])} == {(0, 1)}
    assert all(n.pg_name == "tp" for n in collectives(graphs[0]))
    assert not [n for n in collectives(graphs[0]) if n.comm_type == workload_pb2.ALL_REDUCE]
    # Two collectives of the same buffer for each all-reduce they replace (2 per layer and pass, 2 micro-batches).
    plain = all_graphs(build(GPT, tp=2, pp=2, global_batch=2))[0]
    assert len(collectives(graphs[0], "layer1")) == 2 * len(collectives(plain, "layer1")) == 2 * 2 * 2 * 2
    # Norms and residuals run on the rank's sequence shard; pipeline messages carry the shard.
    norm = next(n for n in graphs[0].nodes if n.name == "mb0 layer1 fwd layernorm")
    assert shape_of(norm.op).dims() == (S // 2 * H,)  # an element-wise operator travels as its element count
    sends = {n.comm_bytes for n in graphs[0].nodes if n.type == workload_pb2.COMM_SEND_NODE}
    assert sends == {full // 2}


def test_sequence_parallel_input_gradient_reduce_scatter_overlaps_the_weight_gradient() -> None:
    graph = all_graphs(build(GPT, tp=2, sequence_parallel=True))[0]
    nodes = {n.name: n for n in graph.nodes}
    scatter = collectives(graph, "mb0 layer0 bwd tp reduce-scatter")[-1]  # the input gradient of QKV
    dgrad, wgrad = nodes["mb0 layer0 bwd qkv dgrad"], nodes["mb0 layer0 bwd qkv wgrad"]
    assert list(scatter.data_deps) == [dgrad.id]
    assert {wgrad.id, scatter.id} <= set(nodes["mb0 layer0 bwd layernorm"].data_deps)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_activation_memory_follows_korthikanti_table_2(tp: int) -> None:
    s, b, h, a = 2048, 4, 4096, 32
    sbh, attention = s * b * h, 5 * a * s * s * b
    assert layer_activation_bytes(s, b, h, a, tp) == 10 * sbh + (24 * sbh + attention) // tp  # eq. 2
    assert layer_activation_bytes(s, b, h, a, tp, sequence_parallel=True) == (34 * sbh + attention) // tp  # eq. 4
    assert layer_activation_bytes(s, b, h, a, tp, selective=True) == 10 * sbh + 24 * sbh // tp
    assert layer_activation_bytes(s, b, h, a, tp, sequence_parallel=True, selective=True) == 34 * sbh // tp


@pytest.mark.parametrize("sequence_parallel", [False, True])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_layer_activations_of_a_gpt_layer_are_the_closed_forms(sequence_parallel: bool, recompute: str) -> None:
    plan = dict(tp=2, micro_batch=2, sequence_parallel=sequence_parallel, recompute=recompute)
    layer = layer_activations(build(GPT, **plan).config)
    whole = layer_activation_bytes(S, 2, H, A, 2, sequence_parallel=sequence_parallel)
    kept = layer_activation_bytes(S, 2, H, A, 2, sequence_parallel=sequence_parallel, selective=True)
    layer_input = 2 * S * 2 * H // (2 if sequence_parallel else 1)
    expected = {"none": (whole, 0), "selective": (kept, whole - kept), "full": (layer_input, whole)}[recompute]
    assert (layer.kept_bytes, layer.recomputed_bytes) == expected


def test_gqa_and_swiglu_generalise_the_split_activations() -> None:
    # 24 s b h becomes 4 s b h (Q, projection input) + 4 s b g d (K, V) + 2 s b (2 ffn + ffn) (SwiGLU's inputs,
    # the down projection's input); the replicated 10 s b h and the core's 5 a s^2 b are unchanged.
    s, h, g, d, f = 128, 256, 2, 32, 512
    split = 4 * s * h + 4 * s * g * d + 2 * s * 3 * f
    assert layer_activations(build(GQA, tp=2).config).kept_bytes == 10 * s * h + (split + 5 * 8 * s * s) // 2


def test_stage_activations_with_sequence_parallelism_and_selective_recomputation() -> None:
    # Korthikanti et al.'s eq. 6: 34 s b h L / t kept on the first 1F1B stage (pp micro-batches in flight),
    # plus one layer's attention core while its backward pass recomputes it.
    workload = build(GPT, tp=2, pp=2, global_batch=4, sequence_parallel=True, recompute="selective")
    per_layer, core = 34 * S * H // 2, 5 * A * S * S // 2
    assert workload.stage_memory(0).activations_bytes == per_layer * 2 * 2 + core


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_memory_follows_the_paper(zero: int) -> None:
    # Rajbhandari et al., figure 1, K = 12: (2 + 2 + K) Psi, 2 Psi + 2 Psi + K Psi / Nd, 2 Psi + (2 + K) Psi / Nd,
    # (2 + 2 + K) Psi / Nd.
    workload = build(GPT, dp=4, zero=zero)
    psi, nd = workload.stage_parameters(0), 4
    assert psi % nd == 0
    expected = [16 * psi, 4 * psi + 12 * psi // nd, 2 * psi + 14 * psi // nd, 16 * psi // nd][zero]
    memory = workload.stage_memory(0)
    assert memory.weights_bytes + memory.gradients_bytes + memory.optimizer_bytes == expected
    assert memory.activations_bytes == build(GPT, dp=4).stage_memory(0).activations_bytes


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_1_and_2_reduce_scatter_the_gradients_and_all_gather_the_parameters(zero: int) -> None:
    workload = build(GPT, dp=2, zero=zero)
    graph = all_graphs(workload)[0]
    scatter, gather = collectives(graph)
    size = 2 * workload.stage_parameters(0)
    assert (scatter.name, scatter.comm_type, scatter.comm_bytes) == (
        "dp gradient reduce-scatter",
        workload_pb2.REDUCE_SCATTER,
        size,
    )
    assert (gather.name, gather.comm_type, gather.comm_bytes) == (
        "dp parameter all-gather",
        workload_pb2.ALL_GATHER,
        size,
    )
    assert scatter.id in gather.data_deps and {scatter.pg_name, gather.pg_name} == {"dp"}
    assert tuple(scatter.group) == (0, 1)


def test_zero_3_gathers_each_block_before_its_passes_and_scatters_its_gradients() -> None:
    workload = build(GPT, dp=2, zero=3, global_batch=4)  # two micro-batches
    graph = all_graphs(workload)[0]
    size = 2 * workload.stage_parameters(0)
    gathers, scatters = collectives(graph, "zero all-gather"), collectives(graph, "zero reduce-scatter")
    assert sum(n.comm_bytes for n in gathers) == 2 * 2 * size  # forward and backward, each micro-batch
    assert sum(n.comm_bytes for n in scatters) == 2 * size
    assert len(gathers) == 2 * 2 * 6 and len(scatters) == 2 * 6  # embedding, 4 layers, head
    assert not collectives(graph, "dp gradient")
    nodes = {n.name: n for n in graph.nodes}
    gather = nodes["mb0 layer2 fwd zero all-gather"]
    assert gather.id in nodes["mb0 layer2 fwd layernorm"].data_deps
    # Prefetched: issued when the previous layer's forward pass could start, not when it ended.
    assert list(gather.data_deps) == list(nodes["mb0 layer1 fwd layernorm"].data_deps)


@pytest.mark.parametrize(
    ("model", "plan"),
    [
        (GQA, dict(tp=2, pp=2, global_batch=4)),
        (GPT, dict(tp=2, pp=2, dp=2, sequence_parallel=True, recompute="selective", global_batch=8)),
        (GPT, dict(tp=2, dp=2, sequence_parallel=True, recompute="full", zero=1, global_batch=4)),
        (GPT, dict(pp=2, dp=2, zero=2, dp_bucket="1000000B", global_batch=4)),
        (GPT, dict(tp=2, pp=2, dp=2, zero=3, global_batch=8)),
    ],
)
def test_every_new_plan_simulates_to_completion(model: dict[str, object], plan: dict[str, object]) -> None:
    workload = build(model, **plan)
    result = run(workload)
    assert result.npus == workload.npus_required() and result.total_time_ps > 0
    assert all(npu.compute_ps > 0 for npu in result.per_npu)


@pytest.mark.parametrize(
    ("model", "plan"),
    [
        (GPT, dict(tp=2, pp=2, sequence_parallel=True, recompute="selective", global_batch=8)),
        (GPT, dict(tp=2, pp=2, sequence_parallel=True, recompute="full", global_batch=8)),
        ({**GPT, "experts": 4, "moe_every": 2}, dict(tp=2, pp=2, dp=2, ep=2, sequence_parallel=True, global_batch=8)),
    ],
)
def test_the_timeline_peaks_at_the_closed_form_memory(model: dict[str, object], plan: dict[str, object]) -> None:
    workload = build(model, **plan)
    assert [npu.peak_memory_bytes for npu in run(workload).per_npu] == workload.memory_per_npu_bytes()


def test_sequence_parallelism_is_not_slower_than_plain_tensor_parallelism_on_a_ring() -> None:
    # A reduce-scatter and an all-gather are the two halves of a ring all-reduce, and the pointwise work
    # outside the TP regions shrinks by tp.
    plain = run(build(GPT, tp=4, global_batch=2))
    sequence = run(build(GPT, tp=4, global_batch=2, sequence_parallel=True))
    assert sequence.total_time_ps <= plain.total_time_ps
    assert max(n.compute_ps for n in sequence.per_npu) < max(n.compute_ps for n in plain.per_npu)


@pytest.mark.parametrize(
    ("model", "plan", "message"),
    [
        (dict(kv_heads=3), {}, "model.heads (4) must be divisible by model.kv_heads (3)"),
        (dict(heads=8, kv_heads=2), dict(tp=4), "model.kv_heads (2) must be divisible by parallelism.tp (4)"),
        ({}, dict(sequence_parallel=True), "parallelism.sequence_parallel needs parallelism.tp above 1"),
        (
            dict(seq_len=130),
            dict(tp=4, sequence_parallel=True),
            "model.seq_len (130) must be divisible by parallelism.tp (4)",
        ),
        (dict(activation="relu"), {}, "activation"),
        ({}, dict(recompute="partial"), "recompute"),
        ({}, dict(zero=4), "zero"),
    ],
)
def test_impossible_plans_name_the_keys(model: dict[str, object], plan: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build({**GPT, **model}, **plan)


def test_scatter_gather_sends_shares_and_gathers_them_over_tp() -> None:
    plain = build(GPT, tp=2, pp=2)
    split = build(GPT, tp=2, pp=2, scatter_gather=True)
    activation = 128 * 256 * 2  # s * b * h elements in bf16
    stage1 = all_graphs(split)[2]
    receives = [n for n in stage1.nodes if n.type == workload_pb2.COMM_RECV_NODE]
    assert receives and {n.comm_bytes for n in receives} == {activation // 2}
    gathers = collectives(stage1, "fwd recv tp all-gather")  # in the first layer of each forward pass
    assert len(gathers) == len([n for n in receives if "forward" in n.name])
    assert {(n.comm_bytes, tuple(n.group), n.pg_name) for n in gathers} == {(activation, (2, 3), "pp")}
    # Each gather follows its receive directly, and the plain plan has none.
    by_id = {n.id: n for n in stage1.nodes}
    assert all(by_id[n.data_deps[0]].type == workload_pb2.COMM_RECV_NODE for n in gathers)
    assert not collectives(all_graphs(plain)[2], "all-gather")
    assert run(split).total_time_ps > 0
