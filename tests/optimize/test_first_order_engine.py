"""The first-order model against the event simulation of small transformer plans on the analytical network.

Where every NPU of a stage runs alike and the network has no state, a plan's iteration is its busiest stage's
passes, the bubble, the pipeline transfers of the fill and the drain, and the gradient reduction and optimizer step
after the last backward pass (``docs/explanation/first-order-model.md``): on these plans that is the engine's time
to the picosecond. With a network so fast that no transfer matters, the interleaved schedule's own order adds a
few microseconds the closed form leaves out (within 0.5 % here).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from stratasim.config.study_file import Study, load_study, parse_study
from stratasim.optimize import TERMS, FirstOrderModel
from stratasim.study.run import run_study
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.workload import TransformerWorkload

BASE: dict[str, Any] = {
    "name": "tiny",
    "workload": {
        "kind": "transformer",
        "model": {"layers": 16, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000},
        "precision": "bf16",
    },
    "system": {"algorithm": "ring"},
    "network": {
        "backend": "analytical",
        "topology": [
            {"kind": "ring", "size": 4, "bandwidth": "300GB/s", "latency": "500ns"},
            {"kind": "ring", "size": 2, "bandwidth": "100GB/s", "latency": "1us"},
            {"kind": "switch", "size": 4, "bandwidth": "50GB/s", "latency": "2us"},
        ],
    },
    "compute": {"backend": "roofline", "device": "h100"},
}

EXACT = [
    {"tp": 4, "pp": 2, "dp": 4, "schedule": "1f1b", "global_batch": 32},
    {"tp": 4, "pp": 2, "dp": 4, "schedule": "gpipe", "global_batch": 32},
    {"tp": 2, "pp": 4, "dp": 4, "schedule": "interleaved", "virtual_stages": 4, "global_batch": 32},
    {"tp": 4, "pp": 4, "dp": 2, "micro_batch": 2, "global_batch": 32, "recompute": "full", "zero": 1},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "sequence_parallel": True, "recompute": "selective"},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "scatter_gather": True, "zero": 2},
    {"tp": 8, "pp": 1, "dp": 4, "global_batch": 32, "zero": 1},
    {"tp": 1, "pp": 1, "dp": 32, "global_batch": 32},
]


def _study(plan: dict[str, Any], **system: Any) -> Study:
    data = copy.deepcopy(BASE)
    data["workload"]["parallelism"] = plan
    data["system"].update(system)
    return parse_study(data, "tiny.yaml")


def _estimate(study: Study) -> tuple[int, dict[str, int]]:
    with FirstOrderModel(study) as model:
        estimates = model.estimate([{}])
    return int(estimates.iteration_ps[0]), {term: int(estimates.terms[term][0]) for term in TERMS}


@pytest.mark.parametrize("plan", EXACT, ids=lambda plan: "-".join(f"{k}{v}" for k, v in plan.items()))
def test_iteration_is_the_engines_to_the_picosecond(plan: dict[str, Any]) -> None:
    study = _study(plan)
    estimate, terms = _estimate(study)
    assert estimate == run_study(study).result.total_time_ps
    assert sum(terms.values()) == estimate


def test_chunked_collectives_stay_exact_on_these_plans() -> None:
    # splits: 4 makes each collective's time an approximation in general (first_order.collective_ps); here the
    # chunks of every collective pipeline through its phases exactly as the closed form adds them up.
    study = _study({"tp": 4, "pp": 2, "dp": 4, "global_batch": 32}, splits=4)
    assert _estimate(study)[0] == run_study(study).result.total_time_ps


def test_interleaved_order_on_a_free_network_is_within_half_a_percent() -> None:
    data = copy.deepcopy(BASE)
    data["workload"]["parallelism"] = {"tp": 2, "pp": 4, "dp": 4, "schedule": "interleaved", "virtual_stages": 2}
    data["workload"]["parallelism"]["global_batch"] = 32
    for dim in data["network"]["topology"]:
        dim.update(bandwidth="1000TB/s", latency="1ns")
    free = parse_study(data, "tiny.yaml")
    simulated = run_study(free).result.total_time_ps
    assert abs(_estimate(free)[0] - simulated) <= 0.005 * simulated


@pytest.mark.parametrize(
    "system",
    [
        {"endpoint_delay": "50ns"},
        {"algorithm": "direct"},
        {"algorithm": ["ring", "ring", "halving_doubling"]},
        {"collective_optimization": "local_bw_aware"},
    ],
    ids=lambda system: next(iter(system)),
)
def test_the_system_options_collectives_read_keep_it_exact(system: dict[str, Any]) -> None:
    plan = {"tp": 2, "pp": 4, "dp": 4, "schedule": "interleaved", "virtual_stages": 2, "global_batch": 32, "zero": 1}
    study = _study(plan, **system)
    assert _estimate(study)[0] == run_study(study).result.total_time_ps


def test_reductions_from_local_memory_keep_1f1b_exact_and_interleaved_within_a_thousandth() -> None:
    # Interleaved, the reductions shift which transfer waits on which pass by a microsecond or two (1.2e-4 here).
    study = _study({"tp": 4, "pp": 2, "dp": 4, "global_batch": 32}, local_mem_bw="200GB/s")
    assert _estimate(study)[0] == run_study(study).result.total_time_ps
    plan = {"tp": 2, "pp": 4, "dp": 4, "schedule": "interleaved", "virtual_stages": 2, "global_batch": 32, "zero": 1}
    study = _study(plan, local_mem_bw="200GB/s")
    simulated = run_study(study).result.total_time_ps
    assert abs(_estimate(study)[0] - simulated) <= 1e-3 * simulated


@pytest.mark.parametrize("plan", EXACT[:6], ids=lambda plan: "-".join(f"{k}{v}" for k, v in plan.items()))
def test_memory_is_the_builders_peak(plan: dict[str, Any]) -> None:
    study = _study(plan)
    with FirstOrderModel(study) as model:
        estimated = int(model.estimate([{}]).memory_bytes[0])
    config = study.workload.config
    assert isinstance(config, TransformerConfig)
    workload = TransformerWorkload(config)
    assert estimated == max(workload.stage_memory(stage).total_bytes for stage in range(config.parallelism.pp))


@pytest.mark.parametrize(
    "plan",
    [
        {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "zero": 3},
        {"tp": 2, "pp": 1, "dp": 16, "global_batch": 32, "zero": 3},
        {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "zero": 3, "shard_casts": True},
    ],
    ids=["tp4-pp2", "tp2-pp1", "shard-casts"],
)
def test_zero3_is_within_three_percent(plan: dict[str, Any]) -> None:
    # ZeRO-3's gathers and scatters are charged per block (first_order_passes.with_zero3), not per message: an
    # approximation at the ends of each pass, within 3 % on these DP-heavy plans.
    study = _study(plan)
    simulated = run_study(study).result.total_time_ps
    assert abs(_estimate(study)[0] - simulated) <= 0.03 * simulated


def test_zero3_calibration_study_is_within_a_tenth_of_a_percent() -> None:
    study = load_study(Path(__file__).resolve().parents[2] / "examples" / "calibration" / "mpt_7b_h100.yaml")
    simulated = run_study(study).result.total_time_ps
    assert abs(_estimate(study)[0] - simulated) <= 0.001 * simulated


CONTEXT_PARALLEL = [
    {"tp": 4, "cp": 2, "pp": 2, "dp": 2, "global_batch": 16},
    {"tp": 2, "cp": 4, "pp": 2, "dp": 2, "global_batch": 16},  # CP across two dimensions: unequal ring links
    {"tp": 4, "cp": 2, "pp": 2, "dp": 2, "global_batch": 16, "cp_comm_type": "a2a"},
    {"tp": 4, "cp": 2, "pp": 2, "dp": 2, "global_batch": 16, "recompute": "full", "zero": 1},
    {"tp": 2, "cp": 2, "pp": 2, "dp": 4, "global_batch": 16, "schedule": "interleaved", "virtual_stages": 2},
    {"tp": 1, "cp": 8, "pp": 1, "dp": 4, "global_batch": 16, "zero": 2},
    {"tp": 4, "cp": 2, "pp": 2, "dp": 2, "global_batch": 16, "cp_comm_type": "all_gather"},
    {"tp": 2, "cp": 4, "pp": 2, "dp": 2, "global_batch": 16, "cp_comm_type": "all_gather", "recompute": "full"},
    {"tp": 2, "cp": 2, "pp": 4, "dp": 2, "global_batch": 16, "cp_comm_type": "all_gather", "schedule": "zb_h1"},
    {"tp": 1, "cp": 8, "pp": 1, "dp": 4, "global_batch": 16, "cp_comm_type": "all_gather", "zero": 2},
]


@pytest.mark.parametrize("plan", CONTEXT_PARALLEL, ids=lambda plan: "-".join(f"{k}{v}" for k, v in plan.items()))
def test_context_parallelism_is_the_engines_to_the_picosecond(plan: dict[str, Any]) -> None:
    # Ring attention's core walked step by step as ring_attention.py emits it (first_order_passes.ring_core_ps),
    # Transformer Engine's merges after each kernel included; Ulysses' all-to-alls and the all-gather variant's
    # gather and scatter on the stream, the gradients reduced over the DP x CP group.
    study = _study(plan)
    estimate, terms = _estimate(study)
    assert estimate == run_study(study).result.total_time_ps
    assert sum(terms.values()) == estimate


def test_hierarchical_context_parallelism_is_declined() -> None:
    # Its all-to-all runs within groups of cp_a2a ranks and its ring across them; the model would price both over
    # the whole CP group (39 % off on this plan), so it declines.
    plan = {"tp": 2, "cp": 4, "pp": 2, "dp": 2, "global_batch": 16, "cp_comm_type": "a2a+p2p", "cp_a2a": 2}
    with FirstOrderModel(_study(plan)) as model:
        _, declined = model.estimate_supported([{}])
    assert declined[0] == "hierarchical context parallelism (cp_comm_type: a2a+p2p) is not modelled"


@pytest.mark.parametrize(
    "plan",
    [
        {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "zero": 3, "hsdp": 2},
        {"tp": 4, "pp": 1, "dp": 8, "global_batch": 32, "zero": 3, "hsdp": 2},
        {"tp": 2, "cp": 2, "pp": 2, "dp": 4, "global_batch": 16, "zero": 3, "hsdp": 2},
        {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "zero": 3, "hsdp": 2, "shard_casts": True},
    ],
    ids=["queued", "apart", "cp2", "shard-casts"],
)
def test_hsdp_is_within_six_percent(plan: dict[str, Any]) -> None:
    # ZeRO-3's per-block approximation (above), plus the replicas' all-reduce charged to each block's backward pass
    # where it queues on the shard group's dimension and otherwise only the last block's after the pipeline:
    # within 5 % on these plans (1-5 %).
    study = _study(plan)
    simulated = run_study(study).result.total_time_ps
    assert abs(_estimate(study)[0] - simulated) <= 0.06 * simulated


ZERO_BUBBLE = [
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "schedule": "zb_h1"},
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 32, "schedule": "zb_h1", "zero": 1, "sequence_parallel": True},
    {
        "tp": 2,
        "pp": 4,
        "dp": 4,
        "global_batch": 32,
        "schedule": "zb_h1",
        "scatter_gather": True,
        "recompute": "selective",
    },
    {"tp": 2, "cp": 2, "pp": 4, "dp": 2, "global_batch": 16, "schedule": "zb_h1"},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "schedule": "zb_v", "virtual_stages": 2},
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 32, "schedule": "zb_v", "virtual_stages": 2, "scatter_gather": True},
    {"tp": 1, "pp": 4, "dp": 8, "global_batch": 64, "schedule": "dualpipev", "virtual_stages": 2},
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 32, "schedule": "zb_h2", "zero": 1, "sequence_parallel": True},
    {"tp": 1, "pp": 4, "dp": 8, "global_batch": 64, "schedule": "dualpipe"},
    {"tp": 1, "pp": 4, "dp": 8, "global_batch": 64, "schedule": "dualpipe", "zero": 1},
    {"tp": 1, "pp": 2, "dp": 16, "global_batch": 64, "schedule": "dualpipe", "zero": 2},
]


@pytest.mark.parametrize("plan", ZERO_BUBBLE, ids=lambda plan: "-".join(f"{k}{v}" for k, v in plan.items()))
def test_split_schedules_walked_pass_by_pass_are_the_engines_to_the_picosecond(plan: dict[str, Any]) -> None:
    # Each stage's F, B and W passes in pipeline_order's order, each when the stage is free and its input has
    # crossed (first_order_walk.stage_ends; ZB-V's V hands over locally at its bottom); the gradients reduced
    # after the stage's last W. DualPipe's and DualPipeV's overlapped pairs run back to back: exact without TP or
    # CP, whose communication the engine hides under the paired pass (declined); DualPipe's mirror all-reduce
    # queued beside the DP reduction.
    study = _study(plan)
    estimate, terms = _estimate(study)
    assert estimate == run_study(study).result.total_time_ps
    assert sum(terms.values()) == estimate


@pytest.mark.parametrize(
    "plan",
    [
        ZERO_BUBBLE[1],
        ZERO_BUBBLE[3],
        ZERO_BUBBLE[5],
        ZERO_BUBBLE[6],
        ZERO_BUBBLE[7],
        CONTEXT_PARALLEL[1],
        CONTEXT_PARALLEL[5],
        {**EXACT[0], "zero": 3, "hsdp": 2},
    ],
    ids=["zb_h1", "zb_h1-cp2", "zb_v", "dualpipev", "dualpipe", "cp4", "cp8", "hsdp2"],
)
def test_memory_is_the_builders_peak_with_cp_hsdp_and_split_schedules(plan: dict[str, Any]) -> None:
    study = _study(plan)
    with FirstOrderModel(study) as model:
        estimated = int(model.estimate([{}]).memory_bytes[0])
    config = study.workload.config
    assert isinstance(config, TransformerConfig)
    workload = TransformerWorkload(config)
    assert estimated == max(workload.stage_memory(stage).total_bytes for stage in range(config.parallelism.pp))


BUCKETS = [
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "dp_bucket": "20MB"},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "dp_bucket": "50MB", "schedule": "gpipe", "zero": 1},
    {"tp": 8, "pp": 1, "dp": 4, "global_batch": 32, "dp_bucket": "25MB", "zero": 2, "sequence_parallel": True},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "dp_bucket": "8MB", "scatter_gather": True, "recompute": "full"},
    {"tp": 2, "pp": 2, "dp": 8, "global_batch": 32, "dp_bucket": "20MB"},
]


@pytest.mark.parametrize("plan", BUCKETS, ids=lambda plan: "-".join(f"{k}{v}" for k, v in plan.items()))
def test_gradient_buckets_are_the_engines_to_the_picosecond(plan: dict[str, Any]) -> None:
    # Each bucket reduced when its last block's backward pass ends (head first, embedding last), one collective
    # after another on the DP group, the rest after the pass (first_order_plan.PlanPricer._bucketed).
    study = _study(plan)
    estimate, terms = _estimate(study)
    assert estimate == run_study(study).result.total_time_ps
    assert sum(terms.values()) == estimate


@pytest.mark.parametrize(
    ("plan", "reason"),
    [
        ({"tp": 2, "pp": 1, "dp": 16, "global_batch": 32, "dp_bucket": "20MB"}, "sharing a network dimension"),
        ({**BUCKETS[0], "schedule": "interleaved", "virtual_stages": 2}, "interleaved or a split schedule"),
        ({**BUCKETS[0], "schedule": "zb_h1"}, "interleaved or a split schedule"),
    ],
    ids=["shared-dimension", "interleaved", "zb_h1"],
)
def test_gradient_buckets_it_cannot_price_are_declined(plan: dict[str, Any], reason: str) -> None:
    with FirstOrderModel(_study(plan)) as model:
        _, declined = model.estimate_supported([{}])
    assert reason in declined[0]


UNEVEN_BATCHES = [
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "batch_split": [10, 8, 8, 6]},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "batch_split": [6, 8, 8, 10], "zero": 1, "schedule": "gpipe"},
    {
        "tp": 2,
        "pp": 4,
        "dp": 4,
        "global_batch": 64,
        "batch_split": [12, 20, 16, 16],
        "schedule": "interleaved",
        "virtual_stages": 2,
    },
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 32, "batch_split": [8, 10, 8, 6], "schedule": "zb_h1"},
    {"tp": 8, "pp": 1, "dp": 4, "global_batch": 32, "batch_split": [9, 7, 8, 8], "zero": 2},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "batch_split": [10, 8, 8, 6], "dp_bucket": "20MB", "zero": 1},
]


@pytest.mark.parametrize("plan", UNEVEN_BATCHES, ids=lambda plan: "-".join(f"{k}{v}" for k, v in plan.items()))
def test_uneven_batch_splits_are_the_engines_to_the_picosecond(plan: dict[str, Any]) -> None:
    # The busiest replica's pipeline sets the pace: the others wait for it at each gradient reduction
    # (first_order_plan.replica_micro_batches); its activations are the peak.
    study = _study(plan)
    estimate, terms = _estimate(study)
    assert estimate == run_study(study).result.total_time_ps
    assert sum(terms.values()) == estimate
    with FirstOrderModel(study) as model:
        estimated = int(model.estimate([{}]).memory_bytes[0])
    config = study.workload.config
    assert isinstance(config, TransformerConfig)
    assert estimated == max(TransformerWorkload(config).memory_per_npu_bytes())


OVERLAPPED_PAIRS = [
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 64, "schedule": "dualpipev", "virtual_stages": 2},
    {
        "tp": 4,
        "pp": 4,
        "dp": 2,
        "global_batch": 64,
        "schedule": "dualpipev",
        "virtual_stages": 2,
        "sequence_parallel": True,
    },
    {"tp": 2, "pp": 2, "dp": 8, "global_batch": 64, "schedule": "dualpipe"},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 64, "schedule": "dualpipe", "sequence_parallel": True, "zero": 1},
    {
        "tp": 2,
        "pp": 4,
        "dp": 4,
        "global_batch": 64,
        "schedule": "dualpipev",
        "virtual_stages": 2,
        "sequence_parallel": True,
        "recompute": "selective",
    },
    {"tp": 1, "cp": 2, "pp": 4, "dp": 4, "global_batch": 64, "schedule": "dualpipev", "virtual_stages": 2},
]


HELD_OUT_PAIRS = [
    {"tp": 4, "pp": 4, "dp": 2, "global_batch": 32, "schedule": "dualpipev", "virtual_stages": 2},
    {"tp": 2, "pp": 8, "dp": 2, "global_batch": 64, "schedule": "dualpipev", "virtual_stages": 2},
    {
        "tp": 2,
        "pp": 2,
        "dp": 8,
        "global_batch": 64,
        "schedule": "dualpipev",
        "virtual_stages": 2,
        "sequence_parallel": True,
        "zero": 2,
    },
    {"tp": 2, "cp": 2, "pp": 4, "dp": 2, "global_batch": 32, "schedule": "dualpipev", "virtual_stages": 2},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 64, "micro_batch": 2, "schedule": "dualpipe"},
    {
        "tp": 8,
        "pp": 2,
        "dp": 2,
        "global_batch": 32,
        "schedule": "dualpipev",
        "virtual_stages": 2,
        "sequence_parallel": True,
    },
    {"tp": 8, "pp": 2, "dp": 2, "global_batch": 32, "schedule": "dualpipe"},
    {"tp": 2, "pp": 2, "dp": 8, "global_batch": 64, "micro_batch": 2, "schedule": "dualpipe", "zero": 2},
    {"tp": 2, "cp": 2, "pp": 2, "dp": 4, "global_batch": 32, "schedule": "dualpipe"},
    {
        "tp": 1,
        "cp": 4,
        "pp": 4,
        "dp": 2,
        "global_batch": 32,
        "schedule": "dualpipev",
        "virtual_stages": 2,
        "cp_comm_type": "a2a",
    },
]
"""Plans held out of the choice of the old pass-level rule for overlapped pairs (docs/explanation/first-order-model.md
lists its figures on these and five more): -2.6 % to +6.5 % against the engine, outside its stated 5 %."""


@pytest.mark.parametrize(
    "plan", OVERLAPPED_PAIRS + HELD_OUT_PAIRS, ids=lambda plan: "-".join(f"{k}{v}" for k, v in plan.items())
)
def test_overlapped_pairs_with_tp_or_cp_are_declined(plan: dict[str, Any]) -> None:
    # DualPipe's and DualPipeV's overlapped pairs with TP or CP: the engine hides one pass's communication under the
    # other's compute, operator by operator. Taking each pair midway between both passes' communication hidden and
    # one's was chosen on OVERLAPPED_PAIRS (-0.2 % to +3.0 %) and missed 5 % on held-out plans (+5.8 %, +6.5 %);
    # hiding min(one's communication, the other's compute) each way missed by up to 27 %. Declined.
    with FirstOrderModel(_study(plan)) as model:
        _, declined = model.estimate_supported([{}])
    assert declined[0].startswith(f"the {plan['schedule']} schedule with TP or CP is not modelled")
