"""Context parallelism with a mixture of experts (EP carved out of the DP x CP group, as Megatron-core folds CP into
its expert ranks) and hierarchical context parallelism (``cp_comm_type: a2a+p2p``: Ulysses within groups of
``cp_a2a`` CP ranks, a ring across them), and the plans refused."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.ring_attention import CP_TAG
from tests.workload_layer.test_context_parallel import LLAMA_LIKE, fused, simulated
from tests.workload_layer.transformer_helpers import GPT, all_graphs, build, collectives, gemm_flops

MOE = dict(GPT, experts=4, top_k=2)
"""The small GPT with four experts in every layer, two per token."""


def expert_gemm_tokens(graph: workload_pb2.ExecutionGraph) -> set[int]:
    """The token counts (M) of ``graph``'s forward expert GEMMs."""
    return {n.op.gemm.m for n in graph.nodes if n.op.HasField("gemm") and "expert" in n.name and "fwd" in n.name}


def test_cp_2_halves_the_tokens_of_the_expert_layers() -> None:
    # Each CP rank routes the micro-batch's seq_len / cp tokens: the dispatch and combine all-to-alls and the
    # expert GEMMs' tokens halve; the EP group (dp cp / ep = 2 groups of 2) spans the CP pair, CP fastest.
    plain = all_graphs(build(MOE, attention="fused", dp=4, ep=2, global_batch=4))
    split = all_graphs(fused(MOE, dp=2, cp=2, ep=2, global_batch=2))
    tokens, halved = expert_gemm_tokens(plain[0]), expert_gemm_tokens(split[0])
    assert tokens and {2 * m for m in halved} == tokens
    dispatch = {n.comm_bytes for n in collectives(plain[0], "moe dispatch")}
    assert {2 * b for n in collectives(split[0], "moe dispatch") for b in [n.comm_bytes]} == dispatch
    assert {tuple(n.group) for n in collectives(split[0], "moe dispatch")} == {(0, 1)}  # npu = cp + 2 dp


@pytest.mark.parametrize("plan", [dict(dp=4, ep=2), dict(dp=2, cp=2, ep=2), dict(dp=1, cp=4, ep=4)])
def test_model_flops_count_each_cp_ranks_routing(plan: dict[str, object]) -> None:
    # The graphs' GEMMs plus the fused attention core counted as Megatron does (4 b s^2 h forward, three passes):
    # each CP rank routes (and pads to capacity) its own tokens.
    workload = fused(MOE, global_batch=4, **plan)
    core = 4 * 3 * 4 * 128 * 128 * 256 * 4  # layers x passes x 4 b s^2 h x micro-batches in all
    assert gemm_flops(all_graphs(workload)) + core == workload.model_flops_per_iteration()


def test_ep_is_carved_out_of_dp_times_cp() -> None:
    # dp 2 x cp 2 = 4 ranks, ep 4: one EP group of the whole DP x CP group; no expert-data-parallel reduction.
    workload = fused(dict(MOE, experts=8), dp=2, cp=2, ep=4, global_batch=2)
    graph = all_graphs(workload)[0]
    assert {tuple(n.group) for n in collectives(graph, "moe dispatch")} == {(0, 1, 2, 3)}
    assert not collectives(graph, "dp expert")
    assert {tuple(n.group) for n in collectives(graph, "dp gradient")} == {(0, 1, 2, 3)}
    assert simulated(workload).total_time_ps > 0


def test_a_moe_study_with_cp_2_simulates() -> None:
    assert simulated(fused(MOE, dp=2, cp=2, ep=2, global_batch=4)).total_time_ps > 0


def cp_peers(graph: workload_pb2.ExecutionGraph) -> set[int]:
    """The peers of ring attention's sends in ``graph``."""
    return {n.peer for n in graph.nodes if n.type == workload_pb2.COMM_SEND_NODE and n.tag >= CP_TAG}


def test_hierarchical_cp_runs_ulysses_inside_and_the_ring_across() -> None:
    # cp 4 = 2 (a2a, consecutive CP ranks) x 2 (ring): NPU 0's all-to-alls are over (0, 1), its ring (0, 2); the
    # ring passes blocks of the inner group's tokens of 1 / 2 of the key-value heads: as many elements as a pure
    # ring's block (2 s / cp tokens x 1 head x d = 64, in bf16).
    model = dict(LLAMA_LIKE, heads=8, kv_heads=4)
    graph = all_graphs(fused(model, cp=4, cp_comm_type="a2a+p2p", cp_a2a=2, global_batch=1))[0]
    assert {tuple(n.group) for n in collectives(graph, "attention qkv")} == {(0, 1)}
    assert cp_peers(graph) == {2}
    blocks = {n.comm_bytes for n in graph.nodes if n.type == workload_pb2.COMM_SEND_NODE and n.tag >= CP_TAG}
    assert blocks == {2 * (128 // 4) * 2 * 64 * 2}


@pytest.mark.parametrize(("cp_a2a", "pure"), [(1, "p2p"), (4, "a2a")])
def test_hierarchical_cps_degenerate_cases_are_the_pure_ones_exactly(cp_a2a: int, pure: str) -> None:
    model = dict(LLAMA_LIKE, heads=8, kv_heads=4)
    plan = dict(dp=2, cp=4, global_batch=4)
    hierarchical = fused(model, **plan, cp_comm_type="a2a+p2p", cp_a2a=cp_a2a)
    alone = fused(model, **plan, cp_comm_type=pure)
    assert [g.SerializeToString() for g in all_graphs(hierarchical)] == [
        g.SerializeToString() for g in all_graphs(alone)
    ]
    assert simulated(hierarchical).total_time_ps == simulated(alone).total_time_ps


def test_hierarchical_cp_lies_between_its_degenerate_cases_in_messages() -> None:
    model, plan = dict(LLAMA_LIKE, heads=8, kv_heads=4), dict(cp=4, global_batch=1)
    runs = {a: simulated(fused(model, **plan, cp_comm_type="a2a+p2p", cp_a2a=a)) for a in (1, 2, 4)}
    assert all(result.total_time_ps > 0 for result in runs.values())


@pytest.mark.parametrize(
    ("model", "plan", "message"),
    [
        (
            dict(MOE, experts=8),
            dict(dp=2, cp=2, ep=8),
            "parallelism.dp * parallelism.cp (4) must be divisible by parallelism.ep (8): EP groups are carved out "
            "of the DP x CP group",
        ),
        (GPT, dict(cp=4, cp_a2a=2), "parallelism.cp_a2a (2) is the all-to-all size of hierarchical context"),
        (GPT, dict(cp=4, cp_comm_type="a2a+p2p"), "parallelism.cp_comm_type: a2a+p2p needs parallelism.cp_a2a"),
        (GPT, dict(cp=4, cp_comm_type="a2a+p2p", cp_a2a=3), "dividing parallelism.cp (4); got 3"),
        (
            LLAMA_LIKE,
            dict(cp=4, cp_comm_type="a2a+p2p", cp_a2a=4),
            "model.kv_heads (2) must be divisible by parallelism.tp * parallelism.cp_a2a (4) with cp_comm_type: "
            "a2a+p2p",
        ),
        (GPT, dict(cp=2, cp_comm_type="a2a+p2p", cp_a2a=0), "cp_a2a"),
    ],
)
def test_impossible_cp_moe_and_hierarchical_plans_name_the_keys(
    model: dict[str, object], plan: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        fused(model, **plan)


def test_a_bad_cp_a2a_is_one_clear_message(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    study = tmp_path / "study.yaml"
    study.write_text(
        "workload: {kind: transformer, model: {layers: 2, hidden: 64, heads: 4, seq_len: 128, vocab: 100},\n"
        "  attention: fused, parallelism: {cp: 4, cp_comm_type: a2a+p2p, cp_a2a: 3}}\n"
        "network: {topology: [{kind: ring, size: 4, bandwidth: 100GB/s, latency: 1us}]}\n"
        "compute: {device: h100}\n"
    )
    code, out, err = run_cli("run", str(study))
    assert code != 0 and "Traceback" not in err
    assert "parallelism.cp_a2a" in err and "dividing parallelism.cp (4); got 3" in err
