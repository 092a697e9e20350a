"""ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3.1, figure 3 bottom) and full
recomputation under the split schedules: orders, iteration times against closed forms, and peak activation memory
against the paper's ``(2p - 1) M_B`` and the walk of the order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from stratasim.kernel import operators
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.optimize.first_order_plan import unsupported
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.blocks import layer_steps
from stratasim.workload_layer.transformer.memory import layer_activations, weight_pass_bytes
from stratasim.workload_layer.transformer.pipeline_schedule import pipeline_order
from tests.system_layer.helpers import RING, topology
from tests.workload_layer.test_pipeline_schedules import SMALL, activation_peak, transformer
from tests.workload_layer.test_zero_bubble_schedules import MICROSECOND, fixed_times, letters, timed
from tests.workload_layer.transformer_helpers import unrolled_graphs


def test_zb_h2_order_by_hand() -> None:
    # pp = 4, m = 8: stage p runs 2 (pp - p) - 1 forward passes before its first B (the paper's extra warm-up:
    # 7 on stage 0, 2 pp - 1 micro-batches in flight), then a ready B first, else a forward pass while fewer than
    # 2 pp - 1 are held, else the oldest W; the last stage runs F and B alternately and its W passes at the end
    # (the paper's parallelogram).
    assert letters(pipeline_order("zb_h2", 0, 4, 8)) == (
        "F0 F1 F2 F3 F4 F5 F6 B0 W0 B1 F7 B2 W1 B3 W2 B4 W3 B5 W4 B6 W5 W6 B7 W7"
    )
    assert letters(pipeline_order("zb_h2", 3, 4, 8)) == (
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 W0 F7 B7 W1 W2 W3 W4 W5 W6 W7"
    )
    for stage in range(4):
        order = pipeline_order("zb_h2", stage, 4, 8)
        assert [p.direction for p in order[: 2 * (4 - stage) - 1]] == ["forward"] * (2 * (4 - stage) - 1)
        assert order[2 * (4 - stage) - 1].direction == "input"


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12), (3, 9), (8, 16)])
@pytest.mark.parametrize(("f", "b", "w"), [(1, 1, 1), (1, 2, 1), (2, 3, 2), (3, 1, 2), (1, 1, 2), (1, 3, 1)])
def test_zb_h2_bubble_is_the_pipelines_least(pp: int, m: int, f: int, b: int, w: int) -> None:
    """Qi et al.'s ZB-H2 bubble is ``(p - 1)(T_F + T_B - 2 T_W)``, zero at equal times: counted inside the paper's
    parallelogram, each stage from its own first pass, whose slant (the last stage waits ``(p - 1) T_F`` for its
    first input) the paper's optimizer post-validation lets the next iteration fill (not modelled: one iteration
    here ends at its last pass). So at equal times the iteration is ``3 m T + (p - 1) T``; with ``m >= 2p - 1`` and
    ``T_B <= T_F + T_W`` it is that bound for every ratio, ``m (T_F + T_B + T_W) + (p - 1) T_F`` (no schedule can
    end earlier: the last stage starts then and computes that long), and a B longer than ``T_F + T_W`` delays the
    gradients' way back by ``(p - 1)(T_B - T_F - T_W)``. Transfers take 1 ps each, as for ZB-H1."""
    tf, tb, tw = 2 * f, 2 * b, 2 * w
    units, transfers_ps = divmod(timed("zb_h2", pp, m, f, b, w).total_time_ps, MICROSECOND)
    assert units == m * (tf + tb + tw) + (pp - 1) * tf + (pp - 1) * max(0, tb - tf - tw)
    if tf == tb == tw:
        assert units - (pp - 1) * tf == m * (tf + tb + tw) + (pp - 1) * (tf + tb - 2 * tw)  # the paper's, zero
    assert transfers_ps < 2 * (pp - 1) * m


@pytest.mark.parametrize("recompute", ["none", "selective"])
@pytest.mark.parametrize(("pp", "m"), [(4, 8), (4, 12), (2, 6), (4, 5)])
def test_zb_h2_peak_activations_are_2p_minus_1_micro_batches(recompute: str, pp: int, m: int) -> None:
    """Qi et al.: ZB-H2's peak is ``(2p - 1) M_B``, on stage 0 (``min(2p - 1, m)`` micro-batches' activations of
    the stage's layers, none freed before the first B); no other stage holds more. Along the graphs and in the
    analytic model alike, to the byte."""
    model = dict(SMALL, layers=2 * pp, hidden=256, seq_len=128)
    zb = transformer(model, tp=2, pp=pp, global_batch=m, recompute=recompute, schedule="zb_h2")
    layer = layer_activations(zb.config)
    peak = zb.stage_memory(0).activations_bytes
    assert peak == 2 * layer.kept_bytes * min(2 * pp - 1, m) + layer.recomputed_bytes
    graphs = unrolled_graphs(zb.graphs(2 * pp))
    for stage in range(pp):
        analytic = zb.stage_memory(stage).activations_bytes
        assert analytic <= peak
        if recompute == "none":
            assert activation_peak(graphs[2 * stage]) == activation_peak(graphs[2 * stage + 1]) == analytic


def test_zb_h2_needs_a_pipeline() -> None:
    with pytest.raises(ValueError, match="zb_h2 fills a pipeline's warm-up with extra forward passes"):
        transformer(SMALL, pp=1, global_batch=4, schedule="zb_h2")


def recompute_times(
    graphs: Sequence[workload_pb2.ExecutionGraph], f: int, b: int, w: int, r: int
) -> list[workload_pb2.ExecutionGraph]:
    """:func:`fixed_times`, the recomputed forward pass of each layer taking ``r`` (its first layernorm)."""
    fixed = fixed_times(graphs, f, b, w)
    for graph in fixed:
        for node in graph.nodes:
            if node.type == workload_pb2.COMP_NODE and node.name.endswith(" recompute layernorm"):
                node.duration_ps = r
    return fixed


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12)])
@pytest.mark.parametrize(("f", "b", "w", "r"), [(1, 1, 1, 1), (2, 1, 2, 1), (2, 3, 2, 2)])
def test_full_recompute_joins_the_input_pass(pp: int, m: int, f: int, b: int, w: int, r: int) -> None:
    """Under full recomputation a layer's forward pass runs again just before its B (the input pass needs its
    activations), and W reads what B left: ZB-H1's iteration is the paper's closed form with ``T_B`` grown by the
    recomputation, ``m (T_F + T_B' + T_W) + (p - 1)(T_F + T_B' - T_W)`` with ``T_B' = T_B + T_R``, while
    ``T_W <= min(T_F, T_B')``."""
    workload = transformer(dict(SMALL, layers=2 * pp), pp=pp, global_batch=m, schedule="zb_h1", recompute="full")
    times = (f * MICROSECOND, b * MICROSECOND, w * MICROSECOND, r * MICROSECOND)
    graphs = recompute_times(unrolled_graphs(workload.graphs(pp)), *times)
    result = simulate(graphs, AnalyticalNetwork(), topology((RING, pp, 1e30, 0)), SystemOptions())
    units = result.total_time_ps // MICROSECOND
    tf, tb, tw = 2 * f, 2 * (b + r), 2 * w
    assert units == m * (tf + tb + tw) + (pp - 1) * (tf + tb - tw)


@pytest.mark.parametrize(("schedule", "v"), [("zb_h1", 1), ("zb_h2", 1), ("zb_v", 2), ("dualpipev", 2)])
def test_full_recompute_memory_under_split_schedules(schedule: str, v: int) -> None:
    """Full recomputation keeps each layer's input (``2 s b h``) from F to B; B recomputes the layer (``A``, one
    layer at a time) and leaves W what it reads, each weighted GEMM's input and output gradient (at most ``A``),
    which W frees. ZB-H1's stage 0: its ``p`` inputs kept through the warm-up, then at the first B one micro-batch's
    inputs turned into W's bytes, ``(p - 1) K + W_c + A`` (``K`` a micro-batch's inputs of the stage, ``W_c`` its
    weight-pass bytes), more than 1F1B's ``p K + A``. The analytic peak bounds the graphs' (walked at pass ends,
    with one layer's ``A`` on top) by at most one layer's ``W_l - K_l``."""
    pp, m = 4, 8
    model = dict(SMALL, layers=2 * v * pp, hidden=256, seq_len=128)
    plan = dict(tp=2, pp=pp, global_batch=m, recompute="full", virtual_stages=v)
    workload = transformer(model, schedule=schedule, **plan)
    layer = layer_activations(workload.config)
    element = operators.dtype_bytes(operators.parse_dtype(workload.config.precision))
    weight_bytes = weight_pass_bytes(layer_steps(workload.config, 0), layer.recomputed_bytes, element)
    assert layer.kept_bytes < weight_bytes <= layer.recomputed_bytes
    if schedule == "zb_h1":
        stage_inputs, weights = 2 * layer.kept_bytes, 2 * weight_bytes
        expected = (pp - 1) * stage_inputs + weights + layer.recomputed_bytes
        assert workload.stage_memory(0).activations_bytes == expected
        one_f_one_b = transformer(model, **plan)
        assert one_f_one_b.stage_memory(0).activations_bytes == pp * stage_inputs + layer.recomputed_bytes
    graphs = unrolled_graphs(workload.graphs(2 * pp))
    for stage in range(pp):
        analytic = workload.stage_memory(stage).activations_bytes
        timeline = activation_peak(graphs[2 * stage])
        assert 0 <= analytic - timeline <= weight_bytes - layer.kept_bytes
    reason = unsupported(workload.config)  # dualpipev with TP is declined for its overlapped pairs first
    assert reason is not None and ("full recomputation" in reason or schedule == "dualpipev")


@pytest.mark.parametrize(("schedule", "chunks"), [("zb_h2", 1), ("zb_v", 2)])
def test_equal_pass_times_give_the_unit_slot_orders(schedule: str, chunks: int) -> None:
    """Weighing the greedy orders by pass times changes nothing while the times are equal, whatever their unit."""
    for stages, m in [(2, 4), (3, 7), (4, 8), (4, 13), (6, 12)]:
        equal = ((7, 7, 7),) * (chunks * stages)
        for stage in range(stages):
            unit = pipeline_order(schedule, stage, stages, m, chunks)
            assert pipeline_order(schedule, stage, stages, m, chunks, equal) == unit


@pytest.mark.parametrize(("schedule", "v"), [("zb_h2", 1), ("zb_v", 2)])
def test_flop_weighted_orders_are_the_graphs_and_the_memory_walks(schedule: str, v: int) -> None:
    """With ``schedule_times: flops`` each chunk's F, B and W weigh as their FLOPs (B more than F: the attention
    core's backward kernel; W the weighted GEMMs' gradients only); the graphs run that order and the analytic peak
    walks it, to the byte."""
    pp, m = 4, 8
    model = dict(SMALL, layers=2 * v * pp, hidden=256, seq_len=128)
    workload = transformer(model, pp=pp, global_batch=m, schedule=schedule, virtual_stages=v, schedule_times="flops")
    times = workload.pass_times()
    assert len(times) == v * pp and all(b > f > w > 0 for f, b, w in times[1:-1])
    graphs = unrolled_graphs(workload.graphs(pp))
    for stage in range(pp):
        assert activation_peak(graphs[stage]) == workload.stage_memory(stage).activations_bytes
    orders = [pipeline_order(schedule, s, pp, m, v, times) for s in range(pp)]
    assert orders != [pipeline_order(schedule, s, pp, m, v) for s in range(pp)]
    assert unsupported(workload.config) == (
        "schedule_times: flops (greedy orders weighed by the passes' FLOPs) is not modelled"
    )


def test_flop_weights_only_for_the_greedy_orders() -> None:
    with pytest.raises(ValueError, match="parallelism.schedule_times: flops weighs the passes of the zb_h2 and zb_v"):
        transformer(SMALL, pp=2, global_batch=4, schedule="zb_h1", schedule_times="flops")
