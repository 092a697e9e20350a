"""The request-level simulation of a study's pools: requests arrive, a router hands each to a replica, every
replica runs iteration after iteration while it has work, each iteration as long as its pool's injected pricer says.

Replicas are numbered across the pools in order. Requests go to the replicas of the ``both`` pools or, disaggregated,
of the ``prefill`` pools; a prefill replica hands each request off as its first token is sampled, a router picks a
replica of the ``decode`` pools, and the request's KV cache moves there (all of one iteration's hand-offs start
together, priced by the injected :class:`KvTransferPricer`, per destination replica) before it decodes there. A
replica's links carry one set of moves at a time: moves wait until their source replica has sent its earlier ones
and each destination has received its earlier ones, so moves overlapping in time queue at the replicas they share
(as flows sharing a port of a non-blocking fabric finish, the last no sooner than their sizes allow).

A replica of ``pp`` pipeline stages runs ``pp`` schedulers (engines: vLLM v0's virtual engines), each with
``1 / pp`` of its KV blocks, routed to as replicas are, so that ``pp`` batches are in flight: an iteration goes
through the stages in order, each stage taking it once it has finished the batches ahead of it (the pricer gives
each stage's time). Without pipeline parallelism an engine is its replica.

The ``ep`` replicas of an expert-parallel group (``parallelism.ep``) step in lock-step, as vLLM's data-parallel
engines do for their mixture-of-experts layers: they start an iteration together once all are idle and any has
work (a member with nothing runs an empty batch, still joining the all-to-alls), and the iteration lasts the
longest member's own part (its pricer's price, swap copies included) plus the group's expert part (the pool's
:class:`~stratasim.workload_layer.serving.iteration.ExpertPricer` at the group's tokens and its busiest member's,
each bucketed), so all end together.

Events happen at integer picoseconds. At one instant, arrivals are routed first, then the iterations ending then
are finished (hand-offs starting their transfers), then the transfers ending then deliver, then every idle replica
with work starts its next iteration — so a request arriving as an iteration ends joins the next one. Iteration
prices are cached by pool and shape (:class:`IterationShape`), so a pricer is asked once per distinct bucketed
shape. The run ends when the last request finishes.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Protocol

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.serving.config import PoolConfig
from stratasim.workload_layer.serving.iteration import ExpertPricer, IterationPricer, IterationShape, round_up
from stratasim.workload_layer.serving.kv_cache import HostSwap
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.scheduler import Batch, ReplicaScheduler, Sequence
from stratasim.workload_layer.serving.speculative import Speculation

__all__ = ["PoolRun", "PoolSetup", "KvTransferPricer", "Sample", "simulate_pool", "simulate_pools", "route"]


@dataclass(frozen=True)
class Sample:
    """An engine's state as an iteration starts or as it falls idle: when (ps), which engine (a replica, without
    pipeline parallelism; :attr:`PoolRun.engine_replicas` says whose), sequences batched, running, queued, KV
    blocks used."""

    time_ps: int
    engine: int
    batch: int
    running: int
    queued: int
    kv_blocks_used: int


@dataclass(frozen=True)
class PoolSetup:
    """A pool as the simulation runs it: its configuration, each replica's KV blocks, its iteration pricer, with
    ``preemption: swap`` each replica's host memory for swapped KV blocks, its speculative decoding, and with
    expert parallelism the pricer of its groups' expert parts (its iteration pricer then pricing the rest)."""

    pool: PoolConfig
    kv_blocks: int
    pricer: IterationPricer
    swap: HostSwap | None = None
    speculation: Speculation | None = None
    experts: ExpertPricer | None = None


class KvTransferPricer(Protocol):
    """Prices KV-cache moves started together from replica ``source``: picoseconds until each ``(destination
    replica, tokens)`` move has arrived."""

    def __call__(self, source: int, moves: tuple[tuple[int, int], ...]) -> tuple[int, ...]: ...


@dataclass
class PoolRun:
    """What a run produced: every request's sequence (in arrival order), the per-iteration samples, the
    iterations run and the distinct shapes priced, preemptions (``swap_outs`` of them swapped to host memory, for
    ``swap_ps`` of copies either way), the decode steps and tokens of speculative decoding, the first pool's KV
    blocks per replica (``kv_blocks``), each engine's blocks and peak use, each handed-off sequence's KV transfer
    time (ps), and the replica of each engine."""

    sequences: list[Sequence]
    samples: list[Sample] = field(default_factory=list)
    iterations: int = 0
    shapes_priced: int = 0
    preemptions: int = 0
    swap_outs: int = 0
    swap_ps: int = 0
    speculative_steps: int = 0
    speculative_tokens: int = 0
    kv_blocks: int = 0
    kv_peak_blocks: list[int] = field(default_factory=list)
    kv_replica_blocks: list[int] = field(default_factory=list)
    transfers_ps: list[int] = field(default_factory=list)
    engine_replicas: list[int] = field(default_factory=list)


def simulate_pool(
    requests: Seq[Request], pool: PoolConfig, kv_blocks: int, pricer: IterationPricer, bucket: int
) -> PoolRun:
    """Serve ``requests`` on ``pool``'s replicas, each with ``kv_blocks`` KV blocks, iterations priced by
    ``pricer`` (cached by shape, bucketed by ``bucket`` tokens)."""
    return simulate_pools(requests, [PoolSetup(pool, kv_blocks, pricer)], bucket)


def simulate_pools(
    requests: Seq[Request], pools: Seq[PoolSetup], bucket: int, transfer: KvTransferPricer | None = None
) -> PoolRun:
    """Serve ``requests`` on ``pools`` (module docstring), KV moves priced by ``transfer`` (needed by prefill
    pools)."""
    layout = _EngineLayout(pools)
    owner, physical = layout.pool, layout.replica
    replicas = [_engine(pools[index], engine, physical[engine]) for engine, index in enumerate(owner)]
    entry = layout.routed(lambda role: role != "decode")
    decode = layout.routed(lambda role: role == "decode")
    if decode and transfer is None:
        raise WorkloadError("disaggregated pools need a KV transfer pricer")
    prices = _Prices(pools, bucket)
    shapes, groups = prices.shapes, layout.group
    stages_free = [[0] * pools[index].pool.parallelism.pp for index in layout.replica_pool]
    running: dict[int, Batch] = {}
    ends: list[tuple[int, int]] = []  # (end time, engine) of the iterations running
    moving: list[tuple[int, int, int, int, list[Sequence]]] = []  # (arrival, order, source, destination, sequences)
    ports = _Ports()
    sequences: list[Sequence] = []
    run = PoolRun(sequences, kv_blocks=pools[0].kv_blocks)
    arrival, total = 0, len(requests)
    while arrival < total or ends or moving:
        now = min(
            requests[arrival].arrival_ps if arrival < total else 1 << 62,
            ends[0][0] if ends else 1 << 62,
            moving[0][0] if moving else 1 << 62,
        )
        touched = set()
        while arrival < total and requests[arrival].arrival_ps == now:
            target = entry[route(pools[owner[entry[0]]].pool.router, [replicas[i] for i in entry], arrival)]
            replicas[target].enqueue(requests[arrival])
            sequences.append(replicas[target].waiting[-1])
            touched.add(target)
            arrival += 1
        while ends and ends[0][0] == now:
            _, index = heapq.heappop(ends)
            replica = replicas[index]
            replica.finish_iteration(running.pop(index), now)
            touched.add(index)
            if replica.handed_off:
                assert transfer is not None
                _start_moves(
                    index,
                    replica,
                    replicas,
                    decode,
                    pools[owner[decode[0]]].pool.router,
                    transfer,
                    now,
                    moving,
                    run,
                    physical,
                    ports,
                )
        while moving and moving[0][0] == now:
            _, _, source, destination, moved = heapq.heappop(moving)
            for sequence in moved:
                replicas[source].release(sequence)
                replicas[destination].receive(sequence)
            touched |= {source, destination}
        for index in sorted(touched - set(running)):
            group = groups[index]
            if group is not None:
                if index == min(group & touched):  # the group starts once, with its first member touched
                    _start_group(sorted(group), replicas, now, prices, owner[index], running, ends, run)
                continue
            replica = replicas[index]
            batch = replica.next_batch(now)
            if not batch:  # idle: the samples say so until its next iteration
                run.samples.append(
                    Sample(now, index, 0, len(replica.running), len(replica.waiting), replica.cache.used)
                )
                continue
            shape = replica.shape(batch, bucket)
            price = shapes.get((owner[index], shape)) or prices.stages(owner[index], shape)
            running[index] = batch
            run.swap_ps += batch.swap_ps
            heapq.heappush(ends, (_through_stages(now, price, batch.swap_ps, stages_free[physical[index]]), index))
            run.iterations += 1
            run.samples.append(
                Sample(
                    now,
                    index,
                    len(batch.chunks) + len(batch.decodes),
                    len(replica.running),
                    len(replica.waiting),
                    replica.cache.used,
                )
            )
    run.shapes_priced = len(prices.shapes) + len(prices.experts)
    run.preemptions = sum(replica.preemptions for replica in replicas)
    run.swap_outs = sum(replica.swap_outs for replica in replicas)
    run.speculative_steps = sum(replica.speculative_steps for replica in replicas)
    run.speculative_tokens = sum(replica.speculative_tokens for replica in replicas)
    run.kv_peak_blocks = [replica.cache.peak_used for replica in replicas]
    run.kv_replica_blocks = [replica.cache.blocks for replica in replicas]
    run.engine_replicas = physical
    return run


class _EngineLayout:
    """The schedulers of ``pools``: each replica of ``pp`` stages runs ``pp`` of them (vLLM v0's virtual engines),
    numbered replica by replica; ``pool`` and ``replica`` give each one's pool and (global) replica, ``group`` the
    engines of its expert-parallel group (None without expert parallelism)."""

    def __init__(self, pools: Seq[PoolSetup]) -> None:
        self.replica_pool = [index for index, setup in enumerate(pools) for _ in range(setup.pool.replicas)]
        self.pool: list[int] = []
        self.replica: list[int] = []
        self.virtual: list[int] = []
        self.group: list[frozenset[int] | None] = []
        self._roles = [setup.pool.role for setup in pools]
        for replica, index in enumerate(self.replica_pool):
            for virtual in range(pools[index].pool.parallelism.pp):
                self.pool.append(index)
                self.replica.append(replica)
                self.virtual.append(virtual)
        firsts: dict[int, int] = {}
        for engine, index in enumerate(self.pool):
            firsts.setdefault(index, engine)
        for engine, index in enumerate(self.pool):  # an expert-parallel pool has one engine a replica (pp 1)
            ep, first = pools[index].pool.parallelism.ep, firsts[index]
            start = first + (engine - first) // ep * ep
            self.group.append(frozenset(range(start, start + ep)) if ep > 1 else None)

    def routed(self, role: Callable[[str], bool]) -> list[int]:
        """The engines of the pools whose role passes ``role``, in the order a router sees them: each replica's
        first engine, replica by replica, then each one's second..."""
        engines = [engine for engine, index in enumerate(self.pool) if role(self._roles[index])]
        return sorted(engines, key=lambda engine: (self.virtual[engine], engine))


def _engine(setup: PoolSetup, engine: int, replica: int) -> ReplicaScheduler:
    """A scheduler of ``setup``'s pool on ``replica``: its share of the replica's KV blocks and host memory (each of
    the ``pp`` engines gets ``1 / pp``, as vLLM v0's scheduler divides them)."""
    pp = setup.pool.parallelism.pp
    swap = None if setup.swap is None else HostSwap(setup.swap.blocks // pp, setup.swap.block_ps)
    return ReplicaScheduler(
        setup.pool.scheduler, setup.kv_blocks // pp, setup.pool.role == "prefill", swap, setup.speculation, engine
    )


class _Prices:
    """The pricers' answers, asked once each: iterations by pool and shape (:attr:`shapes`), expert parts by pool
    and bucketed group and member tokens (:attr:`experts`)."""

    def __init__(self, pools: Seq[PoolSetup], bucket: int) -> None:
        self._pools, self.bucket = pools, bucket
        self.shapes: dict[tuple[int, IterationShape], tuple[int, ...]] = {}
        self.experts: dict[tuple[int, int, int], int] = {}

    def stages(self, pool: int, shape: IterationShape) -> tuple[int, ...]:
        """Each stage's time for ``shape`` on pool ``pool``."""
        price = self.shapes.get((pool, shape))
        if price is None:
            price = self.shapes[pool, shape] = _stage_prices(self._pools[pool], shape)
        return price

    def expert_part(self, pool: int, group_tokens: int, member_tokens: int) -> int:
        """The expert part of an iteration of a group of pool ``pool``, its tokens bucketed."""
        key = (pool, round_up(group_tokens, self.bucket), round_up(member_tokens, self.bucket))
        price = self.experts.get(key)
        if price is None:
            pricer = self._pools[pool].experts
            if pricer is None:
                raise WorkloadError(f"pool {self._pools[pool].pool.name!r} is expert-parallel but has no expert pricer")
            price = self.experts[key] = pricer(key[1], key[2])
            if price <= 0:
                raise WorkloadError(f"the expert pricer gave {price} ps for {key[1]} tokens; an iteration takes time")
        return price


def _start_group(
    group: list[int],
    replicas: list[ReplicaScheduler],
    now: int,
    prices: _Prices,
    pool: int,
    running: dict[int, Batch],
    ends: list[tuple[int, int]],
    run: PoolRun,
) -> None:
    """Start an iteration of the idle expert-parallel ``group`` (engines of pool ``pool``) at ``now`` if any member
    has work, every member ending with the slowest (module docstring); else sample it idle."""
    batches = [replicas[engine].next_batch(now) for engine in group]
    busy = [(engine, batch) for engine, batch in zip(group, batches) if batch]
    if busy:
        shapes = [replicas[engine].shape(batch, prices.bucket) for engine, batch in busy]
        own = max(batch.swap_ps + prices.stages(pool, shape)[0] for (_, batch), shape in zip(busy, shapes))
        tokens = [shape.tokens for shape in shapes]
        end = now + own + prices.expert_part(pool, sum(tokens), max(tokens))
        for engine, batch in zip(group, batches):
            running[engine] = batch
            heapq.heappush(ends, (end, engine))
            run.swap_ps += batch.swap_ps
        run.iterations += len(busy)
    for engine, batch in zip(group, batches):
        replica = replicas[engine]
        run.samples.append(
            Sample(
                now,
                engine,
                len(batch.chunks) + len(batch.decodes),
                len(replica.running),
                len(replica.waiting),
                replica.cache.used,
            )
        )


def _stage_prices(setup: PoolSetup, shape: IterationShape) -> tuple[int, ...]:
    """Each pipeline stage's time for ``shape`` from ``setup``'s pricer (one figure for the whole iteration on a
    single stage), checked."""
    price = setup.pricer(shape)
    stages = price if isinstance(price, tuple) else (price,)
    if len(stages) != setup.pool.parallelism.pp or min(stages) <= 0:
        raise WorkloadError(
            f"the iteration pricer gave {price} ps for {shape}; an iteration takes time on each of "
            f"its {setup.pool.parallelism.pp} stages"
        )
    return stages


def _through_stages(start: int, stages: tuple[int, ...], swap_ps: int, free: list[int]) -> int:
    """When an iteration starting at ``start`` leaves the last stage: each stage takes it once it is free of the
    batches ahead (``free``, updated) and the previous stage has handed it over, copying its swapped KV blocks
    (``swap_ps``) before its own part."""
    at = start
    for stage, took in enumerate(stages):
        at = max(at, free[stage]) + swap_ps + took
        free[stage] = at
    return at


@dataclass
class _Ports:
    """When each replica's links are next free to send (``sending``) and to receive (``receiving``) KV moves."""

    sending: dict[int, int] = field(default_factory=dict)
    receiving: dict[int, int] = field(default_factory=dict)


def _start_moves(
    source: int,
    replica: ReplicaScheduler,
    replicas: list[ReplicaScheduler],
    decode: list[int],
    router: str,
    transfer: KvTransferPricer,
    now: int,
    moving: list[tuple[int, int, int, int, list[Sequence]]],
    run: PoolRun,
    physical: list[int],
    ports: _Ports,
) -> None:
    """Route the sequences engine ``source`` (``replica``) handed off to decode engines and start their KV moves,
    one per destination, priced between the engines' replicas (``physical``): together, once the source replica has
    sent its earlier moves and every destination replica has received its own (``ports``); each sequence's transfer
    time counts from ``now``, its wait included."""
    groups: dict[int, list[Sequence]] = {}
    for sequence in replica.handed_off:
        destination = decode[route(router, [replicas[i] for i in decode], sequence.request.index)]
        replicas[destination].expect(sequence)
        groups.setdefault(destination, []).append(sequence)
    replica.handed_off.clear()
    moves = tuple(
        (physical[destination], sum(sequence.cached for sequence in moved)) for destination, moved in groups.items()
    )
    start = max(now, ports.sending.get(physical[source], 0), *(ports.receiving.get(to, 0) for to, _ in moves))
    sent = start
    for (destination, moved), took in zip(groups.items(), transfer(physical[source], moves), strict=True):
        if took < 0:
            raise WorkloadError(
                f"the KV transfer pricer gave {took} ps from replica {physical[source]} to {physical[destination]}"
            )
        arrives = start + took
        ports.receiving[physical[destination]] = arrives
        sent = max(sent, arrives)
        heapq.heappush(moving, (arrives, len(run.transfers_ps), source, destination, moved))
        run.transfers_ps.extend([arrives - now] * len(moved))
    ports.sending[physical[source]] = sent


def route(router: str, replicas: list[ReplicaScheduler], arrival: int) -> int:
    """The replica the ``arrival``-th request goes to (the lowest index on ties): in turn (``round_robin``), the
    one with the fewest prompt and output tokens outstanding (``least_outstanding_tokens``), or the one whose KV
    cache is least committed (``least_kv_load``): blocks in use plus those its queued prompts will take."""
    if router == "round_robin":
        return arrival % len(replicas)
    if router == "least_kv_load":
        return min(range(len(replicas)), key=lambda index: (replicas[index].kv_load(), index))
    return min(range(len(replicas)), key=lambda index: (replicas[index].outstanding_tokens, index))
