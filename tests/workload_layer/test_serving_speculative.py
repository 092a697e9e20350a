"""Speculative decoding in the request-level simulation: tokens per step, what a step runs, the memory the draft
takes, and bad settings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from stratasim.kernel.serving import Compute, Iteration, IterationShape
from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.metrics import serving_metrics
from stratasim.workload_layer.serving.requests import synthetic_requests
from stratasim.workload_layer.serving.simulation import simulate_pools
from stratasim.workload_layer.serving.speculative import Speculation, SpeculativeConfig
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload
from tests.workload_layer.test_serving import MODEL, MS, poisson

DRAFT = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "seq_len": 16384, "vocab": 32000}


def speculative_config(
    acceptance: float | None = 0.8, seed: int = 0, speculate: bool = True, **extra: Any
) -> ServingWorkloadConfig:
    """The small model of test_serving, one replica, 4 proposals a step from a 2-layer draft (none without
    ``speculate``), requests 20 s apart (never together) of 64 prompt and 1,001 output tokens."""
    speculative: dict[str, Any] = {"draft": DRAFT, "tokens": 4, **extra}
    if acceptance is not None:
        speculative["acceptance"] = acceptance
    requests = {**poisson("0.05/s", 40, 64, 1001, seed), "arrival": {"process": "fixed", "rate": "0.05/s"}}
    pool = {"speculative": speculative} if speculate else {}
    return ServingWorkloadConfig.model_validate({"model": MODEL, "pools": [pool], "requests": requests, "bucket": 16})


def decode_step_pricer(iteration: Iteration) -> int:
    """50 ms for an iteration with a prompt chunk, 10 ms for a decode step of any size."""
    return 50 * MS if iteration.shape.chunks else 10 * MS


def run(cfg: ServingWorkloadConfig) -> dict[str, float]:
    workload = ServingRequestsWorkload(cfg)
    setup = PoolSetup(cfg.pools[0], 100_000, decode_step_pricer, speculation=workload.speculation())
    pool_run = simulate_pools(synthetic_requests(cfg.requests), [setup], cfg.bucket)
    return serving_metrics(pool_run, cfg.slo, 1)


def test_an_acceptance_rate_gives_the_papers_expected_tokens_per_step() -> None:
    """Leviathan et al.: with i.i.d. acceptance alpha and k proposals, a step yields (1 - alpha^(k+1)) / (1 - alpha)
    tokens; the seeded draws average to it within their sampling error."""
    config = SpeculativeConfig.model_validate({"draft": DRAFT, "tokens": 4, "acceptance": 0.6})
    speculation = Speculation(4, config.chances(), seed=5)
    assert speculation.mean_tokens == pytest.approx((1 - 0.6**5) / 0.4, rel=1e-12)
    draws = np.array(speculation.sampler(0)(200_000))
    assert draws.min() == 0 and draws.max() == 4
    assert (draws + 1).mean() == pytest.approx(speculation.mean_tokens, abs=4 * (draws + 1).std() / 200_000**0.5)


@pytest.mark.parametrize(("acceptance", "tpot_ms"), [(1.0, 2.0), (0.0, 10.0)])
def test_at_the_extremes_a_step_yields_k_plus_one_tokens_or_one(acceptance: float, tpot_ms: float) -> None:
    """Every proposal accepted: 1,000 tokens after the first come 5 a step, 200 steps of 10 ms, TPOT 2 ms exactly;
    none accepted: one a step, 10 ms."""
    figures = run(speculative_config(acceptance))
    assert figures["tpot_mean_ps"] == figures["tpot_p99_ps"] == tpot_ms * MS
    assert figures["speculative_tokens_per_step"] == 1000 / (1000 * tpot_ms / 10)
    assert figures["ttft_mean_ps"] == 50 * MS


def test_tpot_at_low_load_is_a_step_over_the_mean_tokens_it_yields() -> None:
    figures = run(speculative_config(0.8))
    mean_tokens = (1 - 0.8**5) / 0.2
    assert figures["speculative_tokens_per_step"] == pytest.approx(mean_tokens, rel=0.02)
    assert figures["tpot_mean_ps"] == pytest.approx(10 * MS / mean_tokens, rel=0.02)


def test_an_acceptance_distribution_is_drawn_as_given() -> None:
    """Always exactly two of four accepted: 3 tokens a step; 1,000 tokens in 334 steps (the last yields the one
    token left)."""
    figures = run(speculative_config(None, accepted=[0, 0, 1, 0, 0]))
    assert figures["tpot_mean_ps"] == 334 * 10 * MS / 1000


def test_seeded_speculation_reproduces_and_a_new_seed_differs() -> None:
    cfg = speculative_config(0.7)
    assert run(cfg) == run(cfg) and run(speculative_config(0.7, seed=9)) != run(cfg)


def test_a_step_runs_the_drafts_k_passes_then_the_target_over_k_plus_one_positions() -> None:
    workload = ServingRequestsWorkload(speculative_config(0.8))
    shape = IterationShape(((64, 64),), 3, 128, 4, queries=5)
    works = workload.works(shape)
    assert [repeats for repeats, _ in works] == [1, 3, 1]

    def ops(work: Any, name: str) -> list[Any]:
        return [
            step.op
            for _, stage in enumerate(work.stages)
            for _, step in stage
            if isinstance(step, Compute) and step.op.name == name
        ]

    first, later, target = (work for _, work in works)
    assert ops(first, "qkv")[0].gemm.m == 64 + 3  # the prompt chunk and one token per decode, through the draft
    assert ops(later, "qkv")[0].gemm.m == 3
    assert ops(target, "qkv")[0].gemm.m == 64 + 3 * 5
    assert ops(target, "lm head")[0].gemm.m == 1 + 3 * 5  # the chunk's last position and every verified one
    assert ops(first, "qkv")[0].gemm.k == 256 and ops(target, "qkv")[0].gemm.k == 1024


def test_the_draft_takes_weights_and_a_share_of_every_block() -> None:
    """bf16 on one NPU: the draft's parameters join the weights, and a token's block space grows by the draft's
    2 layers x 2 KV heads x 64 x 2 x 2 B = 1,024 B beside the target's 4 x 4 x 64 x 2 x 2 = 4,096 B."""
    with_draft = ServingRequestsWorkload(speculative_config()).kv_budget(10**9)
    without = ServingRequestsWorkload(speculative_config(speculate=False)).kv_budget(10**9)
    assert with_draft.block_bytes == 16 * (4096 + 1024) and without.block_bytes == 16 * 4096
    assert with_draft.weights > without.weights
    assert with_draft.kv_bytes == without.kv_bytes - (with_draft.weights - without.weights)


@pytest.mark.parametrize(
    ("speculative", "pool", "message"),
    [
        ({"acceptance": 0.5, "accepted": [0.5, 0.5]}, {}, "give either acceptance (a rate) or accepted"),
        ({}, {}, "give either acceptance (a rate) or accepted"),
        ({"accepted": [0.5, 0.5]}, {}, "5 values, got 2"),
        ({"accepted": [0.5, 0.5, 0.5, 0, 0]}, {}, "probabilities summing to 1"),
        ({"acceptance": 1.5}, {}, "acceptance"),
        ({"acceptance": 0.5, "tokens": 0}, {}, "tokens"),
        ({"acceptance": 0.5, "draft": {**DRAFT, "vocab": 50000}}, {}, "draft.vocab (50000) must be the target's"),
        ({"acceptance": 0.5, "tp": 3}, {"parallelism": {"tp": 4}}, "speculative.tp (3) must be 1 or the pool's"),
        (
            {"acceptance": 0.5},
            {"parallelism": {"tp": 8}},
            "speculative.draft.heads (4) must be divisible by the draft's tp (8)",
        ),
        ({"acceptance": 0.5}, {"parallelism": {"pp": 2}}, "needs parallelism.pp 1"),
    ],
)
def test_bad_speculative_settings_say_what_is_wrong(
    speculative: dict[str, Any], pool: dict[str, Any], message: str
) -> None:
    section = {"draft": DRAFT, "tokens": 4, **speculative}
    data = {"model": MODEL, "pools": [{"speculative": section, **pool}], "requests": poisson("1/s", 1, 8, 8)}
    with pytest.raises(ValidationError, match=__import__("re").escape(message)):
        ServingWorkloadConfig.model_validate(data)


def test_speculation_on_a_disaggregated_pool_is_refused() -> None:
    pools = [{"role": "prefill"}, {"role": "decode", "speculative": {"draft": DRAFT, "tokens": 2, "acceptance": 0.5}}]
    with pytest.raises(
        ValidationError, match="workload.pools.1.speculative: speculative decoding runs on pools of role both"
    ):
        ServingWorkloadConfig.model_validate({"model": MODEL, "pools": pools, "requests": poisson("1/s", 1, 8, 8)})
