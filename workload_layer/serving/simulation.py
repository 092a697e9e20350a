"""The request-level simulation of one pool: requests arrive, a router hands each to a replica, every replica
runs iteration after iteration while it has work, each iteration as long as the injected pricer says.

Events happen at integer picoseconds. At one instant, arrivals are routed first, then the iterations ending then
are finished, then every idle replica with work starts its next iteration — so a request arriving as an
iteration ends joins the next one. Iteration prices are cached by shape (:class:`IterationShape`), so the pricer
is asked once per distinct bucketed shape. The run ends when the last request finishes.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.serving.config import PoolConfig
from stratasim.workload_layer.serving.iteration import IterationPricer, IterationShape
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.scheduler import Batch, ReplicaScheduler, Sequence

__all__ = ["PoolRun", "Sample", "simulate_pool", "route"]


@dataclass(frozen=True)
class Sample:
    """A replica's state as an iteration starts or as it falls idle: when (ps), sequences batched, running,
    queued, KV blocks used."""

    time_ps: int
    replica: int
    batch: int
    running: int
    queued: int
    kv_blocks_used: int


@dataclass
class PoolRun:
    """What a pool's run produced: every request's sequence (in arrival order), the per-iteration samples, the
    iterations run and the distinct shapes priced, preemptions and each replica's KV blocks and peak use."""

    sequences: list[Sequence]
    samples: list[Sample] = field(default_factory=list)
    iterations: int = 0
    shapes_priced: int = 0
    preemptions: int = 0
    kv_blocks: int = 0
    kv_peak_blocks: list[int] = field(default_factory=list)


def simulate_pool(
    requests: Seq[Request], pool: PoolConfig, kv_blocks: int, pricer: IterationPricer, bucket: int
) -> PoolRun:
    """Serve ``requests`` on ``pool``'s replicas, each with ``kv_blocks`` KV blocks, iterations priced by
    ``pricer`` (cached by shape, bucketed by ``bucket`` tokens)."""
    replicas = [ReplicaScheduler(pool.scheduler, kv_blocks) for _ in range(pool.replicas)]
    prices: dict[IterationShape, int] = {}
    running: dict[int, Batch] = {}
    ends: list[tuple[int, int]] = []  # (end time, replica) of the iterations running
    sequences: list[Sequence] = []
    run = PoolRun(sequences, kv_blocks=kv_blocks)
    arrival, total = 0, len(requests)
    while arrival < total or ends:
        now = min(requests[arrival].arrival_ps if arrival < total else ends[0][0], ends[0][0] if ends else 1 << 62)
        touched = set()
        while arrival < total and requests[arrival].arrival_ps == now:
            target = route(pool.router, replicas, arrival)
            replicas[target].enqueue(requests[arrival])
            sequences.append(replicas[target].waiting[-1])
            touched.add(target)
            arrival += 1
        while ends and ends[0][0] == now:
            _, index = heapq.heappop(ends)
            replicas[index].finish_iteration(running.pop(index), now)
            touched.add(index)
        for index in sorted(touched - set(running)):
            replica = replicas[index]
            batch = replica.next_batch(now)
            if not batch:  # idle: the samples say so until its next iteration
                run.samples.append(Sample(now, index, 0, len(replica.running), len(replica.waiting), replica.cache.used))
                continue
            shape = replica.shape(batch, bucket)
            price = prices.get(shape)
            if price is None:
                price = prices[shape] = pricer(shape)
                if price <= 0:
                    raise WorkloadError(f"the iteration pricer gave {price} ps for {shape}; an iteration takes time")
            running[index] = batch
            heapq.heappush(ends, (now + price, index))
            run.iterations += 1
            run.samples.append(Sample(now, index, len(batch.chunks) + len(batch.decodes), len(replica.running),
                                      len(replica.waiting), replica.cache.used))  # fmt: skip
    run.shapes_priced = len(prices)
    run.preemptions = sum(replica.preemptions for replica in replicas)
    run.kv_peak_blocks = [replica.cache.peak_used for replica in replicas]
    return run


def route(router: str, replicas: list[ReplicaScheduler], arrival: int) -> int:
    """The replica the ``arrival``-th request goes to (the lowest index on ties): in turn (``round_robin``), the
    one with the fewest prompt and output tokens outstanding (``least_outstanding_tokens``), or the one whose KV
    cache is least committed (``least_kv_load``): blocks in use plus those its queued prompts will take."""
    if router == "round_robin":
        return arrival % len(replicas)
    if router == "least_kv_load":
        return min(range(len(replicas)), key=lambda index: (replicas[index].kv_load(), index))
    return min(range(len(replicas)), key=lambda index: (replicas[index].outstanding_tokens, index))
