"""Zero-bubble (ZB-H1, ZB-V), DualPipe and DualPipeV schedules of the transformer workload: their orders, ZB-H1's
and DualPipeV's bubbles and ZB-H1's peak activation memory against the closed forms of Qi et al. ("Zero Bubble
Pipeline Parallelism", ICLR 2024) and DualPipe's README, ZB-V's and DualPipe's memory against the papers' tables,
point-to-point matching and the split backward pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import pytest

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.optimize.first_order_plan import unsupported
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.memory import layer_activations
from stratasim.workload_layer.transformer.pipeline_schedule import Pass, pipeline_order
from tests.system_layer.helpers import RING, topology
from tests.workload_layer.test_pipeline_schedules import SMALL, activation_peak, transformer
from tests.workload_layer.transformer_helpers import messages, unrolled_graphs

MICROSECOND = 10**6


def letters(order: Sequence[Pass]) -> str:
    """``order`` as the papers draw it: F, B (input pass) and W, with the micro-batch."""
    return " ".join(
        {"forward": "F", "input": "B", "weight": "W", "backward": "BW"}[s.direction] + str(s.micro_batch) for s in order
    )


def test_zb_h1_order_by_hand() -> None:
    # pp = 4, m = 6: 1F1B's warm-up (pp - stage - 1 forward passes), then F and B alternately, each stage's W
    # lagging its B by ``stage`` passes (Qi et al., figure 3 top), the remaining W at the end.
    assert letters(pipeline_order("zb_h1", 0, 4, 6)) == "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5"
    assert letters(pipeline_order("zb_h1", 1, 4, 6)) == "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 B4 W3 B5 W4 W5"
    assert letters(pipeline_order("zb_h1", 3, 4, 6)) == "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5"


@pytest.mark.parametrize(("schedule", "chunks"), [("zb_h1", 1), ("zb_v", 2), ("dualpipe", 2), ("dualpipev", 2)])
@pytest.mark.parametrize(("stages", "m"), [(2, 4), (4, 8), (4, 10), (6, 12)])
def test_every_pass_once_in_order(schedule: str, chunks: int, stages: int, m: int) -> None:
    """Each (chunk, micro-batch) runs F, then B, then W once each on its stage (or one whole backward pass), and
    every stage gets the same work; DualPipe's chunks take one half of the micro-batches each."""
    for stage in range(stages):
        order = pipeline_order(schedule, stage, stages, m, chunks)
        assert len(set(order)) == len(order)
        seen: dict[tuple[int, int], tuple[str, ...]] = {}
        for step in order:
            seen[step.chunk, step.micro_batch] = (*seen.get((step.chunk, step.micro_batch), ()), step.direction)
        assert set(seen.values()) <= {("forward", "input", "weight"), ("forward", "backward")}
        per_chunk = m // 2 if schedule == "dualpipe" else m
        assert Counter(chunk for chunk, _ in seen) == {c: per_chunk for c in range(chunks)}


def fixed_times(
    graphs: Sequence[workload_pb2.ExecutionGraph], f: int, b: int, w: int
) -> list[workload_pb2.ExecutionGraph]:
    """Copies in which every layer's forward pass takes ``f``, its input gradients ``b`` and its weight gradients
    ``w`` (on one node each: its first layernorm, that layernorm's gradient and the QKV GEMM's weight gradient,
    in the whole backward pass or in the weight pass); every other compute node takes no time."""
    fixed = []
    for graph in graphs:
        copy = workload_pb2.ExecutionGraph()
        copy.CopyFrom(graph)
        for node in copy.nodes:
            if node.type == workload_pb2.COMP_NODE:
                node.ClearField("op")
                name = node.name
                node.duration_ps = (
                    f if name.endswith(" fwd layernorm") else b if name.endswith(" bwd layernorm") else 0
                ) + (w if name.endswith(" qkv wgrad") else 0)
        fixed.append(copy)
    return fixed


def timed(schedule: str, pp: int, m: int, f: int, b: int, w: int, v: int = 1) -> SimulationResult:
    """Two layers per stage (``T_F = 2f``...), TP = DP = 1, over a ring whose transfers take 1 ps."""
    workload = transformer(dict(SMALL, layers=2 * pp), pp=pp, global_batch=m, schedule=schedule, virtual_stages=v)
    graphs = fixed_times(unrolled_graphs(workload.graphs(pp)), f * MICROSECOND, b * MICROSECOND, w * MICROSECOND)
    return simulate(graphs, AnalyticalNetwork(), topology((RING, pp, 1e30, 0)), SystemOptions())


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 4), (4, 8), (4, 12), (8, 16)])
@pytest.mark.parametrize(("f", "b", "w"), [(1, 1, 1), (1, 2, 1), (2, 3, 2), (3, 1, 2), (1, 1, 2)])
def test_zb_h1_bubble_is_the_papers_closed_form(pp: int, m: int, f: int, b: int, w: int) -> None:
    """Qi et al.'s ZB-H1 bubble, ``(p - 1)(T_F + T_B - T_W)``, against 1F1B's ``(p - 1)(T_F + T_B + T_W)``, each
    stage computing ``m (T_F + T_B + T_W)``: the iteration takes their sum, and the bubble fraction (idle over the
    iteration, the same on every stage) follows. The closed form holds while ``T_W <= min(T_F, T_B)`` (the
    paper's setting): a longer W no longer fits the gaps its lag is meant to fill, and the iteration takes longer.

    Tolerance, from the engine's physics: a "free" transfer still takes 1 ps, and the critical path crosses at
    most ``2 (p - 1)`` stage boundaries per micro-batch it waits on, so the time is the closed form plus under
    ``2 (p - 1) m`` ps (durations are whole microseconds, so the two never mix); the microseconds are exact."""
    tf, tb, tw = 2 * f, 2 * b, 2 * w
    zb = timed("zb_h1", pp, m, f, b, w)
    units, transfers_ps = divmod(zb.total_time_ps, MICROSECOND)
    if tw > min(tf, tb):
        assert units > m * (tf + tb + tw) + (pp - 1) * (tf + tb - tw)
        return
    assert units == m * (tf + tb + tw) + (pp - 1) * (tf + tb - tw)
    assert transfers_ps < 2 * (pp - 1) * m
    for npu in zb.per_npu:
        assert npu.compute_ps == m * (tf + tb + tw) * MICROSECOND
    idle = Fraction(zb.total_time_ps - zb.per_npu[0].compute_ps, zb.total_time_ps)
    assert idle == Fraction(((pp - 1) * (tf + tb - tw)) * MICROSECOND + transfers_ps, zb.total_time_ps)
    one_f_one_b = divmod(timed("1f1b", pp, m, f, b, w).total_time_ps, MICROSECOND)[0]
    assert one_f_one_b == (m + pp - 1) * (tf + tb + tw)
    assert one_f_one_b - units == 2 * (pp - 1) * tw


@pytest.mark.parametrize("recompute", ["none", "selective"])
@pytest.mark.parametrize(("pp", "m"), [(4, 8), (4, 3), (2, 6)])
def test_zb_h1_peak_activations_are_1f1bs(recompute: str, pp: int, m: int) -> None:
    """Qi et al.: ZB-H1's peak activation memory is 1F1B's, ``min(p, m)`` micro-batches' activations on stage
    0; later stages hold more than under 1F1B (their W lag) but never more than stage 0. Along the graphs (the
    nodes' allocations in program order) and in the analytic model alike, to the byte."""
    model = dict(SMALL, layers=2 * pp, hidden=256, seq_len=128)
    plan = dict(tp=2, pp=pp, global_batch=m, recompute=recompute)
    zb, baseline = transformer(model, schedule="zb_h1", **plan), transformer(model, **plan)
    layer = layer_activations(zb.config)
    assert zb.stage_memory(0).activations_bytes == baseline.stage_memory(0).activations_bytes
    assert zb.stage_memory(0).activations_bytes == 2 * layer.kept_bytes * min(pp, m) + layer.recomputed_bytes
    graphs = unrolled_graphs(zb.graphs(2 * pp))
    for stage in range(pp):
        analytic = zb.stage_memory(stage).activations_bytes
        assert baseline.stage_memory(stage).activations_bytes <= analytic <= zb.stage_memory(0).activations_bytes
        if recompute == "none":
            assert activation_peak(graphs[2 * stage]) == activation_peak(graphs[2 * stage + 1]) == analytic


def test_zb_v_and_dualpipe_memory_match_the_papers() -> None:
    """ZB-V (Qi et al., section 4): peak activations of 1F1B's stage 0 (``p`` micro-batches of a stage's layers);
    DualPipe (its README's table): twice the parameters and ``PP + 1`` micro-batches' activations per device."""
    pp, m = 4, 8
    model = dict(SMALL, layers=4 * pp, hidden=256, seq_len=128)
    one_f_one_b = transformer(model, pp=pp, global_batch=m)
    zb_v = transformer(model, pp=pp, global_batch=m, schedule="zb_v", virtual_stages=2)
    assert zb_v.stage_memory(0).activations_bytes == one_f_one_b.stage_memory(0).activations_bytes
    dual = transformer(model, pp=pp, global_batch=m, schedule="dualpipe")
    stage_layers_bytes = 4 * layer_activations(dual.config).kept_bytes
    for stage in range(pp):
        assert dual.stage_memory(stage).activations_bytes == (pp + 1) * stage_layers_bytes
    middle = one_f_one_b.stage_parameters(1) + one_f_one_b.stage_parameters(2)
    assert dual.stage_parameters(1) == middle  # model stages 1 and pp - 2 = 2: twice a middle stage's
    for workload in (zb_v, dual):
        graphs = unrolled_graphs(workload.graphs(pp))
        for stage in range(pp):
            assert activation_peak(graphs[stage]) == workload.stage_memory(stage).activations_bytes


@pytest.mark.parametrize(("schedule", "v"), [("zb_h1", 1), ("zb_v", 2), ("dualpipe", 1), ("dualpipev", 2)])
def test_sends_and_receives_match_and_the_flops_are_kept(schedule: str, v: int) -> None:
    """Every transfer is received once; the split passes run the same GEMM FLOPs as 1F1B (DualPipe: each model
    stage's layers on two ranks, every micro-batch once)."""
    pp, m = 4, 8
    model = dict(SMALL, layers=2 * pp)
    workload = transformer(model, tp=2, pp=pp, global_batch=m, schedule=schedule, virtual_stages=v)
    graphs = unrolled_graphs(workload.graphs(2 * pp))
    sends = messages(graphs, workload_pb2.COMM_SEND_NODE)
    assert sends == messages(graphs, workload_pb2.COMM_RECV_NODE) and set(sends.values()) == {1}

    def flops(graphs: Sequence[workload_pb2.ExecutionGraph]) -> int:
        return sum(
            n.op.flops
            for g in graphs
            for n in g.nodes
            if n.type == workload_pb2.COMP_NODE and n.name != "optimizer step"
        )

    assert flops(graphs) == flops(unrolled_graphs(transformer(model, tp=2, pp=pp, global_batch=m).graphs(2 * pp)))
    weight_passes = [n for g in graphs for n in g.nodes if " wgt " in f" {n.name} " or n.name.startswith("wgt ")]
    assert weight_passes and all(n.name.endswith(" wgrad") for n in weight_passes)


def test_dualpipe_sums_each_stages_two_copies() -> None:
    """Ranks ``p`` and ``pp - 1 - p`` hold the same two model stages: each pair all-reduces the stage's gradients
    (bf16, every parameter the rank holds) once, before the optimizer step waits for it."""
    pp = 4
    workload = transformer(dict(SMALL, layers=2 * pp), tp=2, pp=pp, global_batch=8, schedule="dualpipe")
    graphs = unrolled_graphs(workload.graphs(2 * pp))
    for npu, graph in enumerate(graphs):
        (mirror,) = [n for n in graph.nodes if n.name == "mirror gradient all-reduce"]
        stage = npu // 2
        partner = 2 * (pp - 1 - stage) + npu % 2
        assert tuple(mirror.group) == tuple(sorted((npu, partner)))
        assert mirror.comm_bytes == 2 * workload.stage_parameters(stage)
        (step,) = [n for n in graph.nodes if n.name == "optimizer step"]
        assert mirror.id in step.data_deps


@pytest.mark.parametrize(
    ("schedule", "v", "reason"),
    [
        ("zb_h1", 1, None),
        ("zb_v", 2, None),
        ("dualpipe", 1, None),
        ("dualpipev", 2, None),
    ],
)
def test_the_first_order_model_walks_every_split_schedule(schedule: str, v: int, reason: str | None) -> None:
    workload = transformer(dict(SMALL, layers=8), pp=2, global_batch=4, schedule=schedule, virtual_stages=v)
    assert unsupported(workload.config) == reason


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12), (8, 16)])
def test_zb_v_reaches_the_bound_in_unit_slots(pp: int, m: int) -> None:
    """With every chunk's F, B and W taking one slot (one layer a chunk, ``f = b = w``), ZB-V's order takes
    ``6 m + pp - 1`` slots: each stage's ``6 m`` passes and the last stage's wait for its first input, the bound
    (1F1B in the same slots: ``6 (m + pp - 1)``). Tolerance as for ZB-H1: under ``4 pp m`` ps of transfers."""
    units, transfers_ps = divmod(timed("zb_v", pp, m, 1, 1, 1, v=2).total_time_ps, MICROSECOND)
    assert units == 6 * m + pp - 1 and transfers_ps < 4 * pp * m


def test_dualpipev_order_by_hand() -> None:
    # DualPipe's README figure for DualPipeV: 4 ranks, 10 micro-batches; rank 3 (holding model chunks 3 and 4, the
    # bottom of the V) runs F0 F1 pairs at once, its first main-phase pair apart, then overlapped F&B pairs.
    order = pipeline_order("dualpipev", 3, 4, 10, 2)
    head = " ".join(f"{letters([p])}{'ab'[p.chunk]}" for p in order[:10])
    assert head == "F0a F0b F1a F1b F2a F2b F3a F3b F4a BW0b"
    first = pipeline_order("dualpipev", 0, 4, 10, 2)
    assert [p.direction for p in first[:7]] == ["forward"] * 7 and {p.chunk for p in first[:6]} == {0}


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12), (3, 9)])
@pytest.mark.parametrize(("f", "b", "w"), [(1, 1, 1), (2, 3, 1), (1, 2, 2), (3, 1, 1)])
def test_dualpipev_bubble_is_within_the_readmes(pp: int, m: int, f: int, b: int, w: int) -> None:
    """Two chunks of one layer a rank: each rank runs ``2 m`` forward and ``2 m`` backward chunks, and waits at
    most DualPipe's README bubble for DualPipeV, ``(PP / 2 - 1)(F&B + B - 3W)`` with ``PP = 2 pp`` stages, ``F&B =
    F + B`` (one compute stream: the overlapped pair's compute runs back to back) and ``B`` the whole backward
    chunk; free transfers let some ranks start their pairs earlier than the README's drawing, never later (the
    README's form holds for ``W`` no longer than the input pass, as here). The rank waits at least ``(pp - 1)(F +
    B - 2W)``."""
    units, transfers_ps = divmod(timed("dualpipev", pp, m, f, b, w, v=2).total_time_ps, MICROSECOND)
    bubble, whole = units - 2 * m * (f + b + w), b + w
    assert (pp - 1) * (f + whole - 2 * w) <= bubble <= (pp - 1) * (f + whole + whole - 3 * w)
    assert transfers_ps < 8 * pp * m


def test_dualpipev_memory_matches_the_readme() -> None:
    """DualPipe's README: DualPipeV holds ``PP + 1`` chunks' activations per device at most (``PP = 2 pp`` stages of
    the model, a chunk's layers each) and the parameters of two stages."""
    pp, m = 4, 8
    model = dict(SMALL, layers=4 * pp, hidden=256, seq_len=128)
    dual_v = transformer(model, pp=pp, global_batch=m, schedule="dualpipev", virtual_stages=2)
    chunk_bytes = 2 * layer_activations(dual_v.config).kept_bytes
    assert max(dual_v.stage_memory(stage).activations_bytes for stage in range(pp)) == (2 * pp + 1) * chunk_bytes
    graphs = unrolled_graphs(dual_v.graphs(pp))
    for stage in range(pp):
        assert activation_peak(graphs[stage]) == dual_v.stage_memory(stage).activations_bytes
