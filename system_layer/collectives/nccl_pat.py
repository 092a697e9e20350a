"""NCCL's PAT (Parallel Aggregated Trees, NCCL 2.23+) all-gather and reduce-scatter, as steps.

PAT is Bruck's all-gather with its dimensions reversed (S. Jeaugey, "PAT: a new algorithm for all-gather and
reduce-scatter operations at scale", arXiv:2506.20252, 2025): the farthest peer first, so that the last, largest
step goes to the nearest one; each rank's share travels down a binomial tree rooted at it, and NCCL runs it only
with one GPU per node (tuning.cc: ``nNodes == nRanks``). On ``n`` ranks it is ``ceil(log2 n)`` steps for any ``n``,
not only powers of two: the step at distance ``d`` sends every share the rank holds whose owner the peer ``d`` on
does not reach otherwise, ``n - 1`` shares in all. A reduce-scatter is the same steps in the other order, each
reducing what it receives. NCCL bounds the shares one step aggregates by its intermediate buffer; the plan assumes
the buffer holds them (the sizes at which NCCL picks PAT, a few MiB at most).
"""

from __future__ import annotations

from functools import lru_cache

from stratasim.system_layer.collectives.steps import Step, lockstep, share_bytes

__all__ = ["pat_steps", "pat_shares"]


def pat_shares(n: int) -> tuple[tuple[int, int], ...]:
    """The steps of PAT's all-gather on ``n`` ranks as (distance, shares sent), farthest first."""
    distances = [1 << k for k in range(max(0, (n - 1).bit_length()))][::-1]
    held, steps = [0], []
    for d in distances:
        reach = [s + d for s in held if s + d < n]
        steps.append((d, len(reach)))
        held += reach
    return tuple(steps)


@lru_cache(maxsize=4096)
def pat_steps(delay_ps: int, collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    """PAT's steps of ``collective`` (all-gather or reduce-scatter) of ``data_bytes`` on ``n`` ranks, each step
    ``delay_ps`` longer (NCCL's latency for its pick)."""
    share = share_bytes(data_bytes, n)
    order = pat_shares(n)
    reduces = collective == "reduce_scatter"
    if reduces:
        order = order[::-1]
    return lockstep([Step((d,), shares * share, 1, reduces=reduces, delay_ps=delay_ps) for d, shares in order])
