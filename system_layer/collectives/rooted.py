"""Broadcast and reduce: collectives with a root, planned by position relative to the root (root = 0).

Along one line of n NPUs (positions counted from the root):

- ``ring`` broadcast is a chain root -> 1 -> ... -> n-1, each NPU forwarding the whole buffer once it has it:
  (n-1)(alpha + ser(S)); ``ring`` reduce is the mirror chain 1 -> 2 -> ... -> n-1 -> root, each NPU adding
  its buffer to what it received before passing it on.
- ``direct`` broadcast: the root sends the buffer to every other NPU at once (alpha + ser(S)); ``direct``
  reduce: every NPU sends its buffer to the root at once, and the root reduces all n-1 of them.

Messages carry tag 0; a receiving step lists the bytes it receives (for the reduction cost) but no peers.
"""

from __future__ import annotations

from functools import lru_cache

from stratasim.system_layer.collectives.steps import Step

__all__ = ["ring_rooted", "direct_rooted", "ROOTED"]

ROOTED = ("broadcast", "reduce")


@lru_cache(maxsize=16384)
def ring_rooted(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    receive = Step((), data_bytes, 1, reduces=collective == "reduce")
    forward = Step((1,), data_bytes, 0)
    if collective == "broadcast":
        first, last = 0, n - 1
    else:  # reduce: the chain starts right after the root and ends at it
        first, last = 1, 0
    if position == first:
        return (forward,)
    if position == last:
        return (receive,)
    return (receive, forward)


@lru_cache(maxsize=16384)
def direct_rooted(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    if collective == "broadcast":
        if position == 0:
            return (Step(tuple(range(1, n)), data_bytes, 0),)
        return (Step((), data_bytes, 1),)
    if position == 0:
        return (Step((), data_bytes, n - 1, reduces=True),)
    return (Step((n - position,), data_bytes, 0),)
