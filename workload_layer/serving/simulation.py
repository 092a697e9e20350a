"""The request-level simulation of a study's pools: requests arrive, a router hands each to a replica, every
replica runs iteration after iteration while it has work, each iteration as long as its pool's injected pricer says of its typed work
(:class:`~stratasim.kernel.serving.Iteration`: its shape and what it runs).

Replicas are numbered across the pools in order. Requests go to the replicas of the ``both`` pools or, disaggregated,
of the ``prefill`` pools; a prefill replica hands each request off as its first token is sampled, a router picks a
replica of the ``decode`` pools, and the request's KV cache moves there (all of one iteration's hand-offs start
together, priced by the injected :class:`~stratasim.kernel.serving.KvTransferPricer`, per destination replica) before it decodes there. A
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
:class:`~stratasim.kernel.serving.ExpertPricer` at the group's tokens and its busiest member's,
each bucketed), so all end together.

Sessions run closed-loop: a request that ``follows`` another (its session's previous turn) is released when that
one finishes, arriving ``think_ps`` later; it is then routed like any arrival, and its sequence holds it with that
arrival (``arrival_ps``), from which its TTFT counts. Requests that follow none arrive at their ``arrival_ps``.

Events happen at integer picoseconds. At one instant, arrivals are routed first (those given and released ones
arriving then, in index order), then the iterations ending then are finished (hand-offs starting their transfers,
finished requests releasing their followers), then the transfers ending then deliver, then followers released at
this instant with no think time are routed, then every idle replica with work starts its next iteration — so a
request arriving as an iteration ends joins the next one. Iteration
prices are cached by pool and shape (:class:`~stratasim.kernel.serving.IterationShape`), so a pricer is asked once per distinct bucketed
shape. The run ends when the last request finishes.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field, replace

from stratasim.kernel.errors import SimulationError, WorkloadError
from stratasim.kernel.serving import (
    IterationPricer,
    IterationShape,
    KvMove,
    KvTransferPricer,
)
from stratasim.kernel.units import INT64_MAX
from stratasim.workload_layer.serving.config import PoolConfig
from stratasim.workload_layer.serving.engines import EngineLayout, PoolSetup, engine_scheduler
from stratasim.workload_layer.serving.iteration import round_up
from stratasim.workload_layer.serving.iteration_prices import IterationPrices
from stratasim.workload_layer.serving.pool_run import GroupStep, IterationRecord, KvMoveRecord, PoolRun, Sample
from stratasim.workload_layer.serving.prefix_cache import summed
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.routing import Router
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.sequences import Batch, Sequence

__all__ = ["simulate_pool", "simulate_pools"]


_IDLE = IterationShape((), 0, 0, 0)
"""The shape of a member of an expert-parallel group running nothing of its own in its group's iteration."""


def simulate_pool(
    requests: Seq[Request], pool: PoolConfig, kv_blocks: int, pricer: IterationPricer, bucket: int
) -> PoolRun:
    """Serve ``requests`` on ``pool``'s replicas, each with ``kv_blocks`` KV blocks, iterations priced by
    ``pricer`` (cached by shape, bucketed by ``bucket`` tokens)."""
    return simulate_pools(requests, [PoolSetup(pool, kv_blocks, pricer)], bucket)


def simulate_pools(
    requests: Seq[Request],
    pools: Seq[PoolSetup],
    bucket: int,
    transfer: KvTransferPricer | None = None,
    kv_bytes_per_token: int = 0,
    priced: dict[tuple[int, IterationShape], tuple[int, ...]] | None = None,
    seed: int = 0,
) -> PoolRun:
    """Serve ``requests`` on ``pools`` (module docstring), KV moves (``kv_bytes_per_token`` bytes a cached token)
    priced by ``transfer`` (needed by prefill pools); ``priced``: the iteration prices by pool and shape, to share
    with another run of the same pools (filled as shapes are priced); ``seed``: of ``router: random``'s draws."""
    loop = _Loop(requests, pools, bucket, transfer, kv_bytes_per_token, {} if priced is None else priced, seed)
    while loop.arrival < len(loop.given) or loop.ends or loop.moving or loop.released:
        now = loop.next_instant()
        touched = loop.route_arrivals(now)
        touched |= loop.finish_iterations(now)
        touched |= loop.deliver(now)
        if loop.released:
            touched |= loop.route_arrivals(now)
        for index in sorted(touched - set(loop.running)):
            loop.start(index, now, touched)
    return loop.finished()


class _Loop:
    """The state of one run of :func:`simulate_pools`: the engines (schedulers) and their layout, the iterations
    running and ending (``ends``: (end time, engine)), the KV moves in flight (``moving``: (arrival, order,
    source, destination, sequences)), the requests arriving at their given times (``given``) and the next of them
    (``arrival``), the followers waiting for the request they follow (``followers``, by its index) and those
    released (``released``: (arrival, index, request)), the requests routed, and the run's record."""

    def __init__(
        self,
        requests: Seq[Request],
        pools: Seq[PoolSetup],
        bucket: int,
        transfer: KvTransferPricer | None,
        kv_bytes_per_token: int,
        priced: dict[tuple[int, IterationShape], tuple[int, ...]],
        seed: int,
    ) -> None:
        self.pools, self.bucket = pools, bucket
        self.transfer, self.kv_bytes_per_token = transfer, kv_bytes_per_token
        self.layout = EngineLayout(pools)
        self.owner, self.physical = self.layout.pool, self.layout.replica
        self.replicas = [
            engine_scheduler(pools[index], engine, self.physical[engine]) for engine, index in enumerate(self.owner)
        ]
        self.entry = self.layout.routed(lambda role: role != "decode")
        self.router = self._router(self.entry, seed)
        self.decode = self.layout.routed(lambda role: role == "decode")
        self.decode_router = self._router(self.decode, seed)
        if self.decode and transfer is None:
            raise WorkloadError("disaggregated pools need a KV transfer pricer")
        self.prices = IterationPrices(pools, bucket, priced)
        self.stages_free = [[0] * pools[index].pool.parallelism.pp for index in self.layout.replica_pool]
        self.running: dict[int, Batch] = {}
        self.ends: list[tuple[int, int]] = []
        self.moving: list[tuple[int, int, int, int, list[Sequence]]] = []
        self.ports = _Ports()
        self.run = PoolRun([], kv_blocks=pools[0].kv_blocks)
        self.arrival = self.routed = 0
        self.given, self.followers = _by_arrival(requests)
        self.released: list[tuple[int, int, Request]] = []

    def _router(self, engines: list[int], seed: int) -> Router:
        """The router of the pools of ``engines`` (one router for all of them), its draws seeded with ``seed``."""
        if not engines:
            return Router("round_robin")
        pool = self.pools[self.owner[engines[0]]].pool
        return Router(pool.router, pool.routing_balance, seed)

    def next_instant(self) -> int:
        """The time of the next arrival, iteration end or KV move's arrival; an error past the int64
        picoseconds."""
        instants = [self.given[self.arrival].arrival_ps] if self.arrival < len(self.given) else []
        instants += [heap[0][0] for heap in (self.ends, self.moving, self.released) if heap]
        now = min(instants)
        if now > INT64_MAX:
            raise SimulationError(
                "serving ran past the int64 picoseconds of simulated time (about 106 days): the requests arrive "
                "faster than the pools serve them; add replicas or serve fewer requests"
            )
        return now

    def route_arrivals(self, now: int) -> set[int]:
        """Hand the requests arriving at ``now`` (module docstring) to the entry engines; the engines they went
        to."""
        touched: set[int] = set()
        given = self.given
        if not self.released or self.released[0][0] != now:
            while self.arrival < len(given) and given[self.arrival].arrival_ps == now:
                self._route(given[self.arrival], touched)
                self.arrival += 1
            return touched
        arriving = []
        while self.released and self.released[0][0] == now:
            arriving.append(heapq.heappop(self.released)[2])
        while self.arrival < len(given) and given[self.arrival].arrival_ps == now:
            arriving.append(given[self.arrival])
            self.arrival += 1
        for request in sorted(arriving, key=lambda request: request.index):
            self._route(request, touched)
        return touched

    def _route(self, request: Request, touched: set[int]) -> None:
        """Hand ``request`` to the entry engine its router picks, adding the engine to ``touched``."""
        target = self.entry[self.router.pick([self.replicas[i] for i in self.entry], request, self.routed)]
        self.replicas[target].enqueue(request)
        self.run.sequences.append(self.replicas[target].waiting[-1])
        touched.add(target)
        self.routed += 1

    def finish_iterations(self, now: int) -> set[int]:
        """End the iterations ending at ``now``, starting the KV moves of what they handed off and releasing the
        followers of what finished; their engines."""
        touched = set()
        while self.ends and self.ends[0][0] == now:
            _, index = heapq.heappop(self.ends)
            replica = self.replicas[index]
            done = replica.finish_iteration(self.running.pop(index), now)
            touched.add(index)
            if replica.handed_off:
                self._start_moves(index, replica, now)
            if self.followers and done:
                self._release(done, now)
        return touched

    def _release(self, done: list[Sequence], now: int) -> None:
        """Release the followers of the sequences ``done`` at ``now``: each arrives its think time later."""
        for sequence in done:
            for follower in self.followers.pop(sequence.request.index, ()):
                arrival = now + follower.think_ps
                heapq.heappush(self.released, (arrival, follower.index, replace(follower, arrival_ps=arrival)))

    def deliver(self, now: int) -> set[int]:
        """Move the sequences whose KV caches arrive at ``now`` to their decode engines; the engines involved."""
        touched = set()
        while self.moving and self.moving[0][0] == now:
            _, _, source, destination, moved = heapq.heappop(self.moving)
            for sequence in moved:
                self.replicas[source].release(sequence)
                self.replicas[destination].receive(sequence)
            touched |= {source, destination}
        return touched

    def start(self, index: int, now: int, touched: set[int]) -> None:
        """Start engine ``index``'s next iteration at ``now`` (or its group's, once, with its first member
        ``touched``), or sample it idle."""
        group = self.layout.group[index]
        if group is not None:
            if index == min(group & touched):
                self._start_group(sorted(group), now)
            return
        replica = self.replicas[index]
        batch = replica.next_batch(now)
        if batch:
            shape = replica.shape(batch, self.bucket)
            price = self.prices.stages(self.owner[index], shape)
            self.running[index] = batch
            self.run.swap_ps += batch.swap_ps
            stages = self.stages_free[self.physical[index]]
            end = _through_stages(now, price, batch.swap_ps, stages)
            heapq.heappush(self.ends, (end, index))
            self.run.iterations += 1
            requests = tuple(
                [sequence.request.index for sequence, _ in batch.chunks]
                + [sequence.request.index for sequence in batch.decodes]
            )
            swaps = (batch.swap_out_ps, batch.swap_in_ps)
            record = IterationRecord(index, self.owner[index], now, end, shape, requests, tuple(stages), swaps=swaps)
            self.run.record.append(record)
        self._sample(now, index, batch)

    def _sample(self, now: int, engine: int, batch: Batch) -> None:
        """Record ``engine``'s state as ``batch`` starts (or as it falls idle, with an empty batch)."""
        replica = self.replicas[engine]
        size = len(batch.chunks) + len(batch.decodes)
        self.run.samples.append(
            Sample(now, engine, size, len(replica.running), len(replica.waiting), replica.cache.used)
        )

    def _start_group(self, group: list[int], now: int) -> None:
        """Start an iteration of the idle expert-parallel ``group`` at ``now`` if any member has work, every member
        ending with the slowest (module docstring); sample each member."""
        pool, replicas, prices = self.owner[group[0]], self.replicas, self.prices
        batches = [replicas[engine].next_batch(now) for engine in group]
        busy = [(engine, batch) for engine, batch in zip(group, batches) if batch]
        if busy:
            shapes = [replicas[engine].shape(batch, prices.bucket) for engine, batch in busy]
            owns = [batch.swap_ps + prices.stages(pool, shape)[0] for (_, batch), shape in zip(busy, shapes)]
            tokens = [shape.tokens for shape in shapes]
            end = now + max(owns) + prices.expert_part(pool, sum(tokens), max(tokens))
            for engine, batch in zip(group, batches):
                self.running[engine] = batch
                heapq.heappush(self.ends, (end, engine))
                self.run.swap_ps += batch.swap_ps
            self.run.iterations += len(busy)
            self._record_group(group, now, end, busy, shapes, owns)
        for engine, batch in zip(group, batches):
            self._sample(now, engine, batch)

    def _record_group(
        self,
        group: list[int],
        now: int,
        end: int,
        busy: list[tuple[int, Batch]],
        shapes: list[IterationShape],
        owns: list[int],
    ) -> None:
        """Record the iteration of ``group`` from ``now`` to ``end`` for each member: the ``busy`` ones' batches,
        ``shapes`` and own parts' times (``owns``), the others idle (:class:`GroupStep`)."""
        bucket = self.prices.bucket
        tokens = [shape.tokens for shape in shapes]
        experts = now + max(owns)
        own = {engine: (shape, batch, took) for (engine, batch), shape, took in zip(busy, shapes, owns)}
        for engine in group:
            shape, batch, took = own.get(engine, (_IDLE, Batch(), 0))
            batched = [sequence for sequence, _ in batch.chunks] + batch.decodes
            requests = tuple(sequence.request.index for sequence in batched)
            member = GroupStep(round_up(sum(tokens), bucket), round_up(max(tokens), bucket), now + took, experts)
            swaps = (batch.swap_out_ps, batch.swap_in_ps)
            record = IterationRecord(engine, self.owner[engine], now, end, shape, requests, (end,), member, swaps)
            self.run.record.append(record)

    def _start_moves(self, source: int, replica: ReplicaScheduler, now: int) -> None:
        """Route the sequences engine ``source`` (``replica``) handed off to decode engines and start their KV
        moves, one per destination, priced between the engines' replicas: together, once the source replica has
        sent its earlier moves and every destination replica has received its own (``ports``); each sequence's
        transfer time counts from ``now``, its wait included."""
        assert self.transfer is not None
        physical, ports, run = self.physical, self.ports, self.run
        groups: dict[int, list[Sequence]] = {}
        decoders = [self.replicas[i] for i in self.decode]
        for sequence in replica.handed_off:
            destination = self.decode[self.decode_router.pick(decoders, sequence.request, sequence.request.index)]
            self.replicas[destination].expect(sequence)
            groups.setdefault(destination, []).append(sequence)
        replica.handed_off.clear()
        tokens = [
            (physical[destination], sum(sequence.cached for sequence in moved)) for destination, moved in groups.items()
        ]
        moves = tuple(KvMove(to, count, count * self.kv_bytes_per_token) for to, count in tokens)
        start = max(now, ports.sending.get(physical[source], 0), *(ports.receiving.get(to, 0) for to, _ in tokens))
        sent = start
        priced = zip(groups.items(), moves, self.transfer(physical[source], moves), strict=True)
        for (destination, moved), move, took in priced:
            if took < 0:
                raise WorkloadError(
                    f"the KV transfer pricer gave {took} ps from replica {physical[source]} to {physical[destination]}"
                )
            arrives = start + took
            requests = tuple(sequence.request.index for sequence in moved)
            run.moves.append(KvMoveRecord(source, destination, now, start, arrives, move.size, requests))
            ports.receiving[physical[destination]] = arrives
            sent = max(sent, arrives)
            heapq.heappush(self.moving, (arrives, len(run.transfers_ps), source, destination, moved))
            run.transfers_ps.extend([arrives - now] * len(moved))
        ports.sending[physical[source]] = sent

    def finished(self) -> PoolRun:
        """The run's record, its totals filled in."""
        run, replicas = self.run, self.replicas
        if self.followers:
            raise WorkloadError(
                f"{sum(map(len, self.followers.values()))} requests follow requests that never finished: a request "
                "may follow only an earlier one"
            )
        run.shapes_priced = len(self.prices.shapes) + len(self.prices.experts)
        run.preemptions = sum(replica.preemptions for replica in replicas)
        run.swap_outs = sum(replica.swap_outs for replica in replicas)
        run.speculative_steps = sum(replica.speculative_steps for replica in replicas)
        run.speculative_tokens = sum(replica.speculative_tokens for replica in replicas)
        run.kv_peak_blocks = [replica.cache.peak_used for replica in replicas]
        run.kv_replica_blocks = [replica.cache.blocks for replica in replicas]
        run.engine_replicas = self.physical
        run.shape_runs, run.expert_runs = dict(self.prices.runs), dict(self.prices.expert_runs)
        caches = [replica.prefix for replica in replicas if replica.prefix is not None]
        if caches:
            run.prefix = summed(cache.counts for cache in caches)
        return run


def _by_arrival(requests: Seq[Request]) -> tuple[Seq[Request], dict[int, list[Request]]]:
    """The requests arriving at their given times (``requests`` itself when none follows another) and the
    followers of each request by its index; an error for a follower of no earlier request."""
    if all(request.follows < 0 for request in requests):
        return requests, {}
    followers: defaultdict[int, list[Request]] = defaultdict(list)
    for position, request in enumerate(requests):
        if request.follows >= 0:
            if request.index != position or request.follows >= position:
                raise WorkloadError(
                    f"request {position} follows request {request.follows}: a request follows an earlier one, "
                    "its index its place among the requests"
                )
            followers[request.follows].append(request)
    return [request for request in requests if request.follows < 0], dict(followers)


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
