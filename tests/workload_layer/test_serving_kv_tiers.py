"""KV tiers below the GPU (``scheduler.kv_tiers``) against test_serving's known pricer: evicted prefix blocks
offloaded, found again and reloaded, each copy priced at its tier's link."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.iteration import iteration_shape
from stratasim.workload_layer.serving.kv_cache import HostSwap
from stratasim.workload_layer.serving.kv_tiers import KvTier, KvTiers
from stratasim.workload_layer.serving.metrics import serving_metrics
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.simulation import simulate_pools
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload
from tests.helpers import RunCli
from tests.workload_layer.test_serving import MODEL, MS, config, linear_price, linear_pricer, poisson
from tests.workload_layer.test_serving_prefix_cache import CACHED, H100_STUDY, SECOND, ttft
from tests.workload_layer.test_serving_study import run_study_file

BLOCK_PS = 7_000_000  # 7 us a block over the host link


def served(requests: list[Request], kv_blocks: int, *tiers: KvTier) -> tuple[PoolRun, dict[str, float]]:
    cfg = config(poisson("1/s", 1, 8, 8), **CACHED)
    run = simulate_pools(requests, [PoolSetup(cfg.pools[0], kv_blocks, linear_pricer, tiers=tiers)], cfg.bucket)
    return run, serving_metrics(run, cfg.slo, 1)


def test_a_block_evicted_to_host_memory_is_found_there_and_its_reload_shows_in_ttft() -> None:
    """A GPU of 10 blocks of 16. Turn 0 (100 prompt, 10 output tokens) leaves 6 cached blocks (4 empty). An
    unrelated 112-token request needs 7: the 4 empty and 3 evicted, turn 0's last three (released last first), each
    copied to host memory (3 x 7 us). Turn 1 (140 tokens) finds blocks 0-2 on the GPU and 3-5 in host memory: 96
    tokens, as if nothing had been evicted; it reloads those 3 (3 x 7 us), and its 9 blocks' room evicts 6 of the
    other request's, copied out (6 x 7 us). So its TTFT is (6 + 3) x 7 us and the 44-token prefill at a context of
    140. Without the tier it finds 3 blocks and prefills 92 tokens."""
    requests = [
        Request(0, 0, 100, 10, session=0),
        Request(1, SECOND, 112, 1),
        Request(2, 2 * SECOND, 140, 5, session=0, turn=1),
    ]
    run, figures = served(requests, 10, KvTier("host", 1000, BLOCK_PS))
    assert ttft(run, 1) == 3 * BLOCK_PS + linear_price(iteration_shape([(112, 112)], [], 1, 16))
    assert ttft(run, 2) == (6 + 3) * BLOCK_PS + linear_price(iteration_shape([(44, 140)], [], 1, 16))
    assert figures["prefix_tokens_saved"] == 96
    assert figures["kv_tier_host_hit_blocks"] == 3 and figures["kv_tier_host_reload_time_ps"] == 3 * BLOCK_PS
    assert figures["kv_tier_host_offloaded_blocks"] == 9 and figures["kv_tier_host_offload_time_ps"] == 9 * BLOCK_PS
    alone, without = served(requests, 10)
    assert ttft(alone, 2) == linear_price(iteration_shape([(92, 140)], [], 1, 16))
    assert without["prefix_tokens_saved"] == 48 and "kv_tier_host_hit_blocks" not in without


def test_host_memory_keeps_more_sessions_prefixes_alive_under_a_small_gpu_cache() -> None:
    """Twenty conversations whose first turns all run before any second turn, on a GPU of 32 blocks: it keeps only
    the last few conversations' blocks, so most second turns miss; with 10,000 blocks of host memory every second
    turn finds its first turn's 6 blocks."""
    requests = []
    for session in range(20):
        requests.append(Request(session, session * SECOND, 100, 10, session=session))
    for session in range(20):
        requests.append(Request(20 + session, (20 + session) * SECOND, 140, 5, session=session, turn=1))
    _, gpu = served(requests, 32)
    _, host = served(requests, 32, KvTier("host", 10_000, BLOCK_PS))
    assert gpu["prefix_cache_hit_rate"] < host["prefix_cache_hit_rate"] == 20 * 96 / (20 * (100 + 140))
    assert host["kv_tier_host_hit_blocks"] > 0


def test_a_full_tier_moves_its_least_recently_used_block_down_and_the_last_drops_it() -> None:
    """Host holds 2 blocks, disk 3: a third block offloaded sends host's oldest to disk (its copy costs the GPU
    nothing), a block found is reloaded at its own tier's price and stays there; a tier already holding a block
    takes it again for free."""
    tiers = KvTiers((KvTier("host", 2, 5), KvTier("disk", 3, 50)))
    keys = [("r", 0, block) for block in range(6)]
    assert [tiers.offload(key) for key in keys[:3]] == [5, 5, 5]
    assert list(tiers.held[0]) == keys[1:3] and list(tiers.held[1]) == keys[:1]
    assert tiers.reload(keys[0]) == 50 and tiers.reload(keys[2]) == 5
    assert tiers.offload(keys[2]) == 0
    for key in keys[3:]:
        tiers.offload(key)
    assert not tiers.holds(keys[0]) and all(tiers.holds(key) for key in keys[1:])
    assert tiers.counts["disk"].reloaded == tiers.counts["host"].reloaded == 1
    assert tiers.counts["host"].offloaded == 6 and tiers.counts["disk"].offloaded == 0


def test_a_study_sizes_its_tiers_in_blocks_and_prices_a_block_over_each_link() -> None:
    """The small model at TP 1: a block of 16 tokens is 2 x 4 layers x 4 KV heads x 64 x 2 bytes x 16 = 64 KiB on
    an NPU; 1 GiB of host memory holds 16,384 of them, each 65,536 B / 32 GB/s = 2.048 us."""
    tiers = [
        {"tier": "host", "capacity": "1GiB", "bandwidth": "32GB/s"},
        {"tier": "disk", "capacity": "4GiB", "bandwidth": "8GB/s"},
    ]
    cfg = config(poisson("1/s", 1, 8, 8), **CACHED, kv_tiers=tiers)
    assert ServingRequestsWorkload(cfg).kv_tiers() == (
        KvTier("host", 16384, 2_048_000),
        KvTier("disk", 65536, 8_192_000),
    )


@pytest.mark.parametrize(
    ("scheduler", "message"),
    [
        ({"kv_tiers": [{"tier": "host", "capacity": "1GiB", "bandwidth": "32GB/s"}]}, "they need prefix_caching: true"),
        (
            {**CACHED, "kv_tiers": [{"tier": "host", "capacity": "1GiB", "bandwidth": "32GB/s"}] * 2},
            "kv_tiers: host named more than once",
        ),
        ({**CACHED, "kv_tiers": [{"tier": "host", "capacity": "-1GiB", "bandwidth": "32GB/s"}]}, "capacity"),
        ({**CACHED, "kv_tiers": [{"tier": "tape", "capacity": "1GiB", "bandwidth": "32GB/s"}]}, "host"),
        ({**CACHED, "kv_tiers": [{"tier": "host", "capacity": "1GiB"}]}, "bandwidth"),
        ({**CACHED, "kv_tiers": {"tier": "host"}}, "kv_tiers"),
        ({"prefix_caching": "often"}, "prefix_caching"),
    ],
)
def test_bad_tiers_say_what_is_wrong(scheduler: dict[str, Any], message: str) -> None:
    data = {"model": MODEL, "pools": [{"scheduler": scheduler}], "requests": poisson("1/s", 1, 8, 8)}
    with pytest.raises(ValidationError, match=message):
        ServingWorkloadConfig.model_validate(data)


@pytest.mark.parametrize(
    ("scheduler", "message"),
    [
        (
            {"prefix_caching": True, "kv_tiers": [{"tier": "disk", "capacity": "1GiB", "bandwidth": "8GB/s"}] * 2},
            "workload.pools[0].scheduler: kv_tiers: disk named more than once",
        ),
        (
            {"prefix_caching": True, "kv_tiers": [{"tier": "host", "capacity": "-1GiB", "bandwidth": "32GB/s"}]},
            "workload.pools[0].scheduler.kv_tiers[0].host.capacity: a size must be a whole, non-negative",
        ),
        (
            {"prefix_caching": True, "kv_tiers": [{"tier": "host", "capacity": "1GiB", "bandwidth": "32"}]},
            "workload.pools[0].scheduler.kv_tiers[0].host.bandwidth: 32 has no unit",
        ),
        (
            {"kv_tiers": [{"tier": "host", "capacity": "1GiB", "bandwidth": "32GB/s"}]},
            "workload.pools[0].scheduler: kv_tiers hold prefix-cached blocks the GPU evicts: they need prefix_caching",
        ),
        ({"prefix_caching": "often"}, "workload.pools[0].scheduler.prefix_caching: input should be a valid boolean"),
    ],
)
def test_a_study_with_bad_tiers_is_refused_with_one_message(
    tmp_path: Path, run_cli: RunCli, scheduler: dict[str, Any], message: str
) -> None:
    data = copy.deepcopy(H100_STUDY)
    data["workload"]["pools"][0]["scheduler"] = scheduler
    code, err = run_study_file(run_cli, tmp_path, data)
    assert code != 0 and f"1 problem\n  {message}" in err, err


def conversations(count: int, seed: int) -> list[Request]:
    """``count`` requests of 40 conversations, a few milliseconds apart: each a conversation's next turn (its last
    prompt and output and new tokens) or, one time in five, a fresh one; half of them start with a 50-token system
    prompt."""
    rng = random.Random(seed)
    requests, streams, now = [], {}, 0
    for index in range(count):
        now += rng.randint(0, 30) * MS
        session = rng.randint(0, 39)
        last = streams.get(session)
        prompt = rng.randint(20, 300) if last is None or rng.random() < 0.2 else sum(last) + rng.randint(1, 100)
        if prompt > 3000:
            prompt = rng.randint(20, 300)
        output = rng.randint(1, 60)
        streams[session] = (prompt, output)
        shared = rng.random() < 0.5
        requests.append(
            Request(index, now, prompt, output, session, 0, 0 if shared else -1, min(prompt, 50) if shared else 0)
        )
    return requests


@pytest.mark.parametrize("chunked", [True, False])
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
@pytest.mark.parametrize("tiered", [False, True])
def test_under_pressure_every_block_and_token_is_accounted_for(chunked: bool, preemption: str, tiered: bool) -> None:
    """Conversations sharing system prompts in a 200-block cache, preempting (recomputed or swapped), with or without
    tiers: every request finishes with all its tokens, every block comes back and no cached block stays
    referenced."""
    swap = {"preemption": "swap", "swap_bandwidth": "32GB/s"} if preemption == "swap" else {}
    cfg = config(
        poisson("1/s", 1, 8, 8), **CACHED, chunked_prefill=chunked, token_budget=512 if chunked else 16384, **swap
    )
    tiers = (KvTier("host", 40, 1000), KvTier("disk", 60, 5000)) if tiered else ()
    replica = ReplicaScheduler(cfg.pools[0].scheduler, 200, swap=HostSwap(100, 700) if swap else None, tiers=tiers)
    waiting, finished, now = conversations(200, 1), [], 0
    while len(finished) < 200:
        while waiting and waiting[0].arrival_ps <= now:
            replica.enqueue(waiting.pop(0))
        batch = replica.next_batch(now)
        now += 20 * MS
        finished += replica.finish_iteration(batch, now)
    prefix = replica.prefix
    assert prefix is not None and replica.preemptions > 0 and prefix.counts.hit > 0
    assert all(sequence.generated == sequence.request.output_tokens for sequence in finished)
    assert replica.cache.used == replica.outstanding_tokens == replica.host_used == 0
    assert set(prefix.references.values()) == {0} and len(prefix.evictable) == len(prefix.references) <= 200
    assert bool(prefix.counts.tiers) == tiered
