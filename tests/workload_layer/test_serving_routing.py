"""The routers that weigh the request (``prefix_aware``, ``session_affinity``) and Vidur's exact LOR
(``least_pending_requests``), each against a hand-worked routing."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import ValidationError

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.serving.config import RoutingBalance, SchedulerConfig, ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.kv_tiers import KvTier
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.routing import Router, pending_requests, route
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.simulation import simulate_pools
from tests.workload_layer.test_serving import MODEL, MS, config, fixed_transfer, linear_pricer, poisson

SECOND = 1000 * MS
CACHED = SchedulerConfig(prefix_caching=True, block_size=16)


def finished(replica: ReplicaScheduler, request: Request) -> None:
    """Serve ``request`` alone on ``replica`` to its end (its full blocks then cached there)."""
    replica.enqueue(request)
    now = 0
    while replica.waiting or replica.running:
        now += 1
        replica.finish_iteration(replica.next_batch(now), now)


def test_a_later_turn_goes_to_the_replica_holding_its_first_even_when_the_other_is_idle() -> None:
    """Replica 0 served session 3's first turn (100 prompt and 10 output tokens: 109 computed, 6 full blocks cached)
    and holds a queued request of 500 tokens; replica 1 is idle. The second turn (140 tokens) finds 6 blocks on
    replica 0 and none on 1: prefix_aware sends it to 0, counting tokens to 1."""
    replicas = [ReplicaScheduler(CACHED, 1000) for _ in range(2)]
    finished(replicas[0], Request(0, 0, 100, 10, session=3))
    replicas[0].enqueue(Request(1, 0, 400, 100))
    turn = Request(2, 0, 140, 5, session=3, turn=1, follows=0)
    assert replicas[0].prefix is not None
    assert replicas[0].prefix.match(turn, turn.prompt_tokens) == 6
    assert Router("prefix_aware").pick(replicas, turn, 2) == 0
    assert route("least_outstanding_tokens", replicas, 2) == 1


def test_blocks_in_a_kv_tier_count_as_the_gpus_do() -> None:
    """Replica 0 (8 blocks, a host tier) served session 3's first turn (6 full blocks cached), then a 120-token
    request took all 8 blocks, evicting those 6 to the host tier: the second turn still finds them there, and goes
    to replica 0 though replica 1 is idle."""
    replicas = [ReplicaScheduler(CACHED, 8, tiers=(KvTier("host", 100, 1),)), ReplicaScheduler(CACHED, 8)]
    finished(replicas[0], Request(0, 0, 100, 10, session=3))
    finished(replicas[0], Request(1, 0, 120, 1))
    replicas[0].enqueue(Request(2, 0, 16, 100))
    cache = replicas[0].prefix
    assert cache is not None and cache.tiers is not None
    assert not any(key in cache.references for key in (("s", 3, 0), ("s", 3, 5)))
    assert all(cache.tiers.holds(("s", 3, block)) for block in range(6))
    turn = Request(3, 0, 140, 5, session=3, turn=1)
    assert cache.match(turn, turn.prompt_tokens) == 6
    assert Router("prefix_aware").pick(replicas, turn, 3) == 0


def test_the_look_up_changes_neither_the_lru_order_nor_a_reference() -> None:
    """Routing looks the blocks up only: the evictable order and the reference counts are as before."""
    replicas = [ReplicaScheduler(CACHED, 1000) for _ in range(2)]
    finished(replicas[0], Request(0, 0, 100, 10, session=3))
    cache = replicas[0].prefix
    assert cache is not None
    before = (list(cache.evictable), dict(cache.references), cache.used)
    Router("prefix_aware").pick(replicas, Request(1, 0, 140, 5, session=3, turn=1), 1)
    assert (list(cache.evictable), dict(cache.references), cache.used) == before


def test_ties_and_misses_go_by_outstanding_tokens_then_the_lowest_index() -> None:
    """Both replicas hold session 3's first 6 blocks: the tie goes to the replica with fewer outstanding tokens,
    with as many to the lower index; a request neither holds goes by tokens too."""
    replicas = [ReplicaScheduler(CACHED, 1000) for _ in range(3)]
    for replica in replicas[:2]:
        finished(replica, Request(0, 0, 100, 10, session=3))
    turn = Request(2, 0, 140, 5, session=3, turn=1)
    router = Router("prefix_aware")
    assert router.pick(replicas, turn, 2) == 0
    replicas[0].enqueue(Request(4, 0, 20, 1))
    assert router.pick(replicas, turn, 2) == 1  # replica 2 is idle too, but holds nothing
    assert router.pick(replicas, Request(5, 0, 140, 5, session=9), 3) == 1  # a miss: 0 tokens on 1 and 2, then 1


def test_a_large_imbalance_routes_by_load_as_sglangs_router() -> None:
    """Replica 0 holds the turn's blocks and 3 queued requests, replica 1 none: 3 - 0 > abs 2 and 3 > 1.0001 x 0,
    imbalanced, so the turn goes to replica 1; with abs 3 (3 - 0 is not more) it goes by cache, to 0."""
    replicas = [ReplicaScheduler(CACHED, 1000) for _ in range(2)]
    finished(replicas[0], Request(0, 0, 100, 10, session=3))
    for index in (1, 2, 3):
        replicas[0].enqueue(Request(index, 0, 16, 1))
    turn = Request(4, 0, 140, 5, session=3, turn=1)
    assert Router("prefix_aware", RoutingBalance(abs=2)).pick(replicas, turn, 4) == 1
    assert Router("prefix_aware", RoutingBalance(abs=3)).pick(replicas, turn, 4) == 0
    assert Router("prefix_aware", RoutingBalance(abs=2, rel=1e6)).pick(replicas, turn, 4) == 1  # 3 > 1e6 x 0


def test_session_affinity_keeps_a_session_where_its_first_turn_went() -> None:
    """The first turn goes by tokens (both idle: replica 0); the second follows it there though replica 0 is now
    busier; a request of no session goes by tokens."""
    replicas = [ReplicaScheduler(SchedulerConfig(), 1000) for _ in range(2)]
    router = Router("session_affinity")
    first = Request(0, 0, 100, 10, session=3)
    assert router.pick(replicas, first, 0) == 0
    replicas[0].enqueue(first)
    assert router.pick(replicas, Request(1, 0, 16, 1), 1) == 1
    assert router.pick(replicas, Request(2, 0, 140, 5, session=3, turn=1), 2) == 0


def test_engines_without_a_prefix_cache_hold_nothing_and_stateless_routers_refuse_the_request_ones() -> None:
    """Without prefix caching (the report's run without the cache) every request is a miss: by tokens."""
    replicas = [ReplicaScheduler(SchedulerConfig(), 1000) for _ in range(2)]
    replicas[0].enqueue(Request(0, 0, 16, 1))
    assert Router("prefix_aware").pick(replicas, Request(1, 0, 16, 1), 1) == 1
    with pytest.raises(WorkloadError, match="weighs the request or draws at random"):
        route("session_affinity", replicas, 0)


def conversation_and_a_long_request() -> list[Request]:
    """Session 0's first turn and another request at 0, a long request at 0.5 s, and the second turn 1 s after
    the first ends."""
    return [
        Request(0, 0, 100, 10, session=0),
        Request(1, 0, 100, 10),
        Request(2, -1, 140, 5, session=0, turn=1, follows=0, think_ps=SECOND),
        Request(3, SECOND // 2, 64, 2000),
    ]


def engine_of(run: PoolRun, request: int) -> int:
    return next(record.engine for record in run.record if request in record.requests)


@pytest.mark.parametrize(
    ("router", "engine", "hits"),
    [("least_outstanding_tokens", 1, 0), ("prefix_aware", 0, 96), ("session_affinity", 0, 96)],
)
def test_a_simulated_second_turn_returns_to_its_first_turns_replica(router: str, engine: int, hits: int) -> None:
    """Turn 0 goes to replica 0 and request 1 to replica 1 (both at 0: tokens, then the index); the long request
    (0.5 s, 2,000 output tokens) to replica 0, both idle by then. The second turn arrives while replica 0 decodes
    it and replica 1 is idle: counting tokens it goes to 1 and finds nothing; by cache or session to 0, finding the
    96 tokens (6 blocks) its first turn cached."""
    cfg = config(poisson("1/s", 1, 8, 8), prefix_caching=True, block_size=16, replicas=2, router=router)
    run = simulate_pools(conversation_and_a_long_request(), [PoolSetup(cfg.pools[0], 10_000, linear_pricer)], 16)
    assert [engine_of(run, index) for index in range(4)] == [0, 1, engine, 0]
    assert next(sequence.found for sequence in run.sequences if sequence.request.index == 2) == hits


def test_least_pending_requests_counts_only_requests_not_yet_admitted() -> None:
    """Vidur's LOR: replica 0 runs two requests (admitted: not pending), replica 1 queues one. Counting pending
    requests (0 against 1) the next goes to 0; counting outstanding ones (2 against 1), to 1. With one queued on
    each, pending requests tie: the lower index."""
    replicas = [ReplicaScheduler(SchedulerConfig(), 1000) for _ in range(2)]
    for index in (0, 1):
        replicas[0].enqueue(Request(index, 0, 16, 100))
    replicas[0].finish_iteration(replicas[0].next_batch(0), 1)  # both admitted and decoding
    replicas[1].enqueue(Request(2, 0, 16, 1))
    assert [pending_requests(replica) for replica in replicas] == [0, 1]
    assert route("least_pending_requests", replicas, 3) == 0
    assert route("least_outstanding_requests", replicas, 3) == 1
    replicas[0].enqueue(Request(3, 0, 16, 1))
    assert route("least_pending_requests", replicas, 4) == 0  # 1 against 1: the lower index


def pools(**first: Any) -> dict[str, Any]:
    return {"model": MODEL, "pools": [{"replicas": 2, **first}], "requests": poisson("1/s", 4, 16, 4)}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (pools(router="prefix_aware"), "pools.0.router: prefix_aware routes by what each replica's prefix cache"),
        (pools(router="least_kv_load", routing_balance={"abs": 4}), "routing_balance applies to router: prefix_aware"),
        (
            pools(router="prefix_aware", scheduler={"prefix_caching": True}, routing_balance={"abs": -1}),
            "routing_balance.abs\n  Input should be greater than or equal to 0",
        ),
        (
            pools(router="prefix_aware", scheduler={"prefix_caching": True}, routing_balance={"rel": 0.5}),
            "routing_balance.rel\n  Input should be greater than or equal to 1",
        ),
        (
            pools(router="prefix_aware", scheduler={"prefix_caching": True}, routing_balance={"ratio": 2}),
            "routing_balance.ratio\n  Extra inputs are not permitted",
        ),
        (pools(router="lor"), "'prefix_aware', 'session_affinity' or 'random'"),
    ],
)
def test_bad_router_keys_say_what_is_wrong(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ServingWorkloadConfig.model_validate(data)


@pytest.mark.parametrize("router", ["prefix_aware", "session_affinity"])
def test_a_decode_pool_routed_by_the_request_is_refused(router: str) -> None:
    data = {
        "model": MODEL,
        "pools": [
            {"role": "prefill", "scheduler": {"prefix_caching": True}},
            {"role": "decode", "router": router},
        ],
        "requests": poisson("1/s", 4, 16, 4),
    }
    with pytest.raises(ValidationError, match=f"pools.1.router: {router} routes a request by its prompt or session"):
        ServingWorkloadConfig.model_validate(data)


def test_random_draws_as_vidur_from_the_requests_seed() -> None:
    """Vidur's ``random``: ``randint(1, n) - 1`` from a generator seeded with the requests' seed, whatever the load."""
    replicas = [ReplicaScheduler(SchedulerConfig(), 1000) for _ in range(4)]
    replicas[0].enqueue(Request(0, 0, 4000, 100))
    draws = random.Random(42)
    router = Router("random", seed=42)
    assert [router.pick(replicas, Request(i, 0, 16, 1), i) for i in range(20)] == [
        draws.randint(1, 4) - 1 for _ in range(20)
    ]


def random_run(seed: int, roles: tuple[str, ...] = ("both",)) -> list[int]:
    """The engine each request's iterations start on, served by ``router: random`` with ``seed``."""
    data = {
        "model": MODEL,
        "pools": [{"replicas": 3, "role": role, "router": "random"} for role in roles],
        "requests": poisson("100/s", 40, 64, 4, seed=seed),
        "bucket": 16,
    }
    cfg = ServingWorkloadConfig.model_validate(data)
    requests = synthetic_requests(cfg.requests)
    setups = [PoolSetup(pool, 10_000, linear_pricer) for pool in cfg.pools]
    run = simulate_pools(requests, setups, cfg.bucket, fixed_transfer, 1, seed=cfg.requests.seed)
    return [record.engine for record in run.record for _ in record.requests]


def test_random_routing_is_the_same_for_a_seed_and_differs_across_seeds() -> None:
    assert random_run(1) == random_run(1)
    assert random_run(1) != random_run(2)
    assert set(random_run(1)) == {0, 1, 2}
    disaggregated = random_run(3, ("prefill", "decode"))
    assert disaggregated == random_run(3, ("prefill", "decode")) and set(disaggregated) == set(range(6))
