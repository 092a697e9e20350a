"""The pricers' answers in a serving run, each asked once: iteration prices by pool and bucketed shape, expert
parts by pool and bucketed tokens, and how many iterations ran at each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence as Seq

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.serving import ExpertWork, IterationShape
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.iteration import round_up

__all__ = ["IterationPrices", "stage_prices"]


class IterationPrices:
    """The pricers' answers, asked once each: iterations by pool and shape (:attr:`shapes`), expert parts by pool
    and bucketed group and member tokens (:attr:`experts`); and how many of each ran (:attr:`runs`,
    :attr:`expert_runs`)."""

    def __init__(
        self, pools: Seq[PoolSetup], bucket: int, shapes: dict[tuple[int, IterationShape], tuple[int, ...]]
    ) -> None:
        self._pools, self.bucket = pools, bucket
        self.shapes = shapes
        self.experts: dict[tuple[int, int, int], int] = {}
        self.runs: Counter[tuple[int, IterationShape]] = Counter()
        self.expert_runs: Counter[tuple[int, int, int]] = Counter()

    def stages(self, pool: int, shape: IterationShape) -> tuple[int, ...]:
        """Each stage's time for ``shape`` on pool ``pool``, an iteration of it counted."""
        self.runs[pool, shape] += 1
        price = self.shapes.get((pool, shape))
        if price is None:
            price = self.shapes[pool, shape] = stage_prices(self._pools[pool], shape)
        return price

    def expert_part(self, pool: int, group_tokens: int, member_tokens: int) -> int:
        """The expert part of an iteration of a group of pool ``pool``, its tokens bucketed."""
        key = (pool, round_up(group_tokens, self.bucket), round_up(member_tokens, self.bucket))
        self.expert_runs[key] += 1
        price = self.experts.get(key)
        if price is None:
            setup = self._pools[pool]
            if setup.experts is None:
                raise WorkloadError(f"pool {setup.pool.name!r} is expert-parallel but has no expert pricer")
            ep = setup.pool.parallelism.ep
            work = ExpertWork(key[1], key[2], ep) if setup.expert_work is None else setup.expert_work(key[1], key[2])
            price = self.experts[key] = setup.experts(work)
            if price <= 0:
                raise WorkloadError(f"the expert pricer gave {price} ps for {key[1]} tokens; an iteration takes time")
        return price


def stage_prices(setup: PoolSetup, shape: IterationShape) -> tuple[int, ...]:
    """Each pipeline stage's time for ``shape`` from ``setup``'s pricer, handed the shape's typed work (one figure
    for the whole iteration on a single stage), checked."""
    price = setup.pricer(setup.work(shape))
    stages = price if isinstance(price, tuple) else (price,)
    if len(stages) != setup.pool.parallelism.pp or min(stages) <= 0:
        raise WorkloadError(
            f"the iteration pricer gave {price} ps for {shape}; an iteration takes time on each of "
            f"its {setup.pool.parallelism.pp} stages"
        )
    return stages
