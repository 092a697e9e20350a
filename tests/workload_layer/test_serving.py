"""The request-level serving simulation against a pricer whose answers are known: the physics of queues,
batching and the KV cache, independent of any backend (tests/study/test_serving_study.py prices with them)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from stratasim.kernel.serving import Iteration, IterationShape, KvMove
from stratasim.workload_layer.serving.config import SchedulerConfig, ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.iteration import iteration_shape
from stratasim.workload_layer.serving.metrics import serving_metrics
from stratasim.workload_layer.serving.request_config import RequestsConfig, parse_rate
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.routing import route
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.simulation import simulate_pool, simulate_pools

MS = 10**9  # picoseconds

MODEL = {"layers": 4, "hidden": 1024, "heads": 16, "kv_heads": 4, "seq_len": 16384, "vocab": 32000}


def linear_price(shape: IterationShape) -> int:
    """5 ms an iteration and 20 us a new token, plus 10 ns per decode context token: fixed, known prices."""
    return 5 * MS + shape.tokens * 20 * 10**6 + shape.decodes * shape.decode_context * 10**4


def linear_pricer(iteration: Iteration) -> int:
    """An iteration pricer of :func:`linear_price` prices (of the shape alone)."""
    return linear_price(iteration.shape)


def config(requests: dict[str, Any], **pool: Any) -> ServingWorkloadConfig:
    """A small model's serving workload with ``requests`` and ``pool``'s keys (its scheduler's among them)."""
    scheduler = {key: pool.pop(key) for key in list(pool) if key in SchedulerConfig.model_fields}
    return ServingWorkloadConfig.model_validate(
        {"model": MODEL, "pools": [{"replicas": 1, "scheduler": scheduler, **pool}], "requests": requests, "bucket": 16}
    )


def poisson(rate: str, count: int, prompt: int, output: int, seed: int = 0) -> dict[str, Any]:
    return {
        "count": count,
        "seed": seed,
        "arrival": {"process": "poisson", "rate": rate},
        "prompt": {"distribution": "fixed", "value": prompt},
        "output": {"distribution": "fixed", "value": output},
    }


def run(cfg: ServingWorkloadConfig, kv_blocks: int = 100_000) -> dict[str, float]:
    requests = synthetic_requests(cfg.requests)
    pool_run = simulate_pool(requests, cfg.pools[0], kv_blocks, linear_pricer, cfg.bucket)
    return serving_metrics(pool_run, cfg.slo, cfg.pools[0].replicas)


def test_at_very_low_load_ttft_is_one_prefill_and_tpot_one_decode_step() -> None:
    """Requests 10 s apart never meet: TTFT = price of a lone 512-token prefill, TPOT = mean price of the 7
    decode steps at contexts 513..519 (bucketed to 528 by 16 tokens), exactly."""
    cfg = config({**poisson("0.1/s", 20, 512, 8), "arrival": {"process": "fixed", "rate": "0.1/s"}})
    figures = run(cfg)
    prefill = linear_price(iteration_shape([(512, 512)], [], 1, 16))
    decodes = [linear_price(iteration_shape([], [512 + k], 1, 16)) for k in range(1, 8)]
    assert figures["ttft_p99_ps"] == figures["ttft_mean_ps"] == prefill
    assert figures["tpot_mean_ps"] == pytest.approx(sum(decodes) / 7, rel=1e-15)
    assert figures["queueing_p99_ps"] == 0 and figures["preemptions"] == 0


def test_littles_law_holds_on_the_simulated_queue() -> None:
    """Mean requests in the system (running and queued, time-weighted) = arrival rate x mean time in system, to
    the sampling error of 4,000 Poisson arrivals (and of sampling the state at iteration starts)."""
    figures = run(config(poisson("20/s", 4000, 256, 64, seed=3), max_batch=64, token_budget=2048))
    in_system = figures["running_mean"] + figures["queue_length_mean"]
    assert figures["batch_size_mean"] > 5  # a busy replica, not a trivially empty one
    assert in_system == pytest.approx(20 * figures["e2e_mean_ps"] / 1e12, rel=0.05)


def test_a_kv_cache_too_small_forces_preemptions_which_are_counted() -> None:
    """Each request ends holding 64 blocks (1024 tokens of 16); 32 running fill 2,048 blocks, not 512."""
    cfg = config(poisson("200/s", 300, 512, 512, seed=1), max_batch=32)
    roomy, tight = run(cfg, kv_blocks=4096), run(cfg, kv_blocks=512)
    assert roomy["preemptions"] == 0
    assert tight["preemptions"] > 0
    assert tight["requests"] == roomy["requests"] == 300  # every request still finishes
    assert tight["e2e_mean_ps"] > roomy["e2e_mean_ps"]
    assert tight["kv_peak_fraction"] <= 1.0


def test_a_preempted_sequence_recomputes_and_the_outstanding_tokens_balance() -> None:
    """Two requests of 16 prompt and 40 output tokens (4 blocks of 16 each by the end) in a cache of 5 blocks:
    both fit at first (one block each, then two), but when both need a third only one is left, and the younger
    is preempted; it prefills its prompt and generated tokens again once the older is done. Every token counted
    outstanding is worked off by the end."""
    cfg = config(poisson("1/s", 1, 16, 40), block_size=16)
    replica = ReplicaScheduler(cfg.pools[0].scheduler, 5)
    for index in range(2):
        replica.enqueue(Request(index, 0, 16, 40))
    assert replica.outstanding_tokens == 2 * (16 + 40)
    finished, now = [], 0
    while len(finished) < 2:
        batch = replica.next_batch(now)
        now += 1
        finished += replica.finish_iteration(batch, now)
    assert replica.preemptions >= 1 and replica.outstanding_tokens == 0 and replica.cache.used == 0
    assert all(sequence.generated == 40 for sequence in finished)


def test_chunked_prefill_lowers_p99_tpot_under_a_long_prompt_burst() -> None:
    """Short requests decode while a burst of 8k-token prompts arrives: without chunking each prompt runs alone
    in a ~170 ms iteration that stalls every decode; with 512-token chunks no iteration exceeds ~16 ms."""
    short = [Request(i, i * 5 * MS, 64, 200) for i in range(40)]
    burst = [Request(40 + i, 100 * MS + i * MS, 8000, 4) for i in range(8)]
    requests = sorted(short + burst, key=lambda r: r.arrival_ps)
    requests = [Request(i, r.arrival_ps, r.prompt_tokens, r.output_tokens) for i, r in enumerate(requests)]
    p99 = {}
    for chunked in (False, True):
        cfg = config(poisson("1/s", 1, 64, 4), chunked_prefill=chunked, token_budget=512 if chunked else 16384)
        pool_run = simulate_pool(requests, cfg.pools[0], 100_000, linear_pricer, cfg.bucket)
        p99[chunked] = serving_metrics(pool_run, cfg.slo, 1)["tpot_p99_ps"]
    assert p99[True] < 0.5 * p99[False]


def test_seeded_runs_reproduce_bit_for_bit_and_seeds_differ() -> None:
    cfg = config(
        {
            **poisson("30/s", 500, 0, 0, seed=7),
            "prompt": {"distribution": "lognormal", "median": 300, "sigma": 1.0, "max": 4000},
            "output": {"distribution": "uniform", "low": 1, "high": 300},
        }
    )
    assert run(cfg) == run(cfg)
    other = config({**cfg.requests.model_dump(mode="json"), "seed": 8})
    assert run(other) != run(cfg)


def test_arrival_processes_have_their_rate_and_burstiness() -> None:
    """Gaps of a gamma process have the mean 1/rate and the coefficient of variation asked; fixed gaps none."""
    for process, cv in (("poisson", 1.0), ("gamma", 3.0), ("fixed", 0.0)):
        arrival = {"process": process, "rate": "50/s", **({"cv": cv} if process == "gamma" else {})}
        requests = synthetic_requests(
            RequestsConfig.model_validate({**poisson("1/s", 20000, 8, 8), "arrival": arrival})
        )
        gaps = [b.arrival_ps - a.arrival_ps for a, b in zip(requests, requests[1:])]
        mean = sum(gaps) / len(gaps)
        spread = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5 / mean
        assert mean == pytest.approx(0.02e12, rel=0.05)
        assert spread == pytest.approx(cv, abs=0.1 * max(cv, 0.1))


def test_an_empirical_cdf_is_sampled_by_its_inverse() -> None:
    """Half the mass at 100 tokens or fewer, the rest up to 1000: the median draw is about 100."""
    cdf = {"distribution": "empirical", "points": [[10, 0.0], [100, 0.5], [1000, 1.0]]}
    requests = synthetic_requests(RequestsConfig.model_validate({**poisson("1/s", 10000, 8, 8), "prompt": cdf}))
    prompts = sorted(r.prompt_tokens for r in requests)
    assert 90 <= prompts[5000] <= 125 and prompts[0] >= 10 and prompts[-1] <= 1000


def test_the_round_robin_router_takes_replicas_in_turn() -> None:
    cfg = config(poisson("1000/s", 40, 64, 4), router="round_robin", replicas=4)
    requests = synthetic_requests(cfg.requests)
    pool_run = simulate_pool(requests, cfg.pools[0], 10_000, linear_pricer, cfg.bucket)
    assert {sample.engine for sample in pool_run.samples} == {0, 1, 2, 3}


def test_the_kv_aware_router_avoids_a_full_cache_the_token_count_misses() -> None:
    """Replica 0 decodes a 3,000-token prompt's last 2 tokens (188 blocks held, 2 tokens outstanding); replica 1
    a 16-token prompt with 500 tokens to go (2 blocks, 500 outstanding). Counting tokens sends the next request to
    replica 0; counting KV blocks, to replica 1."""
    cfg = config(poisson("1/s", 1, 16, 4))
    replicas = [ReplicaScheduler(cfg.pools[0].scheduler, 1000) for _ in range(2)]
    for replica, (prompt, output) in zip(replicas, ((3000, 3), (16, 501))):
        replica.enqueue(Request(0, 0, prompt, output))
        replica.finish_iteration(replica.next_batch(0), 1)  # prefilled, first token out
    assert [replica.kv_load() for replica in replicas] == [188, 1]
    assert route("least_outstanding_tokens", replicas, 7) == 0
    assert route("least_kv_load", replicas, 7) == 1
    assert route("round_robin", replicas, 7) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"requests": {**poisson("1/s", 1, 16000, 1000)}}, "exceed workload.model.seq_len (16384)"),
        ({"requests": {**poisson("0/s", 1, 8, 8)}}, "a request rate must be positive"),
        ({"requests": {**poisson("-3/s", 1, 8, 8)}}, "a request rate must be positive"),
        ({"requests": {**poisson("20", 1, 8, 8)}}, "20 has no unit; write it with one, e.g. 20/s"),
        (
            {"pools": [{"parallelism": {"tp": 3}}]},
            "workload.model.heads (16) must be divisible by workload.pools.0.parallelism.tp (3)",
        ),
        (
            {"pools": [{"parallelism": {"pp": 3}}]},
            "workload.model.layers (4) must be divisible by workload.pools.0.parallelism.pp (3)",
        ),
        (
            {"pools": [{"scheduler": {"chunked_prefill": False, "token_budget": 4096}}]},
            "scheduler.token_budget (4096) must hold",
        ),
        (
            {"pools": [{"role": "prefill"}]},
            "workload.pools: prefill pools need a decode pool to hand their requests to",
        ),
        ({"pools": [{"role": "decode"}]}, "workload.pools: decode pools need a prefill pool to receive requests from"),
        ({"pools": [{}, {"role": "decode"}]}, "role both (a replica runs whole requests) cannot mix with prefill"),
        (
            {"pools": [{"role": "prefill", "router": "round_robin"}, {"role": "decode"}, {"role": "prefill"}]},
            "the prefill pools route across all their replicas with one router, but name least_outstanding_tokens and round_robin",
        ),
        ({"pools": [{"role": "mixed"}]}, "role"),
    ],
)
def test_bad_serving_input_says_what_is_wrong(change: dict[str, Any], message: str) -> None:
    data = {"model": MODEL, "pools": [{}], "requests": poisson("1/s", 1, 8, 8), **change}
    with pytest.raises(ValidationError, match=__import__("re").escape(message)):
        ServingWorkloadConfig.model_validate(data)


def test_rates_read_with_their_units() -> None:
    assert parse_rate("1200/min") == 20.0 and parse_rate("0.5/ms") == 500.0 and parse_rate("2 / s") == 2.0


def disaggregated(requests: dict[str, Any], prefill: int = 1, decode: int = 1) -> ServingWorkloadConfig:
    """The small model with ``prefill`` prefill replicas and ``decode`` decode replicas."""
    pools = [
        {"name": "prefill", "role": "prefill", "replicas": prefill},
        {"name": "decode", "role": "decode", "replicas": decode},
    ]
    return ServingWorkloadConfig.model_validate({"model": MODEL, "pools": pools, "requests": requests, "bucket": 16})


TRANSFER_PS = 3 * MS


def fixed_transfer(source: int, moves: tuple[KvMove, ...]) -> tuple[int, ...]:
    """Every KV move takes 3 ms."""
    return tuple(TRANSFER_PS for _ in moves)


def run_pools(cfg: ServingWorkloadConfig, kv_blocks: int = 100_000) -> dict[str, float]:
    setups = [PoolSetup(pool, kv_blocks, linear_pricer) for pool in cfg.pools]
    pool_run = simulate_pools(synthetic_requests(cfg.requests), setups, cfg.bucket, fixed_transfer)
    return serving_metrics(pool_run, cfg.slo, sum(pool.replicas for pool in cfg.pools))


def test_disaggregated_ttft_is_the_prefill_and_the_kv_move_shows_in_tpot() -> None:
    """One request at a time on a prefill and a decode replica: TTFT is the lone prefill's price (the first token
    is sampled on the prefill replica), and the 3 ms KV move delays the second token, so TPOT over the 7 later
    tokens is (3 ms + the 7 decode steps' prices) / 7, exactly."""
    cfg = disaggregated({**poisson("0.1/s", 10, 512, 8), "arrival": {"process": "fixed", "rate": "0.1/s"}})
    figures = run_pools(cfg)
    prefill = linear_price(iteration_shape([(512, 512)], [], 1, 16))
    decodes = [linear_price(iteration_shape([], [512 + k], 1, 16)) for k in range(1, 8)]
    assert figures["ttft_p99_ps"] == figures["ttft_mean_ps"] == prefill
    assert figures["tpot_mean_ps"] == pytest.approx((TRANSFER_PS + sum(decodes)) / 7, rel=1e-15)
    assert figures["kv_transfers"] == 10 and figures["kv_transfer_p99_ps"] == TRANSFER_PS


def test_disaggregation_keeps_decodes_out_of_the_prompts_ttft() -> None:
    """At load, a colocated replica's iterations carry every running decode beside the prompts (each decode adds
    its token and its context read to the price), so prompts wait behind them; a prefill replica runs prompts
    alone. The same prompts on as many replicas either way (two colocated, or two prefill replicas handing off to a
    decode replica): the prefill pool's TTFT, mean and p99, is at most the colocated pool's."""
    requests = poisson("30/s", 400, 1024, 128, seed=3)
    colocated = run(config(requests, replicas=2))
    split = run_pools(disaggregated(requests, prefill=2, decode=1))
    assert split["ttft_p99_ps"] <= colocated["ttft_p99_ps"] and split["ttft_mean_ps"] <= colocated["ttft_mean_ps"]
    assert split["kv_transfers"] == 400


def test_a_decode_replica_short_of_blocks_queues_what_arrives_and_preempts_by_recompute() -> None:
    """The decode replica's cache holds 40 blocks of 16 tokens: prompts of 300 tokens (19 blocks) arriving
    together cannot all be admitted, so some wait for blocks and others are preempted as contexts grow; every
    request still finishes with all its tokens."""
    cfg = disaggregated({**poisson("1000/s", 12, 300, 40), "seed": 1})
    setups = [PoolSetup(cfg.pools[0], 1000, linear_pricer), PoolSetup(cfg.pools[1], 40, linear_pricer)]
    pool_run = simulate_pools(synthetic_requests(cfg.requests), setups, cfg.bucket, fixed_transfer)
    assert all(s.generated == 40 and s.finish_ps > 0 and s.blocks == 0 for s in pool_run.sequences)
    assert pool_run.preemptions > 0 and max(pool_run.kv_peak_blocks[1:]) <= 40


def test_kv_moves_overlapping_in_time_queue_at_the_replicas_they_share() -> None:
    """Two prefill replicas finish a prompt 1 us apart and hand off to one decode replica: its links take one 3 ms
    move, then the other, so the second arrives 6 ms after the first hand-off, 6 ms less 1 us after its own (its
    transfer time counts the wait). With a decode replica each, the moves share no replica and both take 3 ms."""
    requests = {**poisson("1000/s", 2, 512, 4), "arrival": {"process": "fixed", "rate": "1000000/s"}}
    one = disaggregated(requests, prefill=2, decode=1)
    setups = [PoolSetup(pool, 100_000, linear_pricer) for pool in one.pools]
    # Round robin sends the two requests, 1 us apart, to the two prefill replicas: their prompts end 1 us apart.
    shared = simulate_pools(synthetic_requests(one.requests), setups, one.bucket, fixed_transfer)
    assert sorted(shared.transfers_ps) == [TRANSFER_PS, 2 * TRANSFER_PS - 10**6]
    two = disaggregated(requests, prefill=2, decode=2)
    setups = [PoolSetup(pool, 100_000, linear_pricer) for pool in two.pools]
    apart = simulate_pools(synthetic_requests(two.requests), setups, two.bucket, fixed_transfer)
    assert apart.transfers_ps == [TRANSFER_PS, TRANSFER_PS]
