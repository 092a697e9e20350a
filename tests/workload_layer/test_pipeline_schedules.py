"""Pipeline schedules of the transformer workload: Megatron's interleaved 1F1B order, point-to-point matching,
textbook iteration times and bubbles, activation memory along the graphs and DP gradient buckets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import pytest
from pydantic import ValidationError

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.memory import layer_activations, micro_batches_in_flight
from stratasim.workload_layer.transformer.pipeline_schedule import Pass, pipeline_order
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.system_layer.helpers import RING, topology
from tests.workload_layer.transformer_helpers import messages, unrolled_graphs

SMALL = dict(layers=12, hidden=64, heads=4, seq_len=16, vocab=100)
MODEL = dict(layers=8, hidden=256, heads=4, seq_len=128, vocab=1000)
MICROSECOND = 10**6


def transformer(model: dict[str, object] | None = None, **plan: object) -> TransformerWorkload:
    return TransformerWorkload(
        TransformerWorkload.Config.model_validate({"model": model or SMALL, "parallelism": plan})
    )


def F(chunk: int, micro_batch: int) -> Pass:  # noqa: N802 - reads like the papers' figures
    return Pass("forward", chunk, micro_batch)


def B(chunk: int, micro_batch: int) -> Pass:  # noqa: N802
    return Pass("backward", chunk, micro_batch)


def peak_in_flight(order: Sequence[Pass]) -> int:
    """Most (chunk, micro-batch) forward passes whose backward pass has not run yet, along ``order``."""
    live = peak = 0
    for step in order:
        live += 1 if step.direction == "forward" else -1
        peak = max(peak, live)
    return peak


def test_interleaved_order_by_hand() -> None:
    # pp = 2, v = 2, m = 4: passes go in groups of pp = 2 micro-batches per chunk, forward F(0,0) F(0,1) F(1,0)
    # F(1,1) F(0,2)..., backward from the last chunk B(1,0) B(1,1) B(0,0).... Stage 0 warms up with
    # (2 - 0 - 1) * 2 + (2 - 1) * 2 = 4 forward passes, stage 1 with 2; then 1F1B; then the cool-down.
    assert pipeline_order("interleaved", 0, 2, 4, chunks=2) == (
        F(0, 0),
        F(0, 1),
        F(1, 0),
        F(1, 1),
        F(0, 2),
        B(1, 0),
        F(0, 3),
        B(1, 1),
        F(1, 2),
        B(0, 0),
        F(1, 3),
        B(0, 1),
        B(1, 2),
        B(1, 3),
        B(0, 2),
        B(0, 3),
    )
    assert pipeline_order("interleaved", 1, 2, 4, chunks=2) == (
        F(0, 0),
        F(0, 1),
        F(1, 0),
        B(1, 0),
        F(1, 1),
        B(1, 1),
        F(0, 2),
        B(0, 0),
        F(0, 3),
        B(0, 1),
        F(1, 2),
        B(1, 2),
        F(1, 3),
        B(1, 3),
        B(0, 2),
        B(0, 3),
    )
    # m = pp: Megatron runs every forward pass first.
    assert pipeline_order("interleaved", 1, 2, 2, chunks=2) == (
        F(0, 0),
        F(0, 1),
        F(1, 0),
        F(1, 1),
        B(1, 0),
        B(1, 1),
        B(0, 0),
        B(0, 1),
    )


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("chunks", [1, 2, 3])
@pytest.mark.parametrize("groups", [1, 2, 3])
def test_interleaved_order_follows_megatrons_rules(stages: int, chunks: int, groups: int) -> None:
    m = groups * stages
    total = m * chunks
    for stage in range(stages):
        order = pipeline_order("interleaved", stage, stages, m, chunks)
        forward = [step for step in order if step.direction == "forward"]
        backward = [step for step in order if step.direction == "backward"]
        # get_model_chunk_id: the k-th pass runs chunk (k mod pp v) div pp (backward: counted from the last).
        assert [step.chunk for step in forward] == [k % (stages * chunks) // stages for k in range(total)]
        assert [step.chunk for step in backward] == [chunks - 1 - k % (stages * chunks) // stages for k in range(total)]
        # Each chunk takes the micro-batches in order, each once per direction.
        for chunk in range(chunks):
            assert [s.micro_batch for s in forward if s.chunk == chunk] == list(range(m))
            assert [s.micro_batch for s in backward if s.chunk == chunk] == list(range(m))
        expected = total if m == stages else min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
        pairs = total - expected
        directions = [s.direction for s in order]
        assert directions == ["forward"] * expected + ["forward", "backward"] * pairs + ["backward"] * expected


@pytest.mark.parametrize(
    ("schedule", "stages", "chunks", "m"),
    [
        ("gpipe", 4, 1, 3),
        ("1f1b", 4, 1, 2),
        ("1f1b", 4, 1, 9),
        ("interleaved", 4, 3, 8),
        ("interleaved", 3, 2, 3),
    ],
)
def test_every_forward_pass_precedes_its_backward_pass(schedule: str, stages: int, chunks: int, m: int) -> None:
    for stage in range(stages):
        order = pipeline_order(schedule, stage, stages, m, chunks)
        assert len(order) == len(set(order)) == 2 * chunks * m
        for i, step in enumerate(order):
            if step.direction == "backward":
                assert order.index(F(step.chunk, step.micro_batch)) < i


def test_bad_orders_and_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="one model chunk per stage"):
        pipeline_order("1f1b", 0, 2, 4, chunks=2)
    with pytest.raises(ValueError, match=r"micro-batches \(6\) divisible by stages \(4\)"):
        pipeline_order("interleaved", 0, 4, 6, chunks=2)
    bad = [
        (dict(pp=2, virtual_stages=2), r"parallelism.virtual_stages \(2\) above 1 needs parallelism.schedule: inter"),
        (
            dict(pp=4, global_batch=6, schedule="interleaved"),
            r"micro_batch \* dp\) = 6\) to be divisible by "
            r"parallelism.pp \(4\)",
        ),
        (
            dict(pp=4, virtual_stages=2, global_batch=4, schedule="interleaved"),
            r"model.layers \(12\) must be divisible by parallelism.pp \* parallelism.virtual_stages \(8\)",
        ),
        (dict(dp_bucket="0B"), "dp_bucket"),
        (dict(virtual_stages=0), "virtual_stages"),
    ]
    for plan, message in bad:
        with pytest.raises(ValidationError, match=message):
            transformer(**plan)
    assert transformer(dp_bucket="25MiB").config.parallelism.dp_bucket == 25 * 2**20


@pytest.mark.parametrize(("pp", "v"), [(2, 2), (4, 3), (3, 2)])
def test_interleaved_sends_and_receives_match(pp: int, v: int) -> None:
    workload = transformer(
        dict(SMALL, layers=pp * v * 2), tp=2, pp=pp, global_batch=2 * pp, schedule="interleaved", virtual_stages=v
    )
    graphs = unrolled_graphs(workload.graphs(2 * pp))
    sends = messages(graphs, workload_pb2.COMM_SEND_NODE)
    assert sends == messages(graphs, workload_pb2.COMM_RECV_NODE)
    # Every (sender, receiver, tag) once: tp ranks x chunk boundaries x micro-batches x directions.
    assert set(sends.values()) == {1} and len(sends) == 2 * (pp * v - 1) * 2 * pp * 2
    for graph in graphs:
        assert {
            n.pg_name for n in graph.nodes if n.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE)
        } == {"pp"}


def test_embedding_and_head_sit_on_the_ends_of_the_model() -> None:
    # pp = 2, v = 2, 8 layers: stage 0 holds the model's chunks 0 and 2, stage 1 chunks 1 and 3.
    graphs = unrolled_graphs(
        transformer(dict(SMALL, layers=8), pp=2, global_batch=2, schedule="interleaved", virtual_stages=2).graphs(2)
    )
    steps = [n for g in graphs for n in g.nodes if n.type == workload_pb2.COMP_NODE and n.name == "optimizer step"]
    assert len(steps) == len(graphs)  # each NPU ends with its optimizer step
    layers = [
        {n.name.split()[1] for n in g.nodes if n.type == workload_pb2.COMP_NODE and n.name != "optimizer step"}
        for g in graphs
    ]
    assert layers == [
        {"embedding", "layer0", "layer1", "layer4", "layer5"},
        {"layer2", "layer3", "layer6", "layer7", "head"},
    ]
    assert graphs[0].nodes[0].name == "mb0 embedding fwd embedding"
    first_backward = next(n for n in graphs[1].nodes if " bwd " in n.name)
    assert first_backward.name == "mb0 head bwd loss"


def test_interleaving_keeps_the_flops() -> None:
    def gemm_flops(workload: TransformerWorkload) -> int:
        return sum(
            n.op.flops for g in unrolled_graphs(workload.graphs(4)) for n in g.nodes if n.type == workload_pb2.COMP_NODE
        )

    one = transformer(pp=4, global_batch=8)
    three = transformer(pp=4, global_batch=8, schedule="interleaved", virtual_stages=3)
    assert gemm_flops(one) == gemm_flops(three)
    assert one.stage_parameters(1) == three.stage_parameters(1)


def fixed_durations(
    graphs: Sequence[workload_pb2.ExecutionGraph], forward_ps: int, backward_ps: int
) -> list[workload_pb2.ExecutionGraph]:
    """Copies in which every layer's forward pass takes ``forward_ps`` (its first node) and backward pass
    ``backward_ps`` (its last node); every other compute node takes no time."""
    fixed = []
    for graph in graphs:
        copy = workload_pb2.ExecutionGraph()
        copy.CopyFrom(graph)
        for node in copy.nodes:
            if node.type == workload_pb2.COMP_NODE:
                node.ClearField("op")
                node.duration_ps = (
                    forward_ps
                    if node.name.endswith(" fwd layernorm")
                    else backward_ps
                    if node.name.endswith(" bwd layernorm")
                    else 0
                )
        fixed.append(copy)
    return fixed


def iteration(workload: TransformerWorkload, forward_ps: int, backward_ps: int) -> SimulationResult:
    """Simulate ``workload`` (TP = DP = 1) with fixed layer durations over a free ring (see below)."""
    pp = workload.config.parallelism.pp
    graphs = fixed_durations(unrolled_graphs(workload.graphs(pp)), forward_ps, backward_ps)
    return simulate(graphs, AnalyticalNetwork(), topology((RING, pp, 1e30, 0)), SystemOptions())


@pytest.mark.parametrize("pp", [2, 4])
@pytest.mark.parametrize("v", [1, 2, 3])
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize(("f", "b"), [(1, 1), (1, 2)])
def test_interleaved_runs_to_completion_in_the_textbook_time(pp: int, v: int, groups: int, f: int, b: int) -> None:
    """With every chunk's forward pass taking ``f`` and backward pass ``b`` (a stage's whole forward and backward
    times are ``tf = v f`` and ``tb = v b`` per micro-batch) and free transfers, the iteration takes exactly

        T = (m v + pp - 1)(f + b) = (m + (pp - 1) / v)(tf + tb),

    a bubble of ``(pp - 1)/(v m)`` of the ideal ``m (tf + tb)``. Lower bound: the last stage holds the model's
    chunk ``pp - 1``, which cannot start before micro-batch 0 has gone forward through the ``pp - 1`` chunks before
    it, ``(pp - 1) f``; it computes ``m v (f + b)``; its last pass is micro-batch ``m - 1``'s backward pass of that
    chunk, whose gradient must still go back through ``pp - 1`` chunks, ``(pp - 1) b``. Megatron's order meets the
    bound (the last stage never idles in between) when ``m`` is a multiple of ``pp``.

    The engine delivers a message no sooner than 1 ps after it is sent, so "free" transfers take 1 ps: durations
    are in microseconds and the time is the figure above plus at most 1 ps per transfer.
    """
    m = groups * pp
    workload = transformer(dict(SMALL, layers=pp * v), pp=pp, global_batch=m, schedule="interleaved", virtual_stages=v)
    result = iteration(workload, f * MICROSECOND, b * MICROSECOND)
    units, transfers_ps = divmod(result.total_time_ps, MICROSECOND)
    assert units == (m * v + pp - 1) * (f + b)
    assert Fraction(units, (f + b) * v) == m + Fraction(pp - 1, v)
    assert transfers_ps <= 2 * (pp * v - 1) * m


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("pp", "m"), [(2, 2), (2, 5), (4, 4), (4, 8), (4, 3)])
def test_gpipe_and_1f1b_take_the_textbook_time(schedule: str, pp: int, m: int) -> None:
    """``T = (m + pp - 1)(tf + tb)`` (the bound above with ``v = 1``): a bubble of ``(pp - 1)/m``; 1F1B saves
    memory, not time. Two layers per stage: ``tf = 2 f``, ``tb = 2 b``."""
    workload = transformer(dict(SMALL, layers=2 * pp), pp=pp, global_batch=m, schedule=schedule)
    units, transfers_ps = divmod(iteration(workload, MICROSECOND, 3 * MICROSECOND).total_time_ps, MICROSECOND)
    assert units == (m + pp - 1) * (2 * 1 + 2 * 3)
    assert transfers_ps <= 2 * (pp - 1) * m


def activation_peak(graph: workload_pb2.ExecutionGraph) -> int:
    """The most activation memory the nodes hold at once, in program order (the compute stream's order); every
    allocation is freed by the end."""
    live = peak = 0
    for node in graph.nodes:
        live += node.memory_bytes
        assert live >= 0
        peak = max(peak, live)
    assert live == 0
    return peak


@pytest.mark.parametrize("recompute", ["none", "full"])
@pytest.mark.parametrize(
    ("schedule", "v", "in_flight"),
    [
        ("gpipe", 1, [8, 8, 8, 8]),
        ("1f1b", 1, [4, 3, 2, 1]),
        # min(2 (pp - p - 1) + (v - 1) pp + 1, v m) chunks: stage 0 holds 11 chunks of 1 layer = 5.5 micro-batches'
        # worth of its 2 layers, Korthikanti et al.'s pp (1 + (pp - 1)/(pp v)) = 4 * 11/8.
        ("interleaved", 2, [11, 9, 7, 5]),
        ("interleaved", 1, [7, 5, 3, 1]),
    ],
)
def test_activation_memory_along_the_graph_peaks_at_the_formula(
    recompute: str, schedule: str, v: int, in_flight: list[int]
) -> None:
    pp, m = 4, 8
    workload = transformer(
        dict(MODEL, layers=8), tp=2, pp=pp, global_batch=m, schedule=schedule, virtual_stages=v, recompute=recompute
    )
    graphs = unrolled_graphs(workload.graphs(2 * pp))
    layer = layer_activations(workload.config)
    chunk_layers = 8 // (pp * v)
    for stage in range(pp):
        assert micro_batches_in_flight(schedule, stage, pp, m, v) == in_flight[stage]
        assert peak_in_flight(pipeline_order(schedule, stage, pp, m, v)) == in_flight[stage]
        expected = layer.kept_bytes * chunk_layers * in_flight[stage] + layer.recomputed_bytes
        assert workload.stage_memory(stage).activations_bytes == expected
        assert activation_peak(graphs[2 * stage]) == activation_peak(graphs[2 * stage + 1]) == expected
    if schedule == "interleaved" and v == 2:
        assert Fraction(in_flight[0], v) == pp * (1 + Fraction(pp - 1, pp * v))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "interleaved"])
@pytest.mark.parametrize("stages", [1, 2, 4])
@pytest.mark.parametrize("groups", [1, 2, 3])
def test_in_flight_formula_matches_the_order(schedule: str, stages: int, groups: int) -> None:
    m = groups * stages
    for chunks in [1, 2, 3] if schedule == "interleaved" else [1]:
        for stage in range(stages):
            order = pipeline_order(schedule, stage, stages, m, chunks)
            assert micro_batches_in_flight(schedule, stage, stages, m, chunks) == peak_in_flight(order)


def test_graphs_carry_the_resident_memory() -> None:
    workload = transformer(MODEL, tp=2, pp=2, dp=2, global_batch=4)
    for graph in unrolled_graphs(workload.graphs(8)):
        memory = workload.stage_memory(graph.npu // 2 % 2)
        assert dict(graph.resident_bytes) == {
            "weights": memory.weights_bytes,
            "gradients": memory.gradients_bytes,
            "optimizer": memory.optimizer_bytes,
        }
        assert memory.total_bytes == sum(graph.resident_bytes.values()) + activation_peak(graph)


def dp_all_reduces(graph: workload_pb2.ExecutionGraph) -> list[workload_pb2.Node]:
    return [n for n in graph.nodes if n.type == workload_pb2.COMM_COLL_NODE and n.pg_name == "dp"]


@pytest.mark.parametrize(
    ("bucket", "stage0", "stage1"),
    [
        (None, 1, 1),
        ("100GB", 1, 1),
        ("1MB", 5, 4),
        ("1B", 5, 5),
        ("3MB", 3, 2),
    ],
)
def test_buckets_conserve_the_gradient_bytes(bucket: object, stage0: int, stage1: int) -> None:
    # Stage 0 holds the embedding (0.58 MB of bf16 gradients) and layers 0-3, stage 1 layers 4-7 and the head
    # (0.51 MB); a layer's gradients are 1.58 MB. Buckets fill in backward order: with 1 byte, one per block;
    # "1MB": stage 1's head and layer 7 share one; "3MB": two layers per bucket (stage 1: head + 7 + 6, 5 + 4).
    workload = transformer(MODEL, pp=2, dp=2, global_batch=4, dp_bucket=bucket)
    graphs = unrolled_graphs(workload.graphs(4))
    for stage, buckets in ((0, stage0), (1, stage1)):
        reduces = dp_all_reduces(graphs[stage])
        assert len(reduces) == buckets
        assert sum(n.comm_bytes for n in reduces) == 2 * workload.stage_parameters(stage)
        assert all(tuple(n.group) == (stage, stage + 2) for n in reduces)
        for earlier, later in zip(reduces, reduces[1:]):
            assert earlier.id in later.data_deps  # one communicator: buckets run in order


def test_buckets_overlap_the_backward_pass() -> None:
    def run(bucket: str | None) -> tuple[int, int, int]:
        """(first DP all-reduce start, last compute end before the optimizer step) on NPU 0 and the iteration
        time."""
        workload = transformer(MODEL, pp=2, dp=2, global_batch=8, dp_bucket=bucket)
        result = simulate(
            unrolled_graphs(workload.graphs(4)),
            AnalyticalNetwork(),
            topology((RING, 2, 1e11, 1000), (RING, 2, 1e11, 1000)),
            SystemOptions(),
            compute=RooflineCompute(),
            device="h100",
            record_trace=True,
        )
        spans = [s for s in result.spans if s.npu == 0]
        first_reduce = min(s.start_ps for s in spans if s.track == "comm" and s.name.startswith("all_reduce"))
        backward = [s for s in spans if s.track == "compute" and s.name != "optimizer step"]
        return first_reduce, max(s.end_ps for s in backward), result.total_time_ps

    one_start, one_compute_end, one_total = run(None)
    many_start, many_compute_end, many_total = run("1MB")
    assert one_start >= one_compute_end
    assert many_start < many_compute_end
    assert many_total < one_total


def test_communicators_are_named() -> None:
    graph = unrolled_graphs(transformer(MODEL, tp=2, pp=2, dp=2, global_batch=4).graphs(8))[0]
    names = Counter((n.type, n.pg_name) for n in graph.nodes if n.type != workload_pb2.COMP_NODE)
    assert set(names) == {
        (workload_pb2.COMM_COLL_NODE, "tp"),
        (workload_pb2.COMM_COLL_NODE, "dp"),
        (workload_pb2.COMM_SEND_NODE, "pp"),
        (workload_pb2.COMM_RECV_NODE, "pp"),
    }
