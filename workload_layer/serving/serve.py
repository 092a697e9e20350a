"""A serving workload's run given its pricers: each pool's KV budget checked, the request-level loop run
(:func:`~stratasim.workload_layer.serving.simulation.simulate_pools`), its figures and counters gathered.

Each pool's iterations are handed to its pricers as typed work (:class:`~stratasim.kernel.serving.Iteration`,
:class:`~stratasim.kernel.serving.ExpertWork`): the operators :meth:`ServingRequestsWorkload.works` and
:meth:`~ServingRequestsWorkload.expert_work` give for each shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stratasim.kernel.counters import CounterSample
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.serving import Iteration, IterationShape, PoolPricers, ServingResult
from stratasim.kernel.units import format_bytes
from stratasim.workload_layer.serving.config import PoolConfig, SchedulerConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.kv_cache import blocks_for
from stratasim.workload_layer.serving.metrics import serving_metrics, serving_timeline
from stratasim.workload_layer.serving.pool_run import PoolRun, Sample
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.simulation import simulate_pools

if TYPE_CHECKING:
    from stratasim.kernel.serving import KvTransferPricer
    from stratasim.workload_layer.serving.workload import KvBudget, ServingRequestsWorkload

__all__ = ["kv_budget", "serve"]


def serve(
    workload: ServingRequestsWorkload,
    pricers: Sequence[PoolPricers],
    capacities: Sequence[tuple[int | None, str]],
    transfer: KvTransferPricer | None,
    counters: bool = False,
    runs: list[Any] | None = None,
) -> ServingResult:
    """Serve ``workload``'s requests (see :meth:`~stratasim.kernel.serving.RequestLevelWorkload.serve`); with
    ``runs``, the loop's :class:`~stratasim.workload_layer.serving.pool_run.PoolRun` appended to it."""
    requests = workload.requests()
    budgets = [kv_budget(workload, pool, capacity, requests) for pool, capacity in enumerate(capacities)]
    energies: dict[tuple[int, IterationShape], float] = {}
    setups = [_setup(workload, pool, priced, budgets[pool], energies) for pool, priced in enumerate(pricers)]
    priced: dict[tuple[int, IterationShape], tuple[int, ...]] = {}
    config = workload.config
    run = simulate_pools(
        requests, setups, config.bucket, transfer, workload.kv_bytes_per_token(), priced, config.requests.seed
    )
    if runs is not None:
        runs.append(run)
    figures = serving_metrics(run, config.slo, sum(pool.replicas for pool in config.pools))
    if run.prefix is not None:
        figures |= _without_prefix_cache(requests, setups, pricers, workload, transfer, priced)
    kv = budgets[0]
    figures |= {
        "kv_capacity_bytes_per_npu": float(kv.kv_bytes),
        "weights_bytes_per_npu": float(kv.weights),
        "activations_bytes_per_npu": float(kv.activations),
    }
    firsts = [npus.start for pool in workload.pools() for npus in pool.replica_npus()]
    return ServingResult(
        total_time_ps=max((sequence.finish_ps for sequence in run.sequences), default=0),
        npus=workload.npus_required(),
        events_processed=run.iterations,
        figures=figures,
        timeline=serving_timeline(run),
        kv_bytes_per_pool=tuple(budget.kv_bytes for budget in budgets),
        counters=_counters(run.samples, firsts, run.engine_replicas) if counters else (),
        compute_energy_pj=_energy(run, energies, setups, pricers),
    )


def _without_prefix_cache(
    requests: Sequence[Request],
    setups: Sequence[PoolSetup],
    pricers: Sequence[PoolPricers],
    workload: ServingRequestsWorkload,
    transfer: KvTransferPricer | None,
    priced: dict[tuple[int, IterationShape], tuple[int, ...]],
) -> dict[str, float]:
    """The TTFT figures of the same requests served without prefix caching (``ttft_mean_no_prefix_cache_ps``...),
    the counterfactual a prefix-cached run is reported beside (its iterations priced once for both: ``priced``; its
    own shapes' energy not asked for)."""
    plain = [
        replace(setup, pool=_uncached(setup.pool), tiers=(), pricer=priced_by.iteration)
        for setup, priced_by in zip(setups, pricers, strict=True)
    ]
    config = workload.config
    run = simulate_pools(
        requests, plain, config.bucket, transfer, workload.kv_bytes_per_token(), priced, config.requests.seed
    )
    ttft = serving_metrics(run, config.slo, sum(pool.replicas for pool in config.pools))
    return {f"ttft_{stat}_no_prefix_cache_ps": ttft[f"ttft_{stat}_ps"] for stat in ("mean", "p50", "p90", "p99")}


def _uncached(pool: PoolConfig) -> PoolConfig:
    """``pool`` with prefix caching (and its KV tiers) off."""
    scheduler = pool.scheduler.model_copy(update={"prefix_caching": False, "kv_tiers": ()})
    return pool.model_copy(update={"scheduler": scheduler})


def _energy(
    run: PoolRun,
    energies: dict[tuple[int, IterationShape], float],
    setups: Sequence[PoolSetup],
    pricers: Sequence[PoolPricers],
) -> float:
    """The compute energy of every iteration and expert part run (pJ): each distinct one's, as its pool's pricers
    said when it was priced (``energies``), times how often it ran; 0 for a pool whose pricers know no energy."""
    total = 0.0
    for key, times in run.shape_runs.items():
        total += times * energies.get(key, 0.0)
    for (pool, group, member), times in run.expert_runs.items():
        expert, work = pricers[pool].expert_energy, setups[pool].expert_work
        total += times * expert(work(group, member)) if expert is not None and work is not None else 0.0
    return total


def _setup(
    workload: ServingRequestsWorkload,
    pool: int,
    pricers: PoolPricers,
    budget: KvBudget,
    energies: dict[tuple[int, IterationShape], float],
) -> PoolSetup:
    """Pool ``pool`` as the loop runs it, its pricers handed the work of each shape; each shape's compute energy,
    when its pricers know it, put in ``energies`` (by pool and shape) as it is priced, so that its operators are
    built once."""

    def work(shape: IterationShape) -> Iteration:
        return Iteration(shape, workload.works(shape, pool))

    def price(iteration: Iteration) -> int | tuple[int, ...]:
        took = pricers.iteration(iteration)
        if pricers.energy is not None:
            energies[pool, iteration.shape] = pricers.energy(iteration)
        return took

    return PoolSetup(
        workload.config.pools[pool],
        budget.blocks,
        price,
        workload.host_swap(pool),
        workload.speculation(pool),
        pricers.experts,
        work,
        lambda group, member: workload.expert_work(group, member, pool),
        workload.kv_tiers(pool),
    )


def kv_budget(
    workload: ServingRequestsWorkload, pool: int, capacity: tuple[int | None, str], requests: Sequence[Request]
) -> KvBudget:
    """The KV budget of an NPU of pool ``pool`` holding ``capacity`` bytes (None: unknown, and why); a
    :class:`WorkloadError` when it cannot hold the largest request (the largest prompt, on a prefill pool)."""
    scheduler = workload.config.pools[pool].scheduler
    where = f"workload.pools.{pool}.scheduler"
    if capacity[0] is None and scheduler.kv_capacity is None:
        raise WorkloadError(
            f"{where}.kv_capacity: the KV cache's size is unknown ({capacity[1]}); give it, or system.memory_capacity"
        )
    kv = workload.kv_budget(capacity[0] or 0, pool)
    largest = workload.largest_request(requests, pool)
    needed = blocks_for(largest, scheduler.block_size)
    pp = workload.config.pools[pool].parallelism.pp
    if kv.blocks // pp < needed:
        said = (
            f"{where}.kv_capacity ({format_bytes(kv.kv_bytes)})"
            if scheduler.kv_capacity is not None
            else f"each NPU's {format_bytes(kv.capacity)} less weights {format_bytes(kv.weights)} and activations "
            f"{format_bytes(max(kv.activations, 0))} leave {format_bytes(max(kv.kv_bytes, 0))}"
        )
        shared = f", each of the {pp} batches in flight on the pipeline holding {kv.blocks // pp}" if pp > 1 else ""
        raise WorkloadError(
            f"{where}: the KV cache cannot hold one request: {said}, {max(kv.blocks, 0)} blocks of "
            f"{scheduler.block_size} tokens{shared}, but the largest request needs {needed} ({largest} tokens); give "
            f"more memory, more {'TP, PP or EP' if workload.config.model.experts else 'TP or PP'}, or shorter requests"
        )
    _check_watermark(scheduler, where, kv.blocks // pp, requests)
    return kv


def _check_watermark(scheduler: SchedulerConfig, where: str, blocks: int, requests: Sequence[Request]) -> None:
    """A :class:`WorkloadError` when the largest prompt cannot be admitted to a scheduler of ``blocks`` blocks with
    ``watermark`` of them kept free."""
    kept = int(scheduler.watermark * blocks)
    prompt = max((request.prompt_tokens for request in requests), default=0)
    if kept and blocks_for(prompt, scheduler.block_size) > blocks - kept:
        raise WorkloadError(
            f"{where}.watermark ({scheduler.watermark}) keeps {kept} of {blocks} KV blocks free, leaving too few for "
            f"the largest prompt ({prompt} tokens, {blocks_for(prompt, scheduler.block_size)} blocks), which would "
            "never be admitted; lower the watermark or give more KV cache"
        )


def _counters(samples: list[Sample], firsts: list[int], replicas: list[int]) -> tuple[CounterSample, ...]:
    """Batch size, queue length and KV blocks in use of each replica (summed over its engines, ``replicas`` giving
    each engine's) as each sample changes them, on the replica's first NPU (``firsts``)."""
    state: dict[int, tuple[int, int, int]] = {}
    counters = []
    for sample in samples:
        state[sample.engine] = (sample.batch, sample.queued, sample.kv_blocks_used)
        replica = replicas[sample.engine]
        totals = [sum(values) for values in zip(*(state[engine] for engine in state if replicas[engine] == replica))]
        counters += [
            CounterSample(firsts[replica], name, sample.time_ps, value)
            for name, value in zip(("batch size", "queue length", "KV blocks used"), totals)
        ]
    return tuple(counters)
