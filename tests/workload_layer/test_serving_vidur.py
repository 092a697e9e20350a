"""Vidur's policies in StrataSim's serving: the least-outstanding-requests router, the admission watermark, Orca as
scheduler keys, and Vidur's request stream (tools/vidur_requests.py), each against a hand calculation."""

from __future__ import annotations

import math
import random
import re

import pytest
from pydantic import ValidationError

from stratasim.workload_layer.serving.config import SchedulerConfig, ServingWorkloadConfig
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.routing import route
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.sequences import Sequence
from stratasim.workload_layer.serving.simulation import simulate_pool
from tests.workload_layer.test_serving import MODEL, linear_pricer, poisson
from tools.vidur_requests import clipped_lengths, vidur_requests


def _routed(router: str, replicas: list[ReplicaScheduler], requests: list[Request]) -> list[int]:
    """Where each of ``requests`` goes, enqueued there as it is routed."""
    targets = []
    for arrival, request in enumerate(requests):
        target = route(router, replicas, arrival)
        replicas[target].enqueue(request)
        targets.append(target)
    return targets


def test_least_outstanding_requests_fills_the_emptiest_replica_ties_to_the_lowest() -> None:
    """Three empty replicas: 0, 1, 2 in turn (ties to the lowest), then 0 again. Replica 1's request then finishes
    (one output token, so its prefill ends it): replica 1 holds 0 requests, the others 2 and 1, so the next two
    go to 1 (0 < 1) and then 1 again (1 request each on 1 and 2: the lower index)."""
    config = SchedulerConfig()
    replicas = [ReplicaScheduler(config, 1000) for _ in range(3)]
    assert _routed("least_outstanding_requests", replicas, [Request(i, 0, 64, 1) for i in range(4)]) == [0, 1, 2, 0]
    assert [replica.outstanding_requests for replica in replicas] == [2, 1, 1]
    batch = replicas[1].next_batch(0)
    assert [sequence.request.index for sequence, _ in batch.chunks] == [1]
    assert [sequence.request.index for sequence in replicas[1].finish_iteration(batch, 5)] == [1]
    assert [replica.outstanding_requests for replica in replicas] == [2, 0, 1]
    assert _routed("least_outstanding_requests", replicas, [Request(4 + i, 0, 64, 1) for i in range(2)]) == [1, 1]


def test_outstanding_requests_count_running_and_incoming_ones_the_token_count_weighs_otherwise() -> None:
    """Replica 0 runs one request of 3,000 tokens to go; replica 1 has two of 10 tokens each queued. Counting
    tokens the next request goes to 1, counting requests to 0. A sequence on its way to replica 0 (its KV cache
    moving) counts there from :meth:`expect` on, and stays counted once received."""
    config = SchedulerConfig()
    replicas = [ReplicaScheduler(config, 1000) for _ in range(2)]
    replicas[0].enqueue(Request(0, 0, 16, 3000))
    replicas[0].finish_iteration(replicas[0].next_batch(0), 1)  # running, decoding
    for index in (1, 2):
        replicas[1].enqueue(Request(index, 0, 5, 5))
    assert [len(replicas[0].running), len(replicas[1].waiting)] == [1, 2]
    assert route("least_outstanding_tokens", replicas, 3) == 1
    assert route("least_outstanding_requests", replicas, 3) == 0
    moving = Sequence(Request(3, 0, 16, 8), 16, prefilled=16, cached=16, generated=1)
    replicas[0].expect(moving)
    assert replicas[0].outstanding_requests == 2
    assert route("least_outstanding_requests", replicas, 4) == 0  # 2 against 2: the lower index
    replicas[0].receive(moving)
    assert replicas[0].outstanding_requests == 2


def test_a_simulated_burst_spreads_evenly_over_replicas_by_request_count() -> None:
    """Six equal requests at one instant on three replicas: two each, the first iteration of each replica
    starting all at once."""
    cfg = ServingWorkloadConfig.model_validate(
        {
            "model": MODEL,
            "pools": [{"replicas": 3, "router": "least_outstanding_requests"}],
            "requests": poisson("1000000/s", 6, 64, 4),
            "bucket": 16,
        }
    )
    requests = [Request(i, 0, 64, 4) for i in range(6)]
    pool_run = simulate_pool(requests, cfg.pools[0], 1000, linear_pricer, cfg.bucket)
    firsts = [record for record in pool_run.record if record.start_ps == 0]
    assert sorted((record.engine, record.requests) for record in firsts) == [(0, (0, 3)), (1, (1, 4)), (2, (2, 5))]


def _admitted(watermark: float, prompts: int = 3) -> int:
    """How many 480-token prompts (30 blocks of 16) a 100-block replica admits at once with ``watermark``."""
    replica = ReplicaScheduler(SchedulerConfig(watermark=watermark, token_budget=8192), 100)
    for index in range(prompts):
        replica.enqueue(Request(index, 0, 480, 10))
    return len(replica.next_batch(0).chunks)


def test_the_watermark_keeps_its_share_of_blocks_free_at_admission() -> None:
    """100 blocks, prompts of 30: without a watermark three fit (10 left). A watermark of 0.1 keeps int(10.0) = 10
    blocks: the third leaves 100 - 60 - 30 = 10 >= 10, admitted (vLLM's test is >=); 0.15 keeps 15: only two."""
    assert _admitted(0.0) == 3
    assert _admitted(0.1) == 3
    assert _admitted(0.15) == 2
    assert _admitted(0.15, prompts=4) == 2


def test_the_watermark_gates_admission_only_not_decodes() -> None:
    """100 blocks, a watermark of 0.2 (20 kept free). Prompts of 480 and 784 tokens (30 and 49 blocks) are admitted:
    100 - 30 - 49 = 21 >= 20. Twenty decode steps later they hold ceil(500 / 16) + ceil(804 / 16) = 32 + 51 = 83
    blocks, into the watermark (decodes are not gated), without preemption; a new 16-token prompt (1 block) now
    waits: 100 - 83 - 1 = 16 < 20."""
    replica = ReplicaScheduler(SchedulerConfig(watermark=0.2, token_budget=8192), 100)
    for index, prompt in enumerate((480, 784)):
        replica.enqueue(Request(index, 0, prompt, 100))
    replica.finish_iteration(replica.next_batch(0), 1)
    assert replica.cache.used == 79
    for step in range(20):
        replica.finish_iteration(replica.next_batch(2 + step), 3 + step)
    assert replica.cache.used == 83 and replica.preemptions == 0
    replica.enqueue(Request(2, 0, 16, 4))
    batch = replica.next_batch(30)
    assert not batch.chunks and len(batch.decodes) == 2


def _prompt_batch(padding: bool) -> list[int]:
    """The prompts a first iteration without chunked prefill runs from a queue of 1,000, 1,500, 1,200 and 100
    tokens, within a budget of 4,096."""
    config = SchedulerConfig(chunked_prefill=False, token_budget=4096, prompt_padding=padding)
    replica = ReplicaScheduler(config, 10_000)
    for index, prompt in enumerate((1000, 1500, 1200, 100)):
        replica.enqueue(Request(index, 0, prompt, 4))
    return [sequence.prefill_target for sequence, _ in replica.next_batch(0).chunks]


def test_padded_prompts_count_as_their_number_times_the_longest() -> None:
    """Summed, 1,000 + 1,500 + 1,200 + 100 = 3,800 tokens fit the 4,096: all four prompts. Padded (vLLM 0.2,
    Vidur's vllm), 2 x 1,500 = 3,000 fits and 3 x 1,500 = 4,500 does not: two prompts, the rest wait in order."""
    assert _prompt_batch(padding=False) == [1000, 1500, 1200, 100]
    assert _prompt_batch(padding=True) == [1000, 1500]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"router": "lor"},
            "pools.0.router\n  Input should be 'round_robin', 'least_outstanding_tokens', 'least_outstanding_requests'",
        ),
        ({"scheduler": {"watermark": 1.0}}, "watermark\n  Input should be less than 1"),
        ({"scheduler": {"watermark": -0.01}}, "watermark\n  Input should be greater than or equal to 0"),
        ({"scheduler": {"prompt_padding": True}}, "prompt_padding applies to whole prompts only: set chunked_prefill"),
        ({"scheduler": {"prompt_padding": "yes please"}}, "prompt_padding\n  Input should be a valid boolean"),
    ],
)
def test_bad_vidur_keys_say_what_is_wrong(change: dict[str, object], message: str) -> None:
    data = {"model": MODEL, "pools": [change], "requests": poisson("1/s", 1, 8, 8)}
    with pytest.raises(ValidationError, match=re.escape(message)):
        ServingWorkloadConfig.model_validate(data)


def test_orca_as_scheduler_keys_never_preempts_nor_chunks() -> None:
    """Orca (Vidur): at most ``slots`` requests, each reserving a whole ``max_tokens`` request's KV cache, every
    prompt whole beside the decodes. With max_batch = slots, KV blocks for slots x max_tokens and a budget no batch
    reaches, StrataSim's chunked scheduler does the same: every prompt in one chunk, never a preemption, never
    more than ``slots`` sequences an iteration."""
    slots, max_tokens = 3, 512
    cfg = ServingWorkloadConfig.model_validate(
        {
            "model": MODEL,
            "pools": [{"scheduler": {"max_batch": slots, "token_budget": slots * max_tokens}}],
            "requests": poisson("1/s", 1, 8, 8),
            "bucket": 16,
        }
    )
    draw = random.Random(3)
    requests = [Request(i, i * 10**9, draw.randint(1, 400), draw.randint(1, 112)) for i in range(40)]
    pool_run = simulate_pool(requests, cfg.pools[0], slots * max_tokens // 16, linear_pricer, cfg.bucket)
    assert pool_run.preemptions == 0
    assert max(len(record.requests) for record in pool_run.record) <= slots
    prompts = {request.index: request.prompt_tokens for request in requests}
    appearances = [index for record in pool_run.record for index in record.requests]
    assert len(pool_run.sequences) == 40 and all(s.finish_ps > 0 for s in pool_run.sequences)
    assert all(sequence.prefill_target == prompts[sequence.request.index] for sequence in pool_run.sequences)
    assert len(appearances) == sum(request.output_tokens for request in requests)  # one iteration a token: no chunks


def test_vidur_lengths_are_cut_as_vidur_cuts_them() -> None:
    """(5000, 1000) to 4096: an excess of 1904 taken as ceil(1904 x 5/6) = 1587 and ceil(1904 x 1/6) = 318, so
    (3413, 682), 4095 tokens (Vidur's two ceilings can take one more than needed); short rows stay, and neither
    length falls below 1."""
    assert clipped_lengths([(5000, 1000), (100, 20), (4096, 1)], 4096) == [(3413, 682), (100, 20), (4095, 1)]


def test_vidur_arrivals_are_capped_exponential_gaps_of_its_seeded_draws() -> None:
    """The first arrival is the first gap, -ln(1 - u) / qps for Python's random.Random(42)'s first u; a gap is
    never more than 3 / qps; the rows are taken in numpy's RandomState(42) permutation."""
    rows = [(10 + i, 1 + i) for i in range(50)]
    drawn = vidur_requests(rows, 50, qps=2.0, max_tokens=4096)
    first = random.Random(42).random()
    assert drawn[0][0] == -math.log(1.0 - first) / 2.0
    gaps = [b[0] - a[0] for a, b in zip(drawn, drawn[1:])]
    assert max(gaps) <= 1.5 + 1e-12 and min(gaps) > 0
    assert sorted((prompt, output) for _, prompt, output in drawn) == rows
    assert vidur_requests(rows, 50, qps=2.0, max_tokens=4096) == drawn
