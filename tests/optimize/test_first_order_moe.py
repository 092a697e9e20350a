"""The first-order model of mixtures of experts against the event simulation: exact to the picosecond under even
routing, on small plans and on a sample of the DeepSeek-V3-like plan ladder's plans (every one of which it
screens)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from stratasim.config.study_file import Study, parse_study
from stratasim.explore import load_sweep, screening
from stratasim.explore.ranking import ranked
from stratasim.explore.space import expand, resolve
from stratasim.optimize import FirstOrderModel
from stratasim.optimize.first_order_plan import TRANSFERS_EXPOSED, unsupported
from stratasim.study.run import run_study
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.optimize.test_first_order_engine import BASE, _estimate

LADDER = Path(__file__).resolve().parents[2] / "examples" / "explore" / "deepseek_v3_like_plans_ladder.yaml"


def _moe_study(plan: dict[str, Any], model: dict[str, Any]) -> Study:
    data = copy.deepcopy(BASE)
    data["workload"]["model"].update(model)
    data["workload"]["parallelism"] = plan
    return parse_study(data, "tiny.yaml")


EXPERTS = {"experts": 8, "top_k": 2}
MIXTURES = [
    ({"tp": 4, "pp": 2, "dp": 4, "ep": 4, "global_batch": 32, "sequence_parallel": True}, EXPERTS),
    ({"tp": 1, "pp": 2, "dp": 16, "ep": 4, "global_batch": 32}, EXPERTS),  # dense and expert buckets queue
    ({"tp": 2, "pp": 2, "dp": 8, "ep": 8, "global_batch": 32, "zero": 1, "sequence_parallel": True}, EXPERTS),
    (
        {
            "tp": 2,
            "pp": 2,
            "dp": 8,
            "ep": 4,
            "global_batch": 32,
            "sequence_parallel": True,
            "zero": 2,
            "recompute": "full",
        },
        {**EXPERTS, "moe_every": 2},
    ),
    ({"tp": 1, "pp": 4, "dp": 8, "ep": 4, "global_batch": 32, "schedule": "zb_h1"}, EXPERTS),
    (
        {
            "tp": 2,
            "pp": 4,
            "dp": 4,
            "ep": 4,
            "global_batch": 32,
            "sequence_parallel": True,
            "schedule": "interleaved",
            "virtual_stages": 2,
        },
        {**EXPERTS, "activation": "swiglu"},
    ),
    (
        {
            "tp": 2,
            "pp": 2,
            "dp": 8,
            "ep": 4,
            "global_batch": 32,
            "sequence_parallel": True,
            "schedule": "zb_v",
            "virtual_stages": 2,
        },
        {"experts": 8, "top_k": 1, "capacity_factor": 1.25},
    ),
]


@pytest.mark.parametrize(("plan", "model"), MIXTURES, ids=lambda case: "-".join(f"{k}{v}" for k, v in case.items()))
def test_mixtures_of_experts_are_the_engines_to_the_picosecond(plan: dict[str, Any], model: dict[str, Any]) -> None:
    # Even routing: the dispatch and combine all-to-alls over the EP group on the stream, the expert GEMMs as the
    # builder sizes them, a period of moe_every layers as the unit; after the last backward pass the dense bucket
    # over the DP group and the expert one over the expert-data-parallel group, through the NPU's queues where they
    # share a dimension (first_order_queues).
    study = _moe_study(plan, model)
    estimate, terms = _estimate(study)
    assert estimate == run_study(study).result.total_time_ps
    assert sum(terms.values()) == estimate
    with FirstOrderModel(study) as first_order:
        estimated = int(first_order.estimate([{}]).memory_bytes[0])
    config = study.workload.config
    assert isinstance(config, TransformerConfig)
    workload = TransformerWorkload(config)
    assert estimated == max(workload.stage_memory(stage).total_bytes for stage in range(config.parallelism.pp))


@pytest.mark.parametrize(
    ("plan", "model"),
    [
        ({"tp": 1, "pp": 2, "dp": 16, "ep": 4, "global_batch": 32, "zero": 3}, EXPERTS),
        ({"tp": 4, "pp": 2, "dp": 4, "ep": 4, "global_batch": 32, "zero": 3, "sequence_parallel": True}, EXPERTS),
        (
            {"tp": 2, "pp": 1, "dp": 16, "ep": 8, "global_batch": 32, "zero": 3, "sequence_parallel": True},
            {**EXPERTS, "moe_every": 2},
        ),
        ({"tp": 1, "pp": 2, "dp": 16, "ep": 1, "global_batch": 32, "zero": 3}, EXPERTS),
    ],
    ids=["ep4", "tp4-sp", "moe-every-2", "ep1"],
)
def test_zero3_mixtures_are_within_eight_percent(plan: dict[str, Any], model: dict[str, Any]) -> None:
    # ZeRO-3's per-block approximation (test_first_order_engine), the expert shards gathered and scattered over
    # the expert-data-parallel group after the dense ones (queued where the groups share a dimension); the EP
    # all-to-alls that queue behind a prefetched gather on a shared dimension are not seen: 4-7.4 % on these plans.
    study = _moe_study(plan, model)
    simulated = run_study(study).result.total_time_ps
    assert abs(_estimate(study)[0] - simulated) <= 0.08 * simulated


@pytest.mark.parametrize(
    ("plan", "model", "reason"),
    [
        (
            {"tp": 1, "pp": 2, "dp": 16, "ep": 8, "global_batch": 64, "schedule": "dualpipe"},
            EXPERTS,
            "the dualpipe schedule with mixtures of experts",
        ),
        ({"tp": 1, "pp": 2, "dp": 16, "ep": 4, "global_batch": 32, "zero": 3, "hsdp": 2}, EXPERTS, "ZeRO-3 with mix"),
        ({"tp": 1, "pp": 2, "dp": 16, "ep": 4, "global_batch": 32}, {**EXPERTS, "moe_every": 3}, "moe_every"),
    ],
    ids=["dualpipe", "zero3-hsdp", "moe-every-3"],
)
def test_mixtures_it_cannot_price_are_declined(plan: dict[str, Any], model: dict[str, Any], reason: str) -> None:
    config = _moe_study(plan, model).workload.config
    assert isinstance(config, TransformerConfig)
    assert reason in (unsupported(config) or "")


def test_the_deepseek_v3_like_ladder_is_screened_and_exact_on_a_sample() -> None:
    """Every plan of the ladder is estimated but the three interleaved TP 4, PP 8 ones (ZeRO 0-2), whose pipeline
    transfers outlast a model chunk's forward pass (first_order_plan.transfers_hidden: the closed form was 1 % short
    there) and which the ladder simulates; the five it ranks fastest and every 60th plan, simulated, take the
    estimated time to the picosecond (plans whose EP group crosses the slow network included)."""
    sweep = load_sweep(LADDER)
    trials = list(enumerate(expand(sweep, resolve(sweep))))
    screened = screening.screen_trials(sweep, trials, ["total_time_ns"], 0, "screen")
    assert len(screened.records) + len(screened.declined) == len(trials) > 400
    declined = sorted(tuple(sorted(params.items())) for _, params in screened.declined)
    assert [dict(params)["workload.parallelism.zero"] for params in declined] == [0, 1, 2]
    for params in map(dict, declined):
        assert params["workload.parallelism.schedule"] == "interleaved"
        assert (params["workload.parallelism.tp"], params["workload.parallelism.pp"]) == (4, 8)
    best = ranked(sweep, screened.records)[:5]
    for record in [*best, *screened.records[::60]]:
        data = copy.deepcopy(sweep.base)
        data["workload"]["parallelism"].update({k.rsplit(".", 1)[-1]: v for k, v in record.params.items()})
        simulated = run_study(parse_study(data, "plan.yaml")).result.total_time_ps
        assert record.metrics["total_time_ps"] == simulated, record.params


def test_interleaved_plans_whose_transfers_outlast_a_chunk_pass_are_declined() -> None:
    """The ladder's TP 4, PP 8 interleaved plan, with its experts and dense: a transfer of 178 us against a chunk's
    forward pass of 104 us (dense), the closed form 1 % (MoE) and 6.3 % (dense) short of the engine."""
    base = load_sweep(LADDER).base
    for dense in (False, True):
        data = copy.deepcopy(base)
        data["workload"]["parallelism"].update(tp=4, pp=8, dp=1, ep=1, schedule="interleaved", virtual_stages=2)
        if dense:
            for key in ("experts", "top_k", "capacity_factor"):
                data["workload"]["model"].pop(key)
        with FirstOrderModel(parse_study(data, "plan.yaml")) as model:
            _, declined = model.estimate_supported([{}])
        assert declined == {0: TRANSFERS_EXPOSED}


@pytest.mark.parametrize(("bandwidth", "ratio"), [("57GB/s", 0.964), ("52GB/s", 1.050)])
def test_the_transfer_bound_is_where_the_engine_leaves_the_closed_form(bandwidth: str, ratio: float) -> None:
    """The ladder's TP 4, PP 8 interleaved plan with its pipeline dimension a little faster: a transfer of 0.964 of
    a chunk's shorter pass is estimated and the engine's time to the picosecond; at 1.050 the plan is declined,
    and the closed form would be 0.55 % short."""
    data = copy.deepcopy(load_sweep(LADDER).base)
    data["workload"]["parallelism"].update(tp=4, pp=8, dp=1, ep=1, schedule="interleaved", virtual_stages=2)
    data["network"]["topology"][1]["bandwidth"] = bandwidth
    study = parse_study(data, "plan.yaml")
    with FirstOrderModel(study) as model:
        estimates, declined = model.estimate_supported([{}])
    if ratio > 1:
        assert declined == {0: TRANSFERS_EXPOSED}
    else:
        assert int(estimates.iteration_ps[0]) == run_study(study).result.total_time_ps


@pytest.mark.parametrize("ep", [8, 4])
def test_dualpipev_with_expert_parallelism_is_within_five_percent(ep: int) -> None:
    """The DeepSeek-V3-like study under DualPipeV: each overlapped pair's all-to-alls partly hidden under the other
    pass's compute (first_order_walk._paired_end), 0.3 % here."""
    study = load_sweep(LADDER).base
    data = copy.deepcopy(study)
    data["workload"]["parallelism"].update(schedule="dualpipev", virtual_stages=2, ep=ep)
    parsed = parse_study(data, "plan.yaml")
    simulated = run_study(parsed).result.total_time_ps
    assert abs(_estimate(parsed)[0] - simulated) <= 0.05 * simulated


@pytest.mark.parametrize(
    "plan",
    [
        {"tp": 1, "pp": 4, "dp": 8, "ep": 4, "zero": 1},
        {"tp": 1, "pp": 2, "dp": 16, "ep": 8},
        {"tp": 1, "pp": 8, "dp": 4, "ep": 4, "zero": 2},
        {"tp": 1, "pp": 4, "dp": 8, "ep": 2, "micro_batch": 2},
    ],
    ids=["ep4-zero1", "pp2-ep8", "pp8-zero2", "ep2-mb2"],
)
def test_dualpipev_with_expert_parallelism_held_out_plans_are_within_five_percent(plan: dict[str, Any]) -> None:
    """Plans held out of the choice of first_order_walk._paired_end (chosen on TP and CP plans, which are now
    declined): the DeepSeek-V3-like study under DualPipeV with other EP, PP, ZeRO and micro-batch sizes, -1.7 % to
    +0.3 % against the engine."""
    data = copy.deepcopy(load_sweep(LADDER).base)
    data["workload"]["parallelism"].update(schedule="dualpipev", virtual_stages=2, **plan)
    parsed = parse_study(data, "plan.yaml")
    simulated = run_study(parsed).result.total_time_ps
    assert abs(_estimate(parsed)[0] - simulated) <= 0.05 * simulated
