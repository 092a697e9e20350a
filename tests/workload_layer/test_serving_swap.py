"""Swap-to-host preemption (``scheduler.preemption: swap``) against the known pricer of test_serving: what moves,
what it costs, and when it beats recomputing."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.kv_cache import HostSwap
from stratasim.workload_layer.serving.metrics import serving_metrics
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.simulation import simulate_pools
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload
from tests.workload_layer.test_serving import MODEL, config, linear_pricer, poisson

SWAP = {"preemption": "swap", "swap_bandwidth": "32GB/s"}


def simulate(cfg: ServingWorkloadConfig, kv_blocks: int, swap: HostSwap | None) -> PoolRun:
    setup = PoolSetup(cfg.pools[0], kv_blocks, linear_pricer, swap)
    return simulate_pools(synthetic_requests(cfg.requests), [setup], cfg.bucket)


def test_a_swapped_sequence_moves_its_cached_blocks_out_and_back_and_resumes_without_recomputing() -> None:
    """test_serving's two requests (16 prompt, 40 output tokens) in 5 blocks of 16: when both need a third
    block the younger, holding 32 cached tokens (2 blocks), is swapped out; it comes back into 3 blocks (room for
    its next token) once the older has finished, and decodes on. 2 blocks out and 2 back: 4 block copies, no
    prompt prefilled again, every outstanding token worked off."""
    cfg = config(poisson("1/s", 1, 16, 40), block_size=16, **SWAP)
    replica = ReplicaScheduler(cfg.pools[0].scheduler, 5, swap=HostSwap(blocks=100, block_ps=7))
    for index in range(2):
        replica.enqueue(Request(index, 0, 16, 40))
    finished, now, copies = [], 0, 0
    while len(finished) < 2:
        batch = replica.next_batch(now)
        copies += batch.swap_ps
        now += 1
        finished += replica.finish_iteration(batch, now)
    assert replica.preemptions == replica.swap_outs == 1
    assert copies == 4 * 7
    assert all(sequence.prefill_target == 16 and sequence.generated == 40 for sequence in finished)
    assert replica.outstanding_tokens == 0 and replica.cache.used == 0 and replica.host_used == 0


def test_swap_copies_cost_their_blocks_over_the_host_link_and_balance() -> None:
    """Under a tight cache every swapped-out sequence comes back: the copies total twice the blocks swapped out,
    each at its block price, and the run's iterations wait for them."""
    cfg = config(poisson("200/s", 300, 512, 512, seed=1), max_batch=32, **SWAP)
    run = simulate(cfg, 512, HostSwap(blocks=10_000, block_ps=1000))
    assert run.swap_outs == run.preemptions > 0
    assert run.swap_ps > 0 and run.swap_ps % 2000 == 0
    assert all(s.prefill_target == s.request.prompt_tokens and s.generated == 512 for s in run.sequences)


def test_swapping_over_a_fast_link_beats_recomputing_and_over_a_crawling_one_loses() -> None:
    """Recompute redoes a preempted sequence's prefill; swap pays two copies instead. Copies at 1 us a block
    are far cheaper than ~1,000 tokens of prefill; at 1 s a block they are far dearer."""
    cfg = config(poisson("200/s", 300, 512, 512, seed=1), max_batch=32, **SWAP)
    recompute = serving_metrics(simulate(cfg, 512, None), cfg.slo, 1)
    fast = serving_metrics(simulate(cfg, 512, HostSwap(10_000, 10**6)), cfg.slo, 1)
    slow = serving_metrics(simulate(cfg, 512, HostSwap(10_000, 10**12)), cfg.slo, 1)
    assert recompute["preemptions"] > 0 and recompute["swap_outs"] == 0
    assert fast["e2e_mean_ps"] < recompute["e2e_mean_ps"] < slow["e2e_mean_ps"]
    assert fast["swap_outs"] > 0 and fast["swap_time_ps"] > 0


def test_a_host_memory_too_small_for_any_victim_recomputes_them_all_exactly_as_recompute_does() -> None:
    cfg = config(poisson("200/s", 300, 512, 512, seed=1), max_batch=32, **SWAP)
    recompute = serving_metrics(simulate(cfg, 512, None), cfg.slo, 1)
    no_room = serving_metrics(simulate(cfg, 512, HostSwap(blocks=0, block_ps=10**6)), cfg.slo, 1)
    assert no_room == recompute


def test_swap_without_chunked_prefill_also_resumes_every_sequence() -> None:
    cfg = config(
        poisson("200/s", 200, 512, 256, seed=2), max_batch=32, chunked_prefill=False, token_budget=16384, **SWAP
    )
    run = simulate(cfg, 400, HostSwap(blocks=10_000, block_ps=1000))
    assert run.swap_outs > 0
    assert all(s.generated == 256 and s.prefill_target == 512 for s in run.sequences)


def test_the_host_swap_is_the_swap_space_in_blocks_at_the_link_bandwidth() -> None:
    """The small model on one NPU in bf16: a 16-token block is 2 x 4 layers x 4 KV heads x 64 x 16 x 2 B = 65,536
    B; 4 GiB holds 65,536 of them, and 32 GB/s moves one in 2,048 ns."""
    cfg = config(poisson("1/s", 1, 16, 4), block_size=16, **SWAP)
    swap = ServingRequestsWorkload(cfg).host_swap()
    assert swap == HostSwap(blocks=65_536, block_ps=2_048_000)
    assert ServingRequestsWorkload(config(poisson("1/s", 1, 16, 4))).host_swap() is None


@pytest.mark.parametrize(
    ("scheduler", "message"),
    [
        ({"preemption": "swap"}, "preemption: swap needs swap_bandwidth"),
        ({"swap_bandwidth": "32GB/s"}, "swap_space and swap_bandwidth apply to preemption: swap only"),
        ({"swap_space": "8GiB"}, "swap_space and swap_bandwidth apply to preemption: swap only"),
        ({**SWAP, "swap_bandwidth": "32"}, "swap_bandwidth"),
        ({**SWAP, "swap_space": "0B"}, "swap_space"),
        ({"preemption": "offload"}, "preemption"),
    ],
)
def test_bad_swap_settings_say_what_is_wrong(scheduler: dict[str, Any], message: str) -> None:
    data = {"model": MODEL, "pools": [{"scheduler": scheduler}], "requests": poisson("1/s", 1, 8, 8)}
    with pytest.raises(ValidationError, match=message):
        ServingWorkloadConfig.model_validate(data)
