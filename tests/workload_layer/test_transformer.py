"""The Megatron-style transformer workload: shapes, FLOPs, groups, point-to-point matching and schedules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from pydantic import ValidationError

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel import registry
from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.pipeline_schedule import pipeline_order
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.system_layer.helpers import RING, topology
from tests.workload_layer.transformer_helpers import messages, unrolled_graphs

MODEL = dict(layers=4, hidden=256, heads=4, seq_len=128, vocab=1000)
L, H, A, S, V = 4, 256, 4, 128, 1000


def transformer(model: dict[str, object] | None = None, **plan: object) -> TransformerWorkload:
    """The unfused attention core these hand counts are of (its scores and context GEMMs)."""
    config = {"model": model or MODEL, "parallelism": plan, "attention": "unfused"}
    return TransformerWorkload(TransformerWorkload.Config.model_validate(config))


def gemm_flops(graph: workload_pb2.ExecutionGraph) -> int:
    return sum(n.op.flops for n in graph.nodes if n.type == workload_pb2.COMP_NODE and n.op.HasField("gemm"))


def kinds(graph: workload_pb2.ExecutionGraph) -> Counter[int]:
    return Counter(n.type for n in graph.nodes)


def run(workload: TransformerWorkload, bandwidth: int = 100 * 10**9, latency_ps: int = 1_000_000) -> SimulationResult:
    """Simulate on rings [tp, pp, dp] of ``bandwidth`` bytes/s and ``latency_ps`` per hop, priced on an H100."""
    plan = workload.config.parallelism
    dims = [(RING, size, bandwidth, latency_ps) for size in (plan.tp, plan.pp, plan.dp)]
    graphs = unrolled_graphs(workload.graphs(workload.npus_required()))
    return simulate(
        graphs, AnalyticalNetwork(), topology(*dims), SystemOptions(), compute=RooflineCompute(), device="h100"
    )


def layer_forward_flops(tokens: int, tp: int) -> int:
    # QKV, scores, context, projection, two MLP GEMMs of one layer on one TP rank (ffn = 4h).
    return (
        2 * tokens * H * 3 * H
        + 2 * S * S * H * tokens // S
        + 2 * S * S * H * tokens // S
        + 2 * tokens * H * H
        + 2 * 2 * tokens * H * 4 * H
    ) // tp


def test_node_counts_and_flops_per_npu_match_hand_counts() -> None:
    workload = transformer(tp=2, pp=2, dp=2, global_batch=4)  # m = 2 micro-batches of 1 sequence
    graphs = unrolled_graphs(workload.graphs(8))
    assert workload.micro_batches == 2 and len(graphs) == 8
    # Per micro-batch and layer: 6 GEMMs + 5 pointwise forward, 12 GEMMs + 5 pointwise backward, 2 + 2 TP
    # all-reduces. Stage 0 adds the embedding (1 + 1 compute, 1 all-reduce); stage 1 the head (3 + 4 compute,
    # 1 all-reduce). Plus one DP all-reduce, one send and one receive per micro-batch, and the optimizer step.
    first, last = kinds(graphs[0]), kinds(graphs[2])
    assert (
        first[workload_pb2.COMP_NODE] == 2 * (2 * 28 + 2) + 1 and last[workload_pb2.COMP_NODE] == 2 * (2 * 28 + 7) + 1
    )
    assert first[workload_pb2.COMM_COLL_NODE] == last[workload_pb2.COMM_COLL_NODE] == 2 * 9 + 1
    for counts in (first, last):
        assert counts[workload_pb2.COMM_SEND_NODE] == counts[workload_pb2.COMM_RECV_NODE] == 2
    layer = layer_forward_flops(S, 2)
    head = 2 * S * H * V // 2
    assert gemm_flops(graphs[0]) == 2 * 2 * 3 * layer
    assert gemm_flops(graphs[2]) == 2 * (2 * 3 * layer + 3 * head)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_all_gemm_flops_are_three_or_four_forward_passes(recompute: str) -> None:
    workload = transformer(tp=2, pp=2, dp=2, micro_batch=2, global_batch=8, recompute=recompute)
    total = sum(gemm_flops(g) for g in unrolled_graphs(workload.graphs(8)))
    tokens = 8 * S
    passes = 4 if recompute == "full" else 3
    # The LM head is not recomputed (as in Narayanan et al.'s formula).
    assert total == passes * L * layer_forward_flops(tokens, 1) + 3 * 2 * tokens * H * V
    assert total == workload.model_flops_per_iteration()
    assert workload.samples_per_iteration() == 8


@pytest.mark.parametrize(
    ("recompute", "formula"),
    [
        ("none", lambda b: 72 * b * S * L * H**2 * (1 + S / (6 * H) + V / (12 * L * H))),
        ("full", lambda b: 96 * b * S * L * H**2 * (1 + S / (6 * H) + V / (16 * L * H))),
    ],
)
def test_model_flops_follow_narayanan_et_al(recompute: str, formula: object) -> None:
    workload = transformer(dp=2, global_batch=6, recompute=recompute)
    assert callable(formula)
    assert workload.model_flops_per_iteration() == pytest.approx(formula(6), rel=1e-12)


def test_groups_tp_contiguous_dp_strided_pp_neighbours() -> None:
    graphs = unrolled_graphs(transformer(tp=2, pp=2, dp=2, global_batch=2).graphs(8))
    npu = 5  # tp_rank 1, pp_rank 0, dp_rank 1
    groups = {tuple(n.group) for n in graphs[npu].nodes if n.type == workload_pb2.COMM_COLL_NODE}
    assert groups == {(4, 5), (1, 5)}
    assert {
        n.peer for n in graphs[npu].nodes if n.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE)
    } == {7}
    dp = [n for n in graphs[npu].nodes if n.name == "dp gradient all-reduce"]
    assert len(dp) == 1 and dp[0].comm_bytes == 2 * transformer(tp=2, pp=2, dp=2).stage_parameters(0)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_every_send_has_one_matching_receive(schedule: str) -> None:
    graphs = unrolled_graphs(transformer(tp=2, pp=4, dp=1, global_batch=8, schedule=schedule).graphs(8))
    sends = messages(graphs, workload_pb2.COMM_SEND_NODE)
    assert sends == messages(graphs, workload_pb2.COMM_RECV_NODE)
    assert set(sends.values()) == {1} and len(sends) == 2 * 3 * 8 * 2  # tp ranks, boundaries, micro-batches, ways


def test_pipeline_orders() -> None:
    def passes(order: Sequence[tuple[str, int, int]]) -> list[tuple[str, int]]:
        assert {chunk for _, chunk, _ in order} == {0}
        return [(direction, micro_batch) for direction, _, micro_batch in order]

    assert passes(pipeline_order("gpipe", 0, 2, 2)) == [
        ("forward", 0),
        ("forward", 1),
        ("backward", 0),
        ("backward", 1),
    ]
    assert passes(pipeline_order("1f1b", 0, 4, 5)) == [
        ("forward", 0),
        ("forward", 1),
        ("forward", 2),
        ("forward", 3),
        ("backward", 0),
        ("forward", 4),
        ("backward", 1),
        ("backward", 2),
        ("backward", 3),
        ("backward", 4),
    ]
    assert passes(pipeline_order("1f1b", 3, 4, 2)) == [("forward", 0), ("backward", 0), ("forward", 1), ("backward", 1)]
    assert passes(pipeline_order("1f1b", 0, 4, 2))[:2] == [("forward", 0), ("forward", 1)]  # warm-up capped at m


def test_simulates_3d_parallelism_without_deadlock() -> None:
    result = run(transformer(tp=2, pp=2, dp=2, global_batch=8, recompute="full"))
    assert result.npus == 8 and result.total_time_ps > 0
    assert all(npu.compute_ps > 0 for npu in result.per_npu)


def test_1f1b_matches_gpipe_when_transfers_are_cheap() -> None:
    # pp = 4, m = 8. Both schedules idle for the same bubble, (pp - 1) forward and backward passes, so with
    # negligible point-to-point transfers their iteration times are equal; 1F1B's gain is memory (at most pp
    # micro-batches' activations live instead of m), not time.
    gpipe = run(transformer(pp=4, global_batch=8, schedule="gpipe"), bandwidth=10**13, latency_ps=10_000)
    one_f_one_b = run(transformer(pp=4, global_batch=8, schedule="1f1b"), bandwidth=10**13, latency_ps=10_000)
    assert [n.compute_ps for n in gpipe.per_npu] == [n.compute_ps for n in one_f_one_b.per_npu]
    assert one_f_one_b.total_time_ps <= gpipe.total_time_ps


def test_1f1b_exposes_slow_transfers_that_gpipe_hides() -> None:
    # In 1F1B's steady state stage i's next forward waits for stage i+1's backward gradient and then stage i+1
    # waits for that forward's activation: up to two transfers per micro-batch sit on the critical path, while
    # GPipe streams its forwards (and backwards) and hides them. So 1F1B is slower, by at most 2 m transfers.
    m, transfer_ps = 8, 1_000_000 + S * H * 2 * 10**12 // (100 * 10**9)
    gpipe = run(transformer(pp=4, global_batch=m, schedule="gpipe"))
    one_f_one_b = run(transformer(pp=4, global_batch=m, schedule="1f1b"))
    assert gpipe.total_time_ps < one_f_one_b.total_time_ps <= gpipe.total_time_ps + 2 * m * transfer_ps


def test_tensor_parallelism_cuts_compute_per_npu() -> None:
    one = run(transformer(tp=1, global_batch=2))
    two = run(transformer(tp=2, global_batch=2))
    assert max(n.compute_ps for n in two.per_npu) < max(n.compute_ps for n in one.per_npu)


@pytest.mark.parametrize(
    ("plan", "model", "field"),
    [
        (dict(pp=3), {}, "model.layers (4) must be divisible by parallelism.pp (3)"),
        (dict(tp=8), {}, "model.heads (4) must be divisible by parallelism.tp (8)"),
        (dict(tp=2), dict(ffn=1001), "model.ffn (1001) must be divisible by parallelism.tp (2)"),
        (dict(dp=2, micro_batch=2, global_batch=6), {}, "parallelism.global_batch (6) must be divisible"),
        (dict(schedule="zero-bubble"), {}, "schedule"),
        (dict(recompute="partial"), {}, "recompute"),
        (dict(tp=0), {}, "tp"),
    ],
)
def test_bad_plans_name_the_field(plan: dict[str, object], model: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=field.replace("(", r"\(").replace(")", r"\)")):
        transformer({**MODEL, **model}, **plan)


def test_bad_precision_and_wrong_npu_count() -> None:
    with pytest.raises(ValidationError, match="precision"):
        TransformerWorkload.Config.model_validate({"model": MODEL, "precision": "fp4"})
    with pytest.raises(WorkloadError, match="needs exactly tp \\* pp \\* dp = 4 NPUs"):
        unrolled_graphs(transformer(tp=2, pp=2).graphs(8))


def test_registered_through_the_registry() -> None:
    factory = registry.load("workload", "transformer", extra={"transformer": TransformerWorkload})
    workload = factory(transformer(tp=2, pp=2, dp=2).config)
    assert workload.npus_required() == 8 and workload.name == "transformer"


def test_the_design_documents_gpt3_plan_validates() -> None:
    config = TransformerWorkload.Config.model_validate(
        {
            "model": {"layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048, "vocab": 51200},
            "parallelism": {
                "tp": 8,
                "pp": 16,
                "dp": 8,
                "schedule": "1f1b",
                "micro_batch": 1,
                "global_batch": 1536,
                "recompute": "full",
                "zero": 0,
                "sequence_parallel": False,
            },
            "precision": "bf16",
        }
    )
    workload = TransformerWorkload(config)
    assert workload.npus_required() == 1024 and workload.micro_batches == 192
    with pytest.raises(ValidationError, match="sequence_parallel"):
        TransformerWorkload.Config.model_validate({"model": MODEL, "parallelism": {"sequence_parallel": True}})
