"""The engines of a serving run: each pool as the simulation runs it (:class:`PoolSetup`), the schedulers its
replicas run (vLLM v0's virtual engines, one a pipeline stage) and how they are numbered and grouped."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass

from stratasim.kernel.serving import ExpertPricer, ExpertWork, Iteration, IterationPricer, IterationShape
from stratasim.workload_layer.serving.config import PoolConfig
from stratasim.workload_layer.serving.kv_cache import HostSwap
from stratasim.workload_layer.serving.kv_tiers import KvTier
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler
from stratasim.workload_layer.serving.speculative import Speculation

__all__ = ["PoolSetup", "EngineLayout", "engine_scheduler"]


@dataclass(frozen=True)
class PoolSetup:
    """A pool as the simulation runs it: its configuration, each replica's KV blocks, its iteration pricer, with
    ``preemption: swap`` each replica's host memory for swapped KV blocks, its speculative decoding, and with
    expert parallelism the pricer of its groups' expert parts (its iteration pricer then pricing the rest), and
    with prefix caching each replica's KV ``tiers`` below its GPU.
    ``work`` and ``expert_work`` give the typed work the pricers are handed for a shape and for a group's and its
    busiest member's tokens (by default the shape, or the token counts, alone)."""

    pool: PoolConfig
    kv_blocks: int
    pricer: IterationPricer
    swap: HostSwap | None = None
    speculation: Speculation | None = None
    experts: ExpertPricer | None = None
    work: Callable[[IterationShape], Iteration] = Iteration
    expert_work: Callable[[int, int], ExpertWork] | None = None
    tiers: tuple[KvTier, ...] = ()


class EngineLayout:
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


def engine_scheduler(setup: PoolSetup, engine: int, replica: int) -> ReplicaScheduler:
    """A scheduler of ``setup``'s pool on ``replica``: its share of the replica's KV blocks, host memory and KV
    tiers (each of the ``pp`` engines gets ``1 / pp``, as vLLM v0's scheduler divides them)."""
    pp = setup.pool.parallelism.pp
    swap = None if setup.swap is None else HostSwap(setup.swap.blocks // pp, setup.swap.block_ps)
    tiers = tuple(KvTier(tier.name, tier.blocks // pp, tier.block_ps) for tier in setup.tiers)
    return ReplicaScheduler(
        setup.pool.scheduler,
        setup.kv_blocks // pp,
        setup.pool.role == "prefill",
        swap,
        setup.speculation,
        engine,
        tiers,
    )
