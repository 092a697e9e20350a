"""Pipeline-parallel replicas: ``pp`` batches in flight (vLLM v0's virtual engines), each stage taking a batch once
it has finished the ones ahead."""

from __future__ import annotations

from typing import Any

import pytest

from stratasim.kernel.serving import Iteration
from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.metrics import serving_metrics
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.simulation import simulate_pools
from tests.workload_layer.test_serving import MODEL, MS, linear_pricer, poisson


def pipelined(requests: dict[str, Any], pp: int, **scheduler: Any) -> ServingWorkloadConfig:
    pool = {"replicas": 1, "parallelism": {"pp": pp}, "scheduler": scheduler}
    return ServingWorkloadConfig.model_validate({"model": MODEL, "pools": [pool], "requests": requests, "bucket": 16})


def split(pp: int) -> Any:
    """test_serving's linear pricer, its time split evenly over ``pp`` stages (a remainder on the last)."""

    def pricer(iteration: Iteration) -> int | tuple[int, ...]:
        total = linear_pricer(iteration)
        return total if pp == 1 else (total // pp,) * (pp - 1) + (total - (pp - 1) * (total // pp),)

    return pricer


def test_two_prompts_together_overlap_on_two_stages() -> None:
    """Two 1-token requests at once on a 2-stage replica go to its two engines: the first crosses stage 0 then
    stage 1; the second enters stage 0 as the first leaves it, and leaves stage 1 one stage-time after the first.
    TTFTs: 2 and 3 stage-times, where one batch after the other would take 2 and 4."""
    cfg = pipelined(poisson("1/s", 1, 256, 1), pp=2)
    requests = [Request(0, 0, 256, 1), Request(1, 0, 256, 1)]
    run = simulate_pools(requests, [PoolSetup(cfg.pools[0], 1000, lambda iteration: (7 * MS, 7 * MS))], cfg.bucket)
    assert sorted(s.first_token_ps - s.request.arrival_ps for s in run.sequences) == [14 * MS, 21 * MS]
    assert run.engine_replicas == [0, 0] and run.kv_replica_blocks == [500, 500]


def test_pipelining_raises_the_throughput_ceiling_by_the_stages_in_flight() -> None:
    """Saturated by 400 requests at once, a 4-stage replica keeps 4 batches in flight: each stage's work takes a
    quarter of the iteration, so tokens come nearly 4 times as fast as when a batch crosses the pipeline alone
    (max_batch caps each engine's batch, so the batches are alike either way)."""
    requests = poisson("100000/s", 400, 128, 256, seed=4)
    tokens = {}
    for pp, pricer in ((1, split(1)), (4, split(4))):
        cfg = pipelined(requests, pp=pp, max_batch=16)
        run = simulate_pools(synthetic_requests(cfg.requests), [PoolSetup(cfg.pools[0], 100_000, pricer)], cfg.bucket)
        tokens[pp] = serving_metrics(run, cfg.slo, 1)["tokens_per_second"]
    assert 3.3 < tokens[4] / tokens[1] <= 4.0, tokens  # 3.54: engines drain unevenly at the end


def test_a_pricer_that_misses_a_stage_is_refused() -> None:
    cfg = pipelined(poisson("1/s", 2, 64, 2), pp=2)
    with pytest.raises(Exception, match="on each of its 2 stages"):
        simulate_pools(synthetic_requests(cfg.requests), [PoolSetup(cfg.pools[0], 1000, linear_pricer)], cfg.bucket)
