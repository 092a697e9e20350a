"""Mixture-of-experts layers and expert parallelism: capacity, all-to-all bytes, groups, parameters, FLOPs,
memory and simulation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stratasim.kernel.operator_shapes import shape_of
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.blocks import model_parameters
from stratasim.workload_layer.transformer.memory import layer_activations
from stratasim.workload_layer.transformer.moe import expert_capacity, expert_groups, routing
from tests.workload_layer.transformer_helpers import GPT, LLAMA_2_7B, all_graphs, build, collectives, gemm_flops, run

MOE = {**GPT, "experts": 4, "top_k": 2, "capacity_factor": 1.25}
MIXTRAL = {**LLAMA_2_7B, "seq_len": 32768, "ffn": 14336, "kv_heads": 8, "experts": 8, "top_k": 2}
S, H, F = 128, 256, 1024


def test_capacity_is_gshards() -> None:
    assert expert_capacity(128, 4, 2, 1.25) == 80  # ceil(1.25 * 2 * 128 / 4)
    assert expert_capacity(100, 8, 2, 1.1) == 28  # ceil(27.5)
    assert expert_capacity(80, 8, 1, 1.1) == 11  # exactly 11: no round-up from 1.1 not being binary
    assert expert_capacity(3, 64, 1, 1.0) == 1


def test_routing_without_and_with_sequence_parallelism() -> None:
    plain = routing(tokens=128, experts=4, top_k=2, capacity_factor=1.25, ep=2, tp_gather=1)
    assert (plain.routed_tokens, plain.capacity, plain.local_experts) == (128, 80, 2)
    assert (plain.expert_tokens, plain.dispatched_tokens) == ((2 * 80,) * 2, 4 * 80)
    split = routing(tokens=128, experts=4, top_k=2, capacity_factor=1.25, ep=2, tp_gather=2)
    assert (split.routed_tokens, split.capacity, split.expert_tokens, split.dispatched_tokens) == (
        64,
        40,
        (160,) * 2,
        160,
    )
    # Every rank's experts process ~capacity_factor * top_k * tokens slots, whatever ep is.
    for ep in (1, 2, 4):
        r = routing(tokens=128, experts=4, top_k=2, capacity_factor=1.25, ep=ep, tp_gather=1)
        assert r.slots == 320


def test_expert_groups_are_carved_out_of_the_data_parallel_group() -> None:
    assert expert_groups(5, ranks=8, ep=4) == ((4, 5, 6, 7), (1, 5))
    assert expert_groups(0, ranks=4, ep=1) == ((0,), (0, 1, 2, 3))
    assert expert_groups(3, ranks=4, ep=4) == ((0, 1, 2, 3), (3,))


def test_mixtral_parameter_count_matches_the_published_figure() -> None:
    # Per layer: attention 2 h^2 + 2 h * 1024, router h * 8, 8 SwiGLU experts 3 h ffn, two RMSNorms.
    h, f = 4096, 14336
    assert 32 * (2 * h * h + 2 * h * 1024 + 8 * h + 8 * 3 * h * f + 2 * h) + 2 * 32000 * h + h == 46_702_792_704
    assert model_parameters(build(MIXTRAL).config.model) == 46_702_792_704
    spread = build(MIXTRAL, dp=8, ep=8)
    assert spread.stage_parameters(0) == 46_702_792_704 - 32 * 7 * 3 * h * f  # one expert per layer and rank


def test_all_to_all_dispatch_and_combine_bytes() -> None:
    # T = 128 tokens, C = 80 slots per expert: each rank's buffer is E C h elements, bf16.
    workload = build(MOE, dp=2, ep=2)
    graph = all_graphs(workload)[1]
    layer = collectives(graph, "mb0 layer0 fwd")
    assert [n.name.removeprefix("mb0 layer0 fwd ") for n in layer] == [
        "moe dispatch all-to-all",
        "moe combine all-to-all",
    ]
    assert {(n.comm_type, n.comm_bytes, tuple(n.group), n.pg_name) for n in collectives(graph, "all-to-all")} == {
        (workload_pb2.ALL_TO_ALL, 4 * 80 * H * 2, (0, 1), "ep")
    }
    assert len(collectives(graph, "all-to-all")) == 4 * 4  # 4 layers, dispatch and combine, both passes
    experts = next(n for n in graph.nodes if n.name == "mb0 layer0 fwd expert up")
    assert list(shape_of(experts.op).dims()) == [2, 2 * 80, H, F]  # 2 local experts of ep C = 160 tokens each


def test_sequence_parallel_moe_routes_shards_and_gathers_the_dispatched_tokens_over_tp() -> None:
    workload = build(MOE, tp=2, dp=2, ep=2, sequence_parallel=True)
    graph = all_graphs(workload)[0]
    names = [(n.name.removeprefix("mb0 layer0 fwd "), n.comm_bytes) for n in collectives(graph, "mb0 layer0 fwd")]
    slots = 4 * 40  # C = ceil(1.25 * 2 * 64 / 4) = 40 per expert for the rank's 64 tokens
    assert names == [
        ("tp all-gather", S * H * 2),
        ("tp reduce-scatter", S * H * 2),  # attention
        ("moe dispatch all-to-all", slots * H * 2),
        ("tp all-gather", 2 * slots * H * 2),
        ("tp reduce-scatter", 2 * slots * H * 2),
        ("moe combine all-to-all", slots * H * 2),
    ]
    nodes = {n.name: n for n in graph.nodes}
    assert list(shape_of(nodes["mb0 layer0 fwd router"].op).dims()) == [64, H, 4]
    assert list(shape_of(nodes["mb0 layer0 fwd expert up"].op).dims()) == [2, 2 * 2 * 40, H, F // 2]


def test_moe_every_other_layer() -> None:
    graph = all_graphs(build({**MOE, "moe_every": 2}))[0]
    routers = {n.name for n in graph.nodes if n.name.endswith("fwd router")}
    assert routers == {"mb0 layer0 fwd router", "mb0 layer2 fwd router"}
    assert {n.name for n in graph.nodes if n.name.endswith("fwd mlp up")} == {
        "mb0 layer1 fwd mlp up",
        "mb0 layer3 fwd mlp up",
    }


def test_expert_gradients_reduce_over_the_ranks_holding_the_same_experts() -> None:
    workload = build(MOE, tp=2, dp=4, ep=2, sequence_parallel=True)
    graph = all_graphs(workload)[3]  # TP rank 1, DP rank 1
    dense, expert = collectives(graph, "dp gradient"), collectives(graph, "dp expert gradient")
    # Per TP rank and MoE layer: 2 local experts of (h F + F h) / 2 weights, F / 2 + h biases.
    expert_parameters = 4 * 2 * ((2 * H * F) // 2 + F // 2 + H)
    assert [(tuple(n.group), n.comm_bytes) for n in expert] == [((3, 7), 2 * expert_parameters)]
    assert [(tuple(n.group), n.comm_bytes) for n in dense] == [
        ((1, 3, 5, 7), 2 * (workload.stage_parameters(0) - expert_parameters))
    ]
    assert {tuple(n.group) for n in collectives(graph, "all-to-all")} == {(1, 3)}


def test_zero_shards_expert_states_over_the_expert_data_parallel_group() -> None:
    workload = build(MOE, dp=4, ep=2, zero=1)
    expert = 4 * 2 * (2 * H * F + F + H)
    dense = workload.stage_parameters(0) - expert
    assert workload.stage_memory(0).optimizer_bytes == 12 * (-(-dense // 4) + expert // 2)


@pytest.mark.parametrize(
    "plan",
    [
        dict(dp=2, ep=2),
        dict(tp=2, dp=2, ep=2, sequence_parallel=True, recompute="selective"),
        dict(tp=2, dp=2, global_batch=4),  # ep = 1, no sequence parallelism: the router runs on both TP ranks
        dict(tp=2, pp=2, dp=4, ep=4, sequence_parallel=True, recompute="full", global_batch=8),
    ],
)
def test_model_flops_are_the_gemm_flops_the_graphs_run(plan: dict[str, object]) -> None:
    workload = build({**MOE, "moe_every": 2}, **plan)
    assert gemm_flops(all_graphs(workload)) == workload.model_flops_per_iteration()


def test_moe_layer_activations_by_hand() -> None:
    # Replicated: 10 s b h and the router's probabilities 2 s b E; split: queries, keys, values and the
    # projection's input, 8 s b h; attention core 5 a s^2 b; per rank: 2 experts x 160 dispatched tokens, their
    # input (2 bytes x h) and GeLU's input and output (2 bytes x 2F).
    layer = layer_activations(build(MOE, dp=2, ep=2).config, moe=True)
    slots = 2 * 160
    expected = 10 * S * H + 2 * S * 4 + 8 * S * H + 5 * 4 * S * S + 2 * slots * H + 2 * slots * 2 * F
    assert (layer.kept_bytes, layer.recomputed_bytes) == (expected, 0)


@pytest.mark.parametrize(
    "plan",
    [
        dict(dp=4, ep=2, global_batch=8),
        dict(tp=2, pp=2, dp=2, ep=2, sequence_parallel=True, recompute="selective", global_batch=8),
        dict(dp=4, ep=2, zero=3, global_batch=8),
        dict(dp=4, ep=4, zero=2, dp_bucket="2000000B", global_batch=4),
    ],
)
def test_moe_plans_simulate_to_completion(plan: dict[str, object]) -> None:
    workload = build({**MOE, "moe_every": 2}, **plan)
    result = run(workload)
    assert result.npus == workload.npus_required() and result.total_time_ps > 0
    assert all(npu.compute_ps > 0 for npu in result.per_npu)


@pytest.mark.parametrize(
    ("model", "plan", "message"),
    [
        (dict(experts=6), dict(dp=4, ep=4), "model.experts (6) must be divisible by parallelism.ep (4)"),
        (dict(experts=4), dict(dp=2, ep=4), "parallelism.dp (2) must be divisible by parallelism.ep (4)"),
        (
            dict(experts=4),
            dict(tp=2, dp=2, ep=2),
            "parallelism.ep (2) with parallelism.tp (2) needs parallelism.sequence_parallel: true",
        ),
        ({}, dict(dp=2, ep=2), "parallelism.ep (2) needs a mixture of experts: set model.experts"),
        (dict(experts=2, top_k=3), {}, "model.top_k (3) must be at most model.experts (2)"),
        (dict(top_k=1), {}, "model.top_k applies to a mixture of experts only"),
        (dict(experts=4, capacity_factor=0), {}, "capacity_factor"),
    ],
)
def test_impossible_moe_plans_name_the_keys(model: dict[str, object], plan: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build({**GPT, **model}, **plan)
