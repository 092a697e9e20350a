"""Context parallelism (ring attention and DeepSpeed-Ulysses) and HSDP in the transformer builder: hand counts of
the ring's messages and Ulysses' all-to-alls, the DP x CP gradient group, activations divided by cp, HSDP's groups
and sizes, and the plans refused."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.transformer.ring_attention import CP_TAG
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.system_layer.helpers import RING, topology
from tests.workload_layer.transformer_helpers import DATASHEET_H100, GPT, all_graphs, build, collectives, gemm_flops

LLAMA_LIKE = dict(GPT, kv_heads=2, activation="swiglu", norm="rmsnorm", position_embedding="rope", bias=False)
"""The small GPT with grouped-query attention (4 heads in 2 key-value groups of d = 64) and LLaMA's options."""


def fused(model: dict[str, object] = GPT, **plan: object) -> TransformerWorkload:
    """``model`` under ``plan`` with the fused attention core ring attention runs on."""
    return build(model, attention="fused", **plan)


def simulated(workload: TransformerWorkload) -> SimulationResult:
    """Simulate on rings ``[tp, cp, pp, dp]`` (the default rank order with CP) of 100 GB/s and 1 us per hop."""
    plan = workload.config.parallelism
    dims = [(RING, size, 100 * 10**9, 1_000_000) for size in (plan.tp, plan.cp, plan.pp, plan.dp)]
    return simulate(
        all_graphs(workload),
        AnalyticalNetwork(),
        topology(*dims),
        SystemOptions(),
        compute=DATASHEET_H100,
        device="h100",
    )


def cp_messages(graph: workload_pb2.ExecutionGraph, kind: int) -> list[workload_pb2.Node]:
    """Ring attention's sends or receives in ``graph``."""
    return [n for n in graph.nodes if n.type == kind and n.tag >= CP_TAG]


def test_cp_1_and_hsdp_1_build_todays_graphs() -> None:
    plan = dict(tp=2, pp=2, dp=2, global_batch=4, zero=3)
    today, explicit = all_graphs(fused(**plan)), all_graphs(fused(**plan, cp=1, hsdp=1))
    assert [g.SerializeToString() for g in explicit] == [g.SerializeToString() for g in today]


@pytest.mark.parametrize("cp", [2, 4])
def test_ring_attention_passes_kv_blocks_by_hand(cp: int) -> None:
    # LLaMA-like, TP 2, b = 1, s = 128: a CP rank's block holds K and V of its s / cp tokens over kv_heads / tp = 1
    # key-value head of d = 64, in bf16: 2 * (128 / cp) * 1 * 64 * 2 bytes. Per layer and micro-batch: cp - 1
    # blocks forward, 2 (cp - 1) backward (the blocks again and their gradients).
    workload = fused(LLAMA_LIKE, tp=2, cp=cp, global_batch=2)
    graphs = all_graphs(workload)
    block = 2 * (128 // cp) * 1 * 64 * 2
    layers, micro_batches = 4, 2
    layout = workload.config.parallelism.layout
    for graph in graphs:
        sends = cp_messages(graph, workload_pb2.COMM_SEND_NODE)
        receives = cp_messages(graph, workload_pb2.COMM_RECV_NODE)
        assert len(sends) == len(receives) == layers * micro_batches * 3 * (cp - 1)
        assert {n.comm_bytes for n in sends + receives} == {block}
        assert sum("fwd" in n.name for n in sends) == layers * micro_batches * (cp - 1)
        ring = layout.group(graph.npu, "cp")
        position = ring.index(graph.npu)
        assert {n.peer for n in sends} == {ring[(position + 1) % cp]}
        assert {n.peer for n in receives} == {ring[position - 1]}
        assert {n.pg_name for n in sends} == {"cp"}


def test_ring_attention_kernels_overlap_the_transfers() -> None:
    # Forward, each later kernel waits for the previous kernel (or the merge of its statistics, from step 1 on) and
    # the block's send and receive; the send of the next block is issued as the block arrives, before that kernel.
    graph = all_graphs(fused(GPT, cp=4, global_batch=1))[0]
    by_id = {n.id: n for n in graph.nodes}
    kernels = [
        n
        for n in graph.nodes
        if "layer0 fwd attention" in n.name
        and "projection" not in n.name
        and " cp " not in n.name
        and n.type == workload_pb2.COMP_NODE
    ]
    assert [n.name.removeprefix("mb0 layer0 ") for n in kernels] == [
        "fwd attention",
        "fwd attention 1",
        "fwd attention 2",
        "fwd attention 3",
    ]
    for index, kernel in enumerate(kernels[1:]):
        waits = {by_id[d].name.removeprefix("mb0 layer0 ") for d in kernel.data_deps}
        assert waits == {
            f"fwd attention cp lse correction {index}" if index else "fwd attention",
            f"fwd attention cp send kv {index}",
            f"fwd attention cp recv kv {index}",
        }
    second_send = next(n for n in graph.nodes if n.name.endswith("fwd attention cp send kv 1"))
    assert [by_id[d].name.endswith("cp recv kv 0") for d in second_send.data_deps] == [True]


def merges(graph: workload_pb2.ExecutionGraph, what: str) -> list[workload_pb2.Node]:
    """Ring attention's merge nodes ``... cp <what> <i>`` of layer 0, micro-batch 0 in ``graph``, in order."""
    return [n for n in graph.nodes if n.name.startswith("mb0 layer0 ") and f" cp {what} " in n.name]


@pytest.mark.parametrize("cp", [2, 4])
def test_ring_attention_merges_by_hand(cp: int) -> None:
    # LLaMA-like, TP 2, b = 1, s = 128: n = b heads / tp = 2 query heads, chunks of c = 128 / (2 cp) tokens, d = 64,
    # a key-value block of 2 (128 / cp) * 1 * 64 elements. Forward (TE's AttnFuncWithCPAndKVP2P, rank 0's shapes):
    # after each later step the merge of the second chunk's statistics, n c fp32 elements, 6 FLOPs each, two read
    # and one written (cp - 1 of them); after the last kernel each step's output rescaled and added, 2 n c d
    # elements for step 0 and n c d for each later half block (cp of them, bf16, 2 FLOPs each, three tensors).
    # Backward, per step: the query gradient (copied over both chunks at step 0, 2 n c d; added over the second
    # chunk after, n c d) and the key-value gradients (the block's elements, copied then added).
    workload = fused(LLAMA_LIKE, tp=2, cp=cp, global_batch=2)
    n, c, d, block = 2, 128 // (2 * cp), 64, 2 * (128 // cp) * 64
    for graph in all_graphs(workload):
        lse = merges(graph, "lse correction")
        assert [m.name.removeprefix("mb0 layer0 ") for m in lse] == [
            f"fwd attention cp lse correction {i}" for i in range(1, cp)
        ]
        assert {(m.op.dtype, m.op.elementwise.elements, m.op.flops, m.op.bytes) for m in lse} == {
            (compute_pb2.FP32, n * c, 6 * n * c, 3 * 4 * n * c)
        }
        out = merges(graph, "out correction")
        assert [m.op.elementwise.elements for m in out] == [2 * n * c * d] + [n * c * d] * (cp - 1)
        assert {m.op.dtype for m in out} == {compute_pb2.BF16}
        assert {m.op.elementwise.function for m in out} == {compute_pb2.WEIGHTED_SUM}
        assert all(m.op.bytes == 3 * 2 * m.op.elementwise.elements for m in out)
        dq, dkv = merges(graph, "dq accumulate"), merges(graph, "dkv accumulate")
        assert [m.op.elementwise.elements for m in dq] == [2 * n * c * d] + [n * c * d] * (cp - 1)
        assert [m.op.elementwise.elements for m in dkv] == [block] * cp
        for first, *later in (dq, dkv):
            assert (first.op.elementwise.function, first.op.flops) == (compute_pb2.COPY, 0)
            assert {(m.op.elementwise.function, m.op.flops // m.op.elementwise.elements) for m in later} == (
                {(compute_pb2.ADD, 1)} if later else set()
            )


def test_ring_attention_sends_the_accumulated_key_value_gradients() -> None:
    # Backward, each step's kernel is followed by its query and key-value gradient accumulations; the key-value
    # gradients leave for the next rank once accumulated, and the last kernel's output waits for nothing more.
    graph = all_graphs(fused(GPT, cp=4, global_batch=1))[0]
    by_id = {n.id: n for n in graph.nodes}
    for index in range(1, 4):
        send = next(n for n in graph.nodes if n.name == f"mb0 layer0 bwd attention cp send dkv {index}")
        assert [by_id[d].name for d in send.data_deps] == [f"mb0 layer0 bwd attention cp dkv accumulate {index}"]
        dkv = by_id[send.data_deps[0]]
        assert [by_id[d].name for d in dkv.data_deps] == [f"mb0 layer0 bwd attention cp dq accumulate {index}"]
        dq = by_id[dkv.data_deps[0]]
        assert [by_id[d].name for d in dq.data_deps] == [f"mb0 layer0 bwd attention {index}"]


def test_cp_1_and_ulysses_run_no_ring_merges() -> None:
    for workload in (fused(LLAMA_LIKE, global_batch=2), fused(dict(LLAMA_LIKE, kv_heads=4), cp=2, cp_comm_type="a2a")):
        for graph in all_graphs(workload):
            assert not [n for n in graph.nodes if " cp " in n.name and n.type == workload_pb2.COMP_NODE]


@pytest.mark.parametrize("cp", [2, 4])
def test_all_gather_cp_by_hand(cp: int) -> None:
    # LLaMA-like, TP 2, b = 1, s = 128, bf16 (TE's cp_comm_type: all_gather). Per layer and micro-batch: forward the
    # all-gather of the whole sequence's keys and values for kv_heads / tp = 1 head of d = 64, 2 * 128 * 64 * 2
    # bytes, then rank 0's two causal kernels over n = 2 query heads: chunk 0's c = 128 / (2 cp) queries against
    # its c keys, chunk 2 cp - 1's against all 128; backward the all-gather again, the two kernels' backward passes
    # and the reduce-scatter of the key-value gradients, the same size. No ring messages, no merges.
    workload = fused(LLAMA_LIKE, tp=2, cp=cp, cp_comm_type="all_gather", global_batch=2)
    layers, micro_batches, c, size = 4, 2, 128 // (2 * cp), 2 * 128 * 64 * 2
    layout = workload.config.parallelism.layout
    for graph in all_graphs(workload):
        gathers, scatters = collectives(graph, "cp kv all-gather"), collectives(graph, "cp dkv reduce-scatter")
        assert len(gathers) == layers * micro_batches * 2 and len(scatters) == layers * micro_batches
        assert {(n.comm_type, n.comm_bytes, n.pg_name) for n in gathers} == {(workload_pb2.ALL_GATHER, size, "cp")}
        assert {(n.comm_type, n.comm_bytes) for n in scatters} == {(workload_pb2.REDUCE_SCATTER, size)}
        assert {tuple(n.group) for n in gathers + scatters} == {layout.group(graph.npu, "cp")}
        assert not cp_messages(graph, workload_pb2.COMM_SEND_NODE)
        assert not [n for n in graph.nodes if " cp " in n.name and n.type == workload_pb2.COMP_NODE]
        kernels = [n for n in graph.nodes if n.type == workload_pb2.COMP_NODE and n.op.HasField("attention")]
        assert {(n.op.attention.batch, n.op.attention.queries, n.op.attention.keys) for n in kernels} == {
            (2, c, c),
            (2, c, 128),
        }
        assert {n.op.attention.causal for n in kernels} == {True}
    ring = fused(LLAMA_LIKE, tp=2, cp=cp, global_batch=2)
    assert gemm_flops(all_graphs(workload)) == gemm_flops(all_graphs(ring))
    assert simulated(workload).total_time_ps > 0


@pytest.mark.parametrize("cp", [2, 4])
def test_ulysses_all_to_alls_by_hand(cp: int) -> None:
    # LLaMA-like with 4 heads and 4 key-value heads, TP 1, b = 1, s = 128, d = 64, bf16. Per layer and micro-batch
    # forward: the queries, keys and values of the rank's s / cp tokens for every head out, (4 + 2 * 4) * (128 /
    # cp) * 64 elements, then the kernel's output back, 4 * (128 / cp) * 64; backward the same two sizes again
    # (the output's gradient, then those of the queries, keys and values). No ring messages.
    model = dict(LLAMA_LIKE, kv_heads=4)
    workload = fused(model, cp=cp, cp_comm_type="a2a", global_batch=2)
    tokens, layers, micro_batches = 128 // cp, 4, 2
    qkv, out = (4 + 2 * 4) * tokens * 64 * 2, 4 * tokens * 64 * 2
    layout = workload.config.parallelism.layout
    for graph in all_graphs(workload):
        exchanges = collectives(graph, "all-to-all")
        assert len(exchanges) == layers * micro_batches * 4
        assert {n.comm_type for n in exchanges} == {workload_pb2.ALL_TO_ALL}
        assert {tuple(n.group) for n in exchanges} == {layout.group(graph.npu, "cp")}
        assert {n.pg_name for n in exchanges} == {"cp"}
        assert sorted({n.comm_bytes for n in exchanges}) == sorted({qkv, out})
        assert not cp_messages(graph, workload_pb2.COMM_SEND_NODE)
        kernels = [n for n in graph.nodes if n.type == workload_pb2.COMP_NODE and n.name.endswith("fwd attention")]
        assert kernels and {n.op.attention.batch for n in kernels} == {4 // cp}
        assert {(n.op.attention.queries, n.op.attention.keys) for n in kernels} == {(128, 128)}
    ring = all_graphs(fused(model, cp=cp, global_batch=2))
    assert gemm_flops(all_graphs(workload)) == gemm_flops(ring)
    assert workload.stage_memory(0) == fused(model, cp=cp, global_batch=2).stage_memory(0)
    assert simulated(workload).total_time_ps > 0


def test_everything_but_attention_runs_on_a_sequence_shard() -> None:
    # The GEMMs run on s / cp tokens on each of cp ranks: the same GEMM FLOPs over the iteration, a TP all-reduce
    # of s / cp tokens, and the model FLOPs count unchanged.
    plain, split = fused(GPT, tp=2, global_batch=2), fused(GPT, tp=2, cp=2, global_batch=2)
    assert gemm_flops(all_graphs(split)) == gemm_flops(all_graphs(plain))
    assert split.model_flops_per_iteration() == plain.model_flops_per_iteration()
    sizes = {n.comm_bytes for n in collectives(all_graphs(split)[0], "tp all-reduce")}
    assert sizes == {128 * 256 * 2 // 2}


def test_gradients_are_reduced_over_dp_times_cp() -> None:
    workload = fused(GPT, dp=2, cp=2, global_batch=2)  # order tp, cp, pp, dp: CP ranks adjacent, DP 2 apart
    reductions = collectives(all_graphs(workload)[0], "gradient all-reduce")
    assert [tuple(n.group) for n in reductions] == [(0, 1, 2, 3)]
    assert workload.npus_required() == 4


def test_cp_divides_the_activations() -> None:
    plan = dict(tp=2, pp=2, global_batch=4, sequence_parallel=True)
    whole, split = fused(LLAMA_LIKE, **plan).stage_memory(0), fused(LLAMA_LIKE, **plan, cp=4).stage_memory(0)
    assert split.activations_bytes * 4 == whole.activations_bytes
    assert split.weights_bytes == whole.weights_bytes
    for recompute in ("full", "selective"):
        full = fused(LLAMA_LIKE, **plan, recompute=recompute).stage_memory(0).activations_bytes
        assert fused(LLAMA_LIKE, **plan, cp=2, recompute=recompute).stage_memory(0).activations_bytes * 2 == full


def test_the_timeline_peaks_at_the_closed_form_memory_with_cp() -> None:
    workload = fused(LLAMA_LIKE, tp=2, pp=2, cp=2, global_batch=4)
    result = simulated(workload)
    assert [npu.peak_memory_bytes for npu in result.per_npu] == workload.memory_per_npu_bytes()


def test_cp_rank_order_follows_parallelism_order() -> None:
    default = fused(GPT, tp=2, cp=2, dp=2, global_batch=2).config.parallelism.layout
    assert default.order == ("tp", "cp", "pp", "dp")
    assert default.group(0, "cp") == (0, 2) and default.group(0, "dp") == (0, 4)
    listed = fused(GPT, tp=2, cp=2, dp=2, global_batch=2, order=["tp", "dp", "cp", "pp"]).config.parallelism.layout
    assert listed.group(0, "cp") == (0, 4) and listed.group(0, "dp") == (0, 2)


def test_hsdp_shards_within_groups_and_all_reduces_across_them() -> None:
    # dp = 4, hsdp = 2: ZeRO-3 over the shard groups {0, 1} and {2, 3}; each reduced shard (half a block's
    # gradients) all-reduced over the replica groups {0, 2} and {1, 3}.
    workload = fused(GPT, dp=4, zero=3, hsdp=2, global_batch=4)
    graphs = all_graphs(workload)
    layer = 12 * 256 * 256 + 13 * 256  # a GPT layer's parameters: 12 h^2 + 13 h
    for npu, shard, replicas in ((0, (0, 1), (0, 2)), (3, (2, 3), (1, 3))):
        gathers = collectives(graphs[npu], "layer0 fwd zero all-gather")
        scatters = collectives(graphs[npu], "layer0 bwd zero reduce-scatter")
        across = collectives(graphs[npu], "layer0 bwd hsdp all-reduce")
        assert {(tuple(n.group), n.comm_bytes) for n in gathers + scatters} == {(shard, layer * 2)}
        assert {(tuple(n.group), n.comm_bytes) for n in across} == {(replicas, layer)}
        assert len(across) == len(scatters) == 1
    plain = fused(GPT, dp=4, zero=3, global_batch=4)
    assert workload.stage_memory(0).weights_bytes == -(-plain.stage_parameters(0) // 2) * 2
    assert plain.stage_memory(0).weights_bytes == -(-plain.stage_parameters(0) // 4) * 2
    assert not collectives(all_graphs(plain)[0], "hsdp")
    assert simulated(workload).total_time_ps > 0


def test_hsdp_with_cp_shards_over_the_shard_groups_cp_ranks_too() -> None:
    workload = fused(GPT, dp=4, cp=2, zero=3, hsdp=2, global_batch=4)  # DP x CP group 0, 1, ..., 7
    graph = all_graphs(workload)[0]
    assert {tuple(n.group) for n in collectives(graph, "zero all-gather")} == {(0, 1, 2, 3)}
    assert {tuple(n.group) for n in collectives(graph, "hsdp all-reduce")} == {(0, 4)}


@pytest.mark.parametrize(
    ("model", "plan", "message"),
    [
        (GPT, dict(cp=3), "model.seq_len (128) must be divisible by 2 * parallelism.cp (6)"),
        (dict(GPT, seq_len=96), dict(cp=32), "model.seq_len (96) must be divisible by 2 * parallelism.cp (64)"),
        (GPT, dict(cp=2, attention="unfused"), "parallelism.cp (2) runs its attention over the fused kernel"),
        (
            LLAMA_LIKE,
            dict(tp=2, cp=2, cp_comm_type="a2a"),
            "model.kv_heads (2) must be divisible by parallelism.tp * parallelism.cp (4) with cp_comm_type: a2a",
        ),
        (GPT, dict(cp=2, cp_comm_type="ulysses"), "Input should be 'p2p', 'a2a', 'all_gather' or 'a2a+p2p'"),
        (GPT, dict(dp=4, hsdp=2), "parallelism.hsdp (2) shards with ZeRO-3"),
        (
            GPT,
            dict(dp=4, hsdp=3, zero=3, global_batch=12),
            "parallelism.dp (4) must be divisible by parallelism.hsdp (3)",
        ),
        (GPT, dict(order=["tp", "cp", "cp", "dp"]), "parallelism.order must list tp, pp and dp once each"),
    ],
)
def test_impossible_cp_and_hsdp_plans_name_the_keys(
    model: dict[str, object], plan: dict[str, object], message: str
) -> None:
    attention = str(plan.pop("attention", "fused"))
    with pytest.raises(ValidationError, match=re.escape(message)):
        build(model, attention=attention, **plan)


def test_a_cp_that_does_not_divide_the_sequence_is_one_clear_message(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    study = tmp_path / "study.yaml"
    study.write_text(
        "workload: {kind: transformer, model: {layers: 2, hidden: 64, heads: 2, seq_len: 100, vocab: 100},\n"
        "  parallelism: {cp: 4}}\n"
        "network: {topology: [{kind: ring, size: 4, bandwidth: 100GB/s, latency: 1us}]}\n"
        "compute: {device: h100}\n"
    )
    code, out, err = run_cli("run", str(study))
    assert code != 0 and "Traceback" not in err
    assert "model.seq_len (100) must be divisible by 2 * parallelism.cp (8)" in err


def test_an_unknown_cp_comm_type_is_one_clear_message(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    study = tmp_path / "study.yaml"
    study.write_text(
        "workload: {kind: transformer, model: {layers: 2, hidden: 64, heads: 2, seq_len: 128, vocab: 100},\n"
        "  attention: fused, parallelism: {cp: 2, cp_comm_type: allgather}}\n"
        "network: {topology: [{kind: ring, size: 2, bandwidth: 100GB/s, latency: 1us}]}\n"
        "compute: {device: h100}\n"
    )
    code, out, err = run_cli("run", str(study))
    assert code != 0 and "Traceback" not in err
    assert "workload.parallelism.cp_comm_type" in err and "all_gather" in err
