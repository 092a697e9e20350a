"""Automatic prefix caching (``scheduler.prefix_caching``) against test_serving's known pricer: what hits, what it
saves, what is evicted, and that with nothing to reuse nothing changes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.iteration import iteration_shape
from stratasim.workload_layer.serving.metrics import serving_metrics
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.prefix_cache import PrefixCache, block_key, prompt_block_keys
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.simulation import simulate_pools
from tests.workload_layer.test_serving import MODEL, MS, config, fixed_transfer, linear_price, linear_pricer, poisson

SECOND = 1000 * MS
CACHED = {"prefix_caching": True, "block_size": 16}


def served(requests: list[Request], kv_blocks: int = 100_000, **pool: Any) -> tuple[PoolRun, dict[str, float]]:
    cfg = config(poisson("1/s", 1, 8, 8), **{**CACHED, **pool})
    run = simulate_pools(requests, [PoolSetup(cfg.pools[0], kv_blocks, linear_pricer)], cfg.bucket)
    return run, serving_metrics(run, cfg.slo, 1)


def ttft(run: PoolRun, index: int) -> int:
    sequence = run.sequences[index]
    return sequence.first_token_ps - sequence.request.arrival_ps


def two_turns(sessions: int) -> list[Request]:
    """``sessions`` conversations, one at a time: turn 0 of 100 prompt tokens and 10 output tokens, turn 1 a
    second later of 100 + 10 + 30 = 140 prompt tokens and 5 output tokens."""
    requests = []
    for session in range(sessions):
        start = 2 * session * SECOND
        requests.append(Request(2 * session, start, 100, 10, session=session, turn=0))
        requests.append(Request(2 * session + 1, start + SECOND, 140, 5, session=session, turn=1))
    return requests


def test_block_keys_follow_the_shared_prefix_then_the_session_then_the_request() -> None:
    """Blocks of 16 wholly inside a 40-token shared prefix are the prefix's (blocks 0 and 1; block 2 ends at 48),
    the rest the session's; without a session the request's own; a partial last block has no key."""
    request = Request(7, 0, 70, 1, session=3, shared_prefix=5, shared_tokens=40)
    assert prompt_block_keys(request, 16) == (("p", 5, 0), ("p", 5, 1), ("s", 3, 2), ("s", 3, 3))
    assert prompt_block_keys(Request(7, 0, 33, 1), 16) == (("r", 7, 0), ("r", 7, 1))
    assert block_key(Request(7, 0, 33, 1, shared_prefix=1, shared_tokens=16), 0, 16) == ("p", 1, 0)


def test_a_second_turn_prefills_only_past_its_first_turns_cached_blocks() -> None:
    """Turn 0 computes 100 + 10 - 1 = 109 tokens' keys and values (its last token's never): 6 full blocks of 16
    (96 tokens), cached when it finishes. Turn 1 (140 tokens) finds those 6 and prefills 140 - 96 = 44 tokens at a
    context of 140, so its TTFT is that iteration's price; turn 0's is its whole 100-token prefill's. Hit rate: 2 x
    96 cached of 2 x (100 + 140) tokens looked up."""
    run, figures = served(two_turns(2))
    first, second = (linear_price(iteration_shape([chunk], [], 1, 16)) for chunk in ((100, 100), (44, 140)))
    assert [ttft(run, index) for index in range(4)] == [first, second, first, second]
    assert second < linear_price(iteration_shape([(140, 140)], [], 1, 16))
    assert figures["prefix_tokens_saved"] == 2 * 96
    assert figures["prefix_cache_hit_rate"] == 2 * 96 / (2 * 240)


def test_the_hit_never_covers_the_whole_prompt() -> None:
    """A repeated 64-token prompt (4 full blocks) finds at most 3: its last token is always computed, so the
    second prefills 16 tokens."""
    requests = [Request(i, i * SECOND, 64, 2, session=0) for i in range(2)]
    run, figures = served(requests)
    assert ttft(run, 1) == linear_price(iteration_shape([(16, 64)], [], 1, 16))
    assert figures["prefix_tokens_saved"] == 48


def test_a_shared_system_prompt_is_prefilled_once() -> None:
    """Five unrelated requests of 100 tokens whose first 64 are one system prompt (4 blocks): the first prefills
    all 100, each later one 36; hit rate 4 x 64 / 500."""
    requests = [Request(i, i * SECOND, 100, 3, shared_prefix=0, shared_tokens=64) for i in range(5)]
    run, figures = served(requests)
    assert ttft(run, 0) == linear_price(iteration_shape([(100, 100)], [], 1, 16))
    assert {ttft(run, i) for i in range(1, 5)} == {linear_price(iteration_shape([(36, 100)], [], 1, 16))}
    assert figures["prefix_cache_hit_rate"] == 4 * 64 / 500


def test_without_chunked_prefill_a_hit_also_shortens_the_prompt() -> None:
    run, _ = served(two_turns(1), chunked_prefill=False, token_budget=16384)
    assert ttft(run, 1) == linear_price(iteration_shape([(44, 140)], [], 1, 16))


def test_eviction_takes_empty_blocks_first_then_the_least_recently_released() -> None:
    """A cache of 6 blocks. A (2 blocks) and then B (2 blocks) run and release theirs, last block first, so the
    eviction order is A1, A0, B1, B0. Two new blocks take the 2 empty ones; a third evicts A1 (A keeps 1 block of
    prefix), a fourth A0; B's prefix is untouched."""
    cache = PrefixCache(6, 16)
    a, b = Request(0, 0, 33, 1), Request(1, 0, 33, 1)
    for request in (a, b):
        shared = cache.claim(request, 0, 2)
        assert shared == []
        cache.register(request, 0, 2, shared)
        cache.release(shared, 0)
    assert list(cache.evictable) == [block_key(a, 1, 16), block_key(a, 0, 16), block_key(b, 1, 16), block_key(b, 0, 16)]
    assert cache.used == 0 and cache.free == 6
    assert cache.take(2) and cache.match(a, 33) == 2
    assert cache.take(1) and cache.match(a, 33) == 1
    assert cache.take(1) and cache.match(a, 33) == 0 and cache.match(b, 33) == 2
    assert cache.used == 4 and not cache.take(3)


def test_two_sequences_share_a_block_once_and_it_outlives_them_both() -> None:
    """Two requests with a 64-token system prompt (4 blocks) of 100 tokens (7 blocks each). The first, prefilled,
    holds 7 blocks, 4 of them cached; the second, admitted beside it, shares those 4 and takes 3 more: 10 blocks
    used, not 14. When the first finishes the shared 4 stay in use (referenced once); when the second does, every
    block is free, the 4 prompt blocks (and the full ones each computed) still cached."""
    cfg = config(poisson("1/s", 1, 100, 3), **CACHED)
    replica = ReplicaScheduler(cfg.pools[0].scheduler, 64)
    first, second = (Request(i, 0, 100, 3 + 2 * i, shared_prefix=0, shared_tokens=64) for i in range(2))
    replica.enqueue(first)
    replica.finish_iteration(replica.next_batch(0), 1)
    assert replica.cache.used == 7
    replica.enqueue(second)
    batch = replica.next_batch(1)
    assert [(sequence.request.index, tokens) for sequence, tokens in batch.chunks] == [(1, 36)]
    assert replica.cache.used == 10
    assert all(replica.prefix is not None and replica.prefix.references[("p", 0, j)] == 2 for j in range(4))
    replica.finish_iteration(batch, 2)
    finished = []
    now = 2
    while len(finished) < 2:
        batch = replica.next_batch(now)
        now += 1
        finished += replica.finish_iteration(batch, now)
        if len(finished) == 1:
            assert replica.cache.used == 7  # the second's 3 own blocks and the 4 shared, counted once
    assert replica.cache.used == 0 and replica.outstanding_tokens == 0
    assert replica.prefix is not None and all(replica.prefix.references[("p", 0, j)] == 0 for j in range(4))


def test_a_recomputed_sequence_finds_its_own_blocks_still_cached() -> None:
    """test_serving's two requests (16 prompt, 40 output tokens) in 5 blocks: the younger is preempted holding 2
    blocks (its prompt and the first 16 generated tokens), which stay cached; readmitted, it finds them and
    prefills only what follows. Every token outstanding is worked off."""
    cfg = config(poisson("1/s", 1, 16, 40), **CACHED)
    replica = ReplicaScheduler(cfg.pools[0].scheduler, 5)
    for index in range(2):
        replica.enqueue(Request(index, 0, 16, 40))
    finished, now = [], 0
    while len(finished) < 2:
        batch = replica.next_batch(now)
        now += 1
        finished += replica.finish_iteration(batch, now)
    assert replica.preemptions >= 1 and replica.prefix is not None and replica.prefix.counts.hit > 0
    assert replica.outstanding_tokens == 0 and replica.cache.used == 0
    assert all(sequence.generated == 40 for sequence in finished)


def test_with_nothing_to_reuse_prefix_caching_changes_no_time() -> None:
    """Unrelated requests under preemption pressure: each recompute may find its own blocks, so compare without
    pressure, where nothing repeats: every time equals the run without the cache, the hit rate is 0."""
    cfg = config(poisson("20/s", 300, 256, 64, seed=3), max_batch=64, token_budget=2048)
    requests = synthetic_requests(cfg.requests)
    plain = serving_metrics(simulate_pools(requests, [PoolSetup(cfg.pools[0], 100_000, linear_pricer)], 16), cfg.slo, 1)
    _, cached = served(list(requests), max_batch=64, token_budget=2048)
    assert cached.pop("prefix_cache_hit_rate") == cached.pop("prefix_tokens_saved") == 0
    assert cached == plain


@pytest.mark.parametrize("chunked", [True, False])
def test_pipelined_engines_each_keep_their_own_cache(chunked: bool) -> None:
    """Two stages, two engines (virtual engines), requests routed round robin: a session's second turn lands on
    the other engine, whose cache never saw its first, so nothing hits; routed to the same engine it does."""
    pool = {"replicas": 1, "parallelism": {"pp": 2}, "router": "round_robin"}
    scheduler = {**CACHED, "chunked_prefill": chunked, "token_budget": 16384}
    cfg = ServingWorkloadConfig.model_validate(
        {"model": MODEL, "pools": [{**pool, "scheduler": scheduler}], "requests": poisson("1/s", 1, 8, 8), "bucket": 16}
    )
    setup = PoolSetup(cfg.pools[0], 1000, lambda iteration: (linear_pricer(iteration) // 2,) * 2)
    apart = simulate_pools(two_turns(1), [setup], 16)
    assert apart.prefix is not None and apart.prefix.hit == 0
    same = two_turns(1)
    same.insert(1, Request(1, SECOND // 2, 8, 1))  # takes engine 1, so turn 1 goes back to engine 0
    same = [replace(request, index=index) for index, request in enumerate(same)]
    together = simulate_pools(same, [setup], 16)
    assert together.prefix is not None and together.prefix.hit == 96


def test_a_prefill_pool_caches_and_hands_off_the_whole_kv_cache() -> None:
    """Disaggregated: the prefill pool finds turn 0's prompt blocks (its output was decoded elsewhere: 6 full
    blocks of the 100-token prompt); the move carries all 140 tokens."""
    pools = [
        {"name": "prefill", "role": "prefill", "scheduler": CACHED},
        {"name": "decode", "role": "decode"},
    ]
    cfg = ServingWorkloadConfig.model_validate(
        {"model": MODEL, "pools": pools, "requests": poisson("1/s", 1, 8, 8), "bucket": 16}
    )
    setups = [PoolSetup(pool, 1000, linear_pricer) for pool in cfg.pools]
    run = simulate_pools(two_turns(1), setups, 16, fixed_transfer, 1)
    assert run.prefix is not None and run.prefix.hit == 96
    assert ttft(run, 1) == linear_price(iteration_shape([(44, 140)], [], 1, 16))
    assert [move.size for move in run.moves] == [100, 140]


def test_a_decode_pool_refuses_prefix_caching() -> None:
    pools = [{"role": "prefill"}, {"role": "decode", "scheduler": {"prefix_caching": True}}]
    with pytest.raises(ValidationError, match="workload.pools.1.scheduler.prefix_caching: a decode pool"):
        ServingWorkloadConfig.model_validate({"model": MODEL, "pools": pools, "requests": poisson("1/s", 1, 8, 8)})


def test_speculative_decoding_caches_what_it_generated_for_the_next_turn() -> None:
    """Speculative steps: turn 0's 109 computed tokens still leave 6 full blocks for turn 1 to find."""
    from stratasim.workload_layer.serving.speculative import Speculation, SpeculativeConfig

    draft = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "seq_len": 16384, "vocab": 32000}
    chances = SpeculativeConfig.model_validate({"draft": draft, "tokens": 4, "acceptance": 0.7}).chances()
    cfg = config(poisson("1/s", 1, 8, 8), **CACHED)
    setup = PoolSetup(cfg.pools[0], 1000, linear_pricer, speculation=Speculation(4, chances, seed=1))
    run = simulate_pools(two_turns(1), [setup], 16)
    assert run.prefix is not None and run.prefix.hit == 96 and run.speculative_steps > 0
    assert ttft(run, 1) == linear_price(iteration_shape([(44, 140)], [], 1, 16))


def test_each_member_of_an_expert_parallel_group_keeps_its_own_cache() -> None:
    """Two members, round robin: turn 1 lands on member 1 and misses; turn 2 (140 + 5 + 15 tokens) on member 0
    finds turn 0's 6 blocks only (turn 1's stream is cached on member 1)."""
    moe = {**MODEL, "experts": 4, "top_k": 2}
    pool = {"replicas": 2, "router": "round_robin", "parallelism": {"ep": 2}, "scheduler": CACHED}
    cfg = ServingWorkloadConfig.model_validate(
        {"model": moe, "pools": [pool], "requests": poisson("1/s", 1, 8, 8), "bucket": 16}
    )
    setup = PoolSetup(cfg.pools[0], 1000, linear_pricer, experts=lambda work: 10**6)
    requests = [*two_turns(1), Request(2, 3 * SECOND, 160, 5, session=0, turn=2)]
    run = simulate_pools(requests, [setup], 16)
    assert run.prefix is not None and run.prefix.hit == 96
    assert ttft(run, 2) == linear_price(iteration_shape([(64, 160)], [], 1, 16)) + 10**6


LLAMA3_8B = {
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "ffn": 14336,
    "vocab": 128256,
    "seq_len": 8192,
    "activation": "swiglu",
    "bias": False,
    "norm": "rmsnorm",
    "position_embedding": "rope",
    "tie_embeddings": False,
}
H100_STUDY: dict[str, Any] = {
    "name": "prefix",
    "workload": {
        "kind": "serving",
        "model": LLAMA3_8B,
        "pools": [{"replicas": 1, "scheduler": {"prefix_caching": True}}],
        "requests": {
            "count": 40,
            "seed": 1,
            "arrival": {"process": "poisson", "rate": "20/s"},
            "prompt": {"distribution": "fixed", "value": 1000},
            "output": {"distribution": "fixed", "value": 50},
        },
    },
    "system": {"algorithm": "ring"},
    "network": {"topology": [{"kind": "switch", "size": 1, "bandwidth": "450GB/s", "latency": "1us"}]},
    "compute": {"backend": "roofline", "device": "h100"},
}


def test_llama3_8b_second_turns_prefill_only_what_the_first_did_not_compute() -> None:
    """LLaMA-3-8B on one H100 (roofline), conversations 2 s apart: turn 0 of 1,000 prompt and 200 output tokens,
    turn 1 of 1,000 + 200 + 300 tokens. Turn 0 computes 1,199 tokens: 74 full blocks of 16 (1,184 tokens), so
    turn 1 prefills 1,500 - 1,184 = 316 tokens at a context of 1,500 and its TTFT is that iteration's price (of
    the 64-token buckets: 320 tokens at 1,536), not the whole prompt's."""
    from stratasim.config.study_file import parse_study
    from stratasim.kernel import registry
    from tests.workload_layer.serving_pricers import pool_pricer

    parsed = parse_study(H100_STUDY, "prefix.yaml")
    requests = []
    for session in range(3):
        start = 4 * session * SECOND
        requests += [
            Request(2 * session, start, 1000, 200, session=session),
            Request(2 * session + 1, start + 2 * SECOND, 1500, 10, session=session, turn=1),
        ]
    with pool_pricer(parsed, registry.load("network", "analytical")()) as shape_pricer:
        workload = {key: value for key, value in H100_STUDY["workload"].items() if key != "kind"}
        cfg = ServingWorkloadConfig.model_validate(workload)
        setup = PoolSetup(cfg.pools[0], 20_000, lambda iteration: shape_pricer(iteration.shape))
        run = simulate_pools(requests, [setup], cfg.bucket)
        cached = shape_pricer(iteration_shape([(316, 1500)], [], 1, cfg.bucket))
        whole = shape_pricer(iteration_shape([(1500, 1500)], [], 1, cfg.bucket))
    assert [ttft(run, 2 * session + 1) for session in range(3)] == [cached] * 3
    assert isinstance(cached, int) and isinstance(whole, int) and cached < whole / 2
    assert run.prefix is not None and run.prefix.hit == 3 * 1184


def test_a_study_reports_the_hit_rate_and_the_ttft_without_the_cache() -> None:
    """Unrelated requests find nothing: hit rate 0, and the TTFT without the cache is the TTFT."""
    from stratasim.config.study_file import parse_study
    from stratasim.study.run import run_study

    serving = run_study(parse_study(H100_STUDY, "prefix.yaml")).serving
    assert serving is not None
    assert serving["prefix_cache_hit_rate"] == serving["prefix_tokens_saved"] == 0
    assert serving["ttft_mean_no_prefix_cache_ps"] == serving["ttft_mean_ps"]
    assert serving["ttft_p99_no_prefix_cache_ps"] == serving["ttft_p99_ps"]
