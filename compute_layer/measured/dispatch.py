"""FlashAttention-2's forward work partition on the device's SMs: how much work the SM that finishes last does.

The forward kernel launches one thread block (CTA) per (batch·head, 128-query block): in launch order, one head's
query blocks after another's. Each CTA loops over the 128-key blocks its queries see (causally, those up to the
diagonal, so a head's last query block does the most). The hardware hands each next CTA to the first SM that frees
up, one CTA resident per SM (of one or two per SM, one fits the training rows far better: a log-time RMS error of
5 % against 21 %). The busiest SM's key blocks and CTAs set the kernel's time, the tail included: with a few heads,
the long last query blocks leave most SMs idle at the end, which an even share of the work over the SMs misses.
"""

from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass

from stratasim.kernel.operator_shapes import ATTENTION_BLOCK, AttentionShape

__all__ = ["Busiest", "query_block_work", "busiest_sm"]


@dataclass(frozen=True)
class Busiest:
    """The SM that finishes last: the key blocks it computes and the CTAs (query blocks) it runs."""

    blocks: int
    ctas: int


def query_block_work(shape: AttentionShape) -> tuple[int, ...]:
    """Key blocks each of one head's query blocks computes, in launch order (causal queries end-aligned to the
    keys, as :attr:`~stratasim.kernel.operator_shapes.AttentionShape.scores` counts them)."""
    block, key_blocks = ATTENTION_BLOCK, -(-shape.keys // ATTENTION_BLOCK)
    if not shape.causal:
        return (key_blocks,) * -(-shape.queries // block)
    offset = shape.keys - shape.queries
    return tuple(
        min(key_blocks, -(-(offset + min(start + block, shape.queries)) // block))
        for start in range(0, shape.queries, block)
    )


@functools.lru_cache(maxsize=256)
def busiest_sm(heads: int, work: tuple[int, ...], sms: int) -> Busiest:
    """The busiest of ``sms`` SMs when ``heads`` heads' query blocks (each ``work`` key blocks long) are handed out
    in launch order, each to the SM free first (the lowest-numbered on a tie)."""
    free = [(0, sm, 0) for sm in range(sms)]
    ctas = [0] * sms
    for _ in range(heads):
        for blocks in work:
            finish, sm, done = heapq.heappop(free)
            heapq.heappush(free, (finish + blocks, sm, done + blocks))
            ctas[sm] += 1
    _, sm, done = max(free)
    return Busiest(done, ctas[sm])
