"""The transformer inference (serving) workload: validation, graph structure, KV cache, pipelining, figures."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.config.study_file import load_study
from stratasim.kernel import registry
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.graph_blocks import unrolled
from stratasim.kernel.grid import Grid
from stratasim.kernel.operator_shapes import shape_of
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.study.run import check_study
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.inference.batch_graph import message_tag, milestone_name
from stratasim.workload_layer.inference.workload import TransformerInferenceWorkload
from tests.system_layer.helpers import RING, topology

LLAMA = dict(bias=False, norm="rmsnorm", position_embedding="rope", tie_embeddings=False)
"""LLaMA's options: no biases, RMSNorm, rotary positions, untied embeddings."""
MODEL = dict(layers=4, hidden=64, heads=4, seq_len=64, vocab=100, **LLAMA)
TINY = dict(layers=1, hidden=8, heads=2, seq_len=16, vocab=16)  # head size 4, ffn 32
LLAMA_7B_LIKE = dict(layers=32, hidden=4096, heads=32, seq_len=4096, vocab=32000, **LLAMA)  # ffn 4h: 6.7B
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inference.yaml"

# A device on which every operator takes exactly its bytes in picoseconds (1 byte/ps, compute free).
BANDWIDTH_ONLY = Device(
    name="bandwidth",
    peak_flops={compute_pb2.BF16: 1e30},
    memory_bandwidth=1e12,
    memory_capacity=2**40,
    tdp_w=0,
    source="test: a pure-bandwidth roofline",
)


def inference(
    model: dict[str, object] | None = None, serving: dict[str, object] | None = None, **sections: object
) -> TransformerInferenceWorkload:
    """The workload on ``model`` (default MODEL) serving 4 requests of 8 prompt tokens, 3 generated, its attention
    unfused (the closed forms below count its GEMMs), unless told."""
    requests = {"batch": 4, "prompt_len": 8, "generate": 3, **(serving or {})}
    data = {"model": model or MODEL, "serving": requests, "attention": "unfused", **sections}
    return TransformerInferenceWorkload(TransformerInferenceWorkload.Config.model_validate(data))


def run(
    workload: TransformerInferenceWorkload,
    compute: RooflineCompute | None = None,
    device: str = "h100",
    representatives: Sequence[int] | None = None,
) -> SimulationResult:
    """Simulate on rings [tp, pp] of 100 GB/s and 1 us per hop."""
    plan = workload.config.parallelism
    dims = [(RING, size, 100 * 10**9, 1_000_000) for size in (plan.tp, plan.pp)]
    graphs = workload.graphs(workload.npus_required())
    return simulate(
        graphs,
        AnalyticalNetwork(),
        topology(*dims),
        SystemOptions(),
        compute=compute or RooflineCompute(),
        device=device,
        representatives=representatives,
    )


def nodes(graph: workload_pb2.ExecutionGraph, suffix: str) -> list[workload_pb2.Node]:
    return [n for n in graph.nodes if n.name.endswith(suffix)]


# --- validation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "sections", "message"),
    [
        (
            dict(heads=12, hidden=96),
            {"parallelism": {"tp": 8}},
            "workload.model.heads (12) must be divisible by workload.parallelism.tp (8)",
        ),
        (
            dict(ffn=102),
            {"parallelism": {"tp": 4}},
            "workload.model.ffn (102) must be divisible by workload.parallelism.tp (4)",
        ),
        (
            {},
            {"parallelism": {"pp": 3}, "serving": {"micro_batches": 1}},
            "workload.model.layers (4) must be divisible by workload.parallelism.pp (3)",
        ),
        (
            {},
            {"serving": {"batch": 6, "micro_batches": 4}},
            "workload.serving.batch (6) must be divisible by workload.serving.micro_batches (4)",
        ),
        (
            {},
            {"serving": {"batch": 1}, "parallelism": {"pp": 2}},
            "workload.serving.batch (1) must be divisible by workload.serving.micro_batches (2, by default "
            "workload.parallelism.pp)",
        ),
        (
            {},
            {"serving": {"prompt_len": 60, "generate": 5}},
            "workload.serving.prompt_len + generate (60 + 5) must not exceed workload.model.seq_len (64)",
        ),
    ],
)
def test_each_inconsistency_is_one_message_naming_the_keys(
    model: dict[str, object], sections: dict[str, dict[str, object]], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        inference({**MODEL, **model}, **sections)
    errors = caught.value.errors()
    assert len(errors) == 1 and message in errors[0]["msg"] and ";" not in errors[0]["msg"]


def test_kv_heads_must_split_over_tp() -> None:
    with pytest.raises(
        ValidationError, match=re.escape("workload.model.kv_heads (2) must be divisible by workload.parallelism.tp (4)")
    ):
        inference({**MODEL, "kv_heads": 2}, parallelism={"tp": 4})


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        inference({**MODEL, "heads": 8, "hidden": 64}, parallelism={"tp": 3, "pp": 3})
    message = caught.value.errors()[0]["msg"]
    assert "model.heads (8)" in message and "model.layers (4)" in message and "model.ffn (256)" in message


@pytest.mark.parametrize(
    ("sections", "field"),
    [
        ({"serving": {"generate": 0}}, "generate"),
        ({"serving": {"batch": 0}}, "batch"),
        ({"parallelism": {"tp": 0}}, "tp"),
        ({"parallelism": {"dp": 2}}, "dp"),
        ({"precision": "fp4"}, "precision"),
    ],
)
def test_bad_values_name_the_field(sections: dict[str, dict[str, object]], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        inference(**sections)


def test_wrong_npu_count_and_registry() -> None:
    with pytest.raises(WorkloadError, match=re.escape("needs exactly tp * pp = 4 NPUs, got 8")):
        inference(parallelism={"tp": 2, "pp": 2}).graphs(8)
    factory = registry.load("workload", "transformer_inference")
    workload = factory(inference(parallelism={"tp": 2, "pp": 2}).config)
    assert workload.name == "transformer_inference" and workload.npus_required() == 4


# --- graph structure --------------------------------------------------------------------------------------------


def test_prefill_then_decode_steps_in_order() -> None:
    graph = unrolled(inference(serving={"generate": 4}).graphs(1)[0])
    phases = [re.match(r"mb0 (prefill|decode \d+) ", n.name) for n in graph.nodes if not n.milestone]
    assert list(dict.fromkeys(match[1] for match in phases if match)) == ["prefill", "decode 1", "decode 2", "decode 3"]
    assert all(phases)
    # Per pass: embedding (1 compute), 4 layers of 12 compute nodes, the head (3 compute); no TP collectives.
    assert Counter(n.type for n in graph.nodes) == {workload_pb2.COMP_NODE: 4 * (1 + 4 * 12 + 3)}
    assert [n.name for n in graph.nodes if n.milestone] == ["first token", "token 2", "token 3", "token 4"]
    assert all(list(n.data_deps) == [before.id] for before, n in zip(graph.nodes, graph.nodes[1:]))  # one chain


def test_kv_cache_grows_as_it_is_written() -> None:
    # b = 4 requests, h = 64, heads 4 -> d = 16, tp 2 -> 2 heads per rank; bf16.
    workload = inference(serving={"generate": 5}, parallelism={"tp": 2})
    graph = unrolled(workload.graphs(2)[0])
    appends = nodes(graph, "kv append")
    per_token = 2 * 2 * 16 * 2  # K and V, heads per rank, head size, bytes
    assert [n.memory_bytes for n in appends] == [4 * 8 * per_token] * 4 + [4 * per_token] * 16
    assert sum(n.memory_bytes for n in graph.nodes) == 4 * per_token * 4 * (8 + 5 - 1)
    # Decode step k reads a KV cache of 8 + k positions: the score GEMM's bytes grow by one key (and one score)
    # per head and request each step, and include the whole cache read.
    scores = [n.op for n in nodes(graph, "layer0 attention scores")]
    assert [shape_of(op).dims()[-1] for op in scores] == [8, 9, 10, 11, 12]
    assert [b.bytes - a.bytes for a, b in zip(scores[1:], scores[2:])] == [4 * 2 * (16 + 1) * 2] * 3
    assert all(op.bytes > 4 * 2 * (8 + k) * 16 * 2 for k, op in enumerate(scores))


def test_tp_all_reduces_carry_the_micro_batch_tokens() -> None:
    workload = inference(serving={"batch": 4, "micro_batches": 2, "generate": 2}, parallelism={"tp": 2, "pp": 2})
    for npu in (0, 2):
        graph = unrolled(workload.graphs(4)[npu])
        reduces = [
            n for n in graph.nodes if n.comm_type == workload_pb2.ALL_REDUCE and n.type == workload_pb2.COMM_COLL_NODE
        ]
        assert {n.pg_name for n in reduces} == {"tp"} and {tuple(n.group) for n in reduces} == {(npu, npu + 1)}
        prefill = {n.comm_bytes for n in reduces if "prefill" in n.name}
        decode = {n.comm_bytes for n in reduces if "decode" in n.name}
        assert prefill == {2 * 8 * 64 * 2} and decode == {2 * 1 * 64 * 2}  # requests * tokens * hidden * bytes
    gathers = [n for n in workload.graphs(4)[2].nodes if n.comm_type == workload_pb2.ALL_GATHER]
    assert len(gathers) == 2 * 2 and {n.comm_bytes for n in gathers} == {2 * 100 * 2}


def test_a_parallel_block_all_reduces_once_per_layer() -> None:
    def all_reduces(model: dict[str, object]) -> int:
        graph = unrolled(inference(model, parallelism={"tp": 2}).graphs(2)[0])
        return sum(
            n.comm_type == workload_pb2.ALL_REDUCE and n.type == workload_pb2.COMM_COLL_NODE for n in graph.nodes
        )

    # Prefill and two decode passes of 4 layers: two all-reduces a layer, or one in PaLM's parallel block, and
    # the embedding's vocabulary-parallel one per pass.
    passes, layers = 3, 4
    assert all_reduces(MODEL) == passes * (2 * layers + 1)
    assert all_reduces({**MODEL, "parallel_block": True}) == passes * (layers + 1)


def test_resident_weights_match_a_hand_count() -> None:
    # Per layer and TP rank (h = 64, tp 2): QKV 64 * 96 + projection 32 * 64 + MLP 2 * 64 * 128 + layernorms
    # 128 = 6144 + 2048 + 16384 + 128 = 24704; two layers per stage. Vocabulary shard 50 * 64 = 3200 on the first
    # stage (embedding) and the last (LM head, untied), plus the final layernorm 64.
    graphs = inference(parallelism={"tp": 2, "pp": 2}).graphs(4)
    stage0, stage1 = 2 * 24704 + 3200, 2 * 24704 + 3200 + 64
    assert [dict(g.resident_bytes) for g in graphs] == [{"weights": 2 * w} for w in (stage0, stage0, stage1, stage1)]


def messages(graphs: Sequence[workload_pb2.ExecutionGraph], kind: int) -> Counter[tuple[int, int, int, int]]:
    """(sender, receiver, tag, bytes) of every send or receive."""
    found: Counter[tuple[int, int, int, int]] = Counter()
    for graph in graphs:
        for n in graph.nodes:
            if n.type == kind:
                assert n.pg_name == "pp"
                ends = (graph.npu, n.peer) if kind == workload_pb2.COMM_SEND_NODE else (n.peer, graph.npu)
                found[(*ends, n.tag, n.comm_bytes)] += 1
    return found


def test_pipeline_sends_activations_forward_and_tokens_back() -> None:
    m, g = 4, 3
    workload = inference(
        {**MODEL, "layers": 6}, serving={"batch": 8, "micro_batches": m, "generate": g}, parallelism={"tp": 2, "pp": 3}
    )
    graphs = workload.graphs(6)
    sends = messages(graphs, workload_pb2.COMM_SEND_NODE)
    assert sends == messages(graphs, workload_pb2.COMM_RECV_NODE) and set(sends.values()) == {1}
    activations = [key for key in sends if key[2] % 2 == 0]
    tokens = [key for key in sends if key[2] % 2 == 1]
    assert len(activations) == 2 * 2 * m * g  # TP ranks, stage boundaries, micro-batches, steps
    assert sorted({(src, dst) for src, dst, _, _ in tokens}) == [(4, 0), (5, 1)]
    assert len(tokens) == 2 * m * (g - 1) and {size for *_, size in tokens} == {2 * 4}  # 2 requests, int32 ids
    assert {size for *_, tag, size in activations if tag < 2 * m} == {2 * 8 * 64 * 2}  # prefill: the prompts
    assert message_tag("token", 1, 2, m) == 2 * (1 * m + 2) + 1


def test_first_stage_waits_for_the_token_before_the_next_decode_step() -> None:
    graph = inference(serving={"generate": 2}, parallelism={"pp": 2}).graphs(2)[0]
    by_id = {n.id: n for n in graph.nodes}
    embedding = nodes(graph, "mb0 decode 1 embedding")[0]
    received = by_id[embedding.data_deps[0]]
    assert received.type == workload_pb2.COMM_RECV_NODE and received.peer == 1
    assert received.tag == message_tag("token", 0, 0, 2)


def translated(graph: workload_pb2.ExecutionGraph, offset: int, tp: int) -> workload_pb2.ExecutionGraph:
    """``graph`` with every NPU id moved ``offset`` along the TP dimension (wrapping within the TP group)."""
    moved = workload_pb2.ExecutionGraph()
    moved.CopyFrom(graph)
    moved.npu += offset
    for n in moved.nodes:
        if n.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
            n.peer += offset
        shifted = sorted(m - m % tp + (m % tp + offset) % tp for m in n.group)
        del n.group[:]
        n.group.extend(shifted)
    return moved


def test_tp_ranks_run_their_representatives_graph_translated() -> None:
    workload = inference(parallelism={"tp": 4, "pp": 2})
    graphs = workload.graphs(8)
    representatives = workload.representatives(Grid((4, 2)))
    assert representatives == (0, 0, 0, 0, 4, 4, 4, 4)
    assert workload.representatives(Grid((2, 4))) is None  # TP groups would straddle two lines
    assert representatives is not None
    for npu, rep in enumerate(representatives):
        assert graphs[npu] == translated(graphs[rep], npu - rep, 4)


# --- simulated figures ------------------------------------------------------------------------------------------


def test_closed_form_on_a_pure_bandwidth_device() -> None:
    # One NPU, every operator costs its bytes in ps, so each milestone is a sum of operator bytes (bf16: 2 bytes
    # per element). TINY, batch 1, prompt 4: t = 4, h = 8, d = 4, 2 heads, ffn 32, vocab 16. Elements moved:
    prefill = (
        64  # embedding: a copy of (4, 8), read and written
        + 64
        + 320
        + 128  # layernorm (4, 8) read+write; QKV [4,8]x[8,24]; KV append (2, 4, 8) read+write
        + 96
        + 64
        + 96  # scores 2 x ([4,4]x[4,4]); softmax (2, 4, 4); context 2 x ([4,4]x[4,4])
        + 128
        + 96  # projection [4,8]x[8,8]; residual layernorm: two inputs, one output
        + 416
        + 256
        + 416
        + 96  # MLP up [4,8]x[8,32]; GeLU (4, 32); MLP down; residual
        + 16
        + 152
        + 32  # final layernorm (1, 8); LM head [1,8]x[8,16]; sampler (1, 16)
    )
    decode_1 = (  # one token attending to 5 positions
        16 + 16 + 224 + 32 + 58 + 20 + 58 + 80 + 24 + 296 + 64 + 296 + 24 + 16 + 152 + 32
    )
    per_position = 2 * 8 + 4 * 2  # a key and a value (2 h), a score written, read, written and read (4 heads)
    workload = inference(TINY, serving={"batch": 1, "prompt_len": 4, "generate": 3})
    result = run(workload, RooflineCompute([BANDWIDTH_ONLY]), "bandwidth")
    step_1, step_2 = 2 * decode_1, 2 * (decode_1 + per_position)
    assert result.milestones == {
        "first token": 2 * prefill,
        "token 2": 2 * prefill + step_1,
        "token 3": 2 * prefill + step_1 + step_2,
    }
    assert result.total_time_ps == 2 * prefill + step_1 + step_2
    figures = workload.serving_figures(result.milestones, result.total_time_ps)
    assert figures == {
        "ttft_ps": 2 * prefill,
        "tpot_ps": (step_1 + step_2) / 2,
        "tokens_per_second": pytest.approx(3 / (result.total_time_ps * 1e-12), rel=1e-12),
        "batch": 1.0,
        "prompt_len": 4.0,
        "generate": 3.0,
    }


def test_decode_steps_slow_down_as_the_kv_cache_grows() -> None:
    workload = inference(serving={"batch": 2, "prompt_len": 8, "generate": 6})
    result = run(workload, RooflineCompute([BANDWIDTH_ONLY]), "bandwidth")
    times = [result.milestones[milestone_name(step)] for step in range(6)]
    steps = [b - a for a, b in zip(times, times[1:])]
    # Each position more costs, per layer, a key and a value (2 h elements) and 4 score elements per head.
    assert [b - a for a, b in zip(steps, steps[1:])] == [4 * 2 * 2 * (2 * 64 + 4 * 4)] * 4
    assert times[0] < result.total_time_ps == times[-1]


def test_a_pipeline_runs_without_deadlock() -> None:
    workload = inference(serving={"batch": 4, "generate": 4}, parallelism={"tp": 2, "pp": 2})
    result = run(workload)
    assert result.npus == 4 and set(result.milestones) == {"first token", "token 2", "token 3", "token 4"}
    figures = workload.serving_figures(result.milestones, result.total_time_ps)
    assert 0 < figures["ttft_ps"] < result.total_time_ps and figures["tpot_ps"] > 0
    assert figures["tokens_per_second"] == pytest.approx(4 * 4 / (result.total_time_ps * 1e-12))


def test_simulating_the_representatives_gives_the_same_figures() -> None:
    workload = inference(serving={"batch": 4, "generate": 3}, parallelism={"tp": 2, "pp": 2})
    everyone = run(workload)
    representatives = workload.representatives(Grid((2, 2)))
    assert representatives == (0, 0, 2, 2)
    stand_ins = run(workload, representatives=representatives)
    assert stand_ins.simulated_npus == 2 and everyone.simulated_npus == 4
    assert (stand_ins.milestones, stand_ins.total_time_ps) == (everyone.milestones, everyone.total_time_ps)


def test_batch_one_decode_is_bound_by_reading_the_weights() -> None:
    # The textbook figure: at batch 1 every decode step streams every weight from HBM once, so TPOT is close to
    # weight bytes / memory bandwidth (a 6.7B-parameter model in bf16 on an H100: 13.4 GB / 2.97 TB/s = 4.5 ms).
    # The embedding table is not read (a lookup of one row), the KV cache of 33-34 positions is; both < 2%.
    workload = inference(LLAMA_7B_LIKE, serving={"batch": 1, "prompt_len": 32, "generate": 3})
    weights = workload.graphs(1)[0].resident_bytes["weights"]
    assert weights == pytest.approx(2 * 6.74e9, rel=0.01)
    result = run(workload)
    tpot_s = workload.serving_figures(result.milestones, result.total_time_ps)["tpot_ps"] * 1e-12
    h100 = PRESETS["h100"]  # its fitted model: HBM at the measured share of its datasheet bandwidth
    assert tpot_s == pytest.approx(weights / (h100.memory_bandwidth * h100.memory_efficiency), rel=0.03)
    decode_attention = nodes(unrolled(workload.graphs(1)[0]), "decode 1 layer0 attention scores")[0].op
    cost = RooflineCompute().estimate(compute_pb2.EstimateRequest(device="h100", ops=[decode_attention])).costs[0]
    assert cost.bound == compute_pb2.MEMORY


def test_figures_need_the_milestones() -> None:
    workload = inference(serving={"generate": 1})
    assert workload.serving_figures({"first token": 5000}, 8000)["tpot_ps"] == 0
    with pytest.raises(WorkloadError, match="no 'token 3' milestone"):
        inference().serving_figures({"first token": 5000}, 8000)


def test_the_example_checks() -> None:
    study = load_study(EXAMPLE)
    assert study.workload.kind == "transformer_inference" and check_study(study) == 2


def test_a_mixture_of_experts_is_refused_for_serving() -> None:
    with pytest.raises(ValidationError, match="serving a mixture of experts is not modelled yet"):
        inference({**MODEL, "experts": 4, "top_k": 2})


@pytest.mark.parametrize(
    ("parallelism", "micro_batches", "trace"),
    [
        ({"tp": 1, "pp": 1}, 1, False),
        ({"tp": 2, "pp": 1}, 2, True),
        ({"tp": 2, "pp": 2}, 2, False),
        ({"tp": 1, "pp": 2}, 4, True),
        ({"tp": 2, "pp": 2}, 1, True),
    ],
)
def test_layers_run_as_blocks_exactly_as_unrolled(parallelism: dict[str, int], micro_batches: int, trace: bool) -> None:
    """The pass's layers are one graph block run by a block node per layer: the simulation, its milestones,
    memory and trace included, equals the unrolled graph's, whether the blocks run whole or not."""
    workload = inference(serving={"micro_batches": micro_batches, "generate": 4}, parallelism=parallelism)
    graphs = list(workload.graphs(workload.npus_required()))
    assert all(graph.blocks for graph in graphs)
    plan = workload.config.parallelism
    topo = topology(*[(RING, size, 100 * 10**9, 1_000_000) for size in (plan.tp, plan.pp)])
    for aggregate in (True, False):
        representatives = workload.representatives(Grid.of(topo)) if aggregate else None
        blocked, plain = (
            simulate(
                some,
                AnalyticalNetwork(),
                topo,
                SystemOptions(aggregate=aggregate),
                compute=RooflineCompute(),
                device="h100",
                representatives=representatives,
                record_trace=trace,
            )
            for some in (graphs, [unrolled(graph) for graph in graphs])
        )
        assert replace(blocked, events_processed=0) == replace(plain, events_processed=0)
