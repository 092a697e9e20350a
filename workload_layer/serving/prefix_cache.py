"""A replica's KV blocks with automatic prefix caching (vLLM v1's block pool, counted rather than mapped).

A full block of ``block_size`` tokens is known by its content key (:func:`block_key`, the contract of issue 30:
a shared system prompt's block by the prefix, else a session's by the session's token stream, else the request's
own). Once a sequence has computed a full block it registers it under its key (unless a block of that key is
cached already: that sequence's copy then stays its own, as vLLM keeps duplicates out of its hash map); a block
registered stays cached after the sequences referencing it let go, counted free but evictable, least recently
released first (a sequence releases its blocks last first, as vLLM does, so a prefix's tail is evicted before its
head). A new block is taken from the empty ones first, then by evicting the least recently used cached block.

A sequence admitted looks up its stream's leading full blocks (:meth:`PrefixCache.match`): the run found, never
the whole prefill (at least its last token is computed, as vLLM), is shared (reference counted: a block shared by
several sequences is one used block), and the sequence prefills from there.

With KV tiers (:mod:`~stratasim.workload_layer.serving.kv_tiers`) an evicted block is offloaded to them and the
lookup continues there: a block found in a tier is copied back into a new block. The copies' picoseconds wait
(:attr:`PrefixCache.copies_ps`: out, in) until the scheduler hands them to the iteration that made them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from stratasim.workload_layer.serving.kv_cache import KvCache
from stratasim.workload_layer.serving.kv_tiers import KvTiers, TierCounts
from stratasim.workload_layer.serving.requests import Request

__all__ = ["BlockKey", "PrefixCache", "PrefixCounts", "block_key", "prompt_block_keys", "summed"]

BlockKey = tuple[str, int, int]
"""A full block's content key: ``("p", prefix, j)``, ``("s", session, j)`` or ``("r", request, j)``."""


def block_key(request: Request, block: int, block_size: int) -> BlockKey:
    """The content key of full block ``block`` (0-based) of ``request``'s token stream (its prompt, then what it
    generates), in blocks of ``block_size`` tokens (module docstring)."""
    if request.shared_prefix >= 0 and (block + 1) * block_size <= request.shared_tokens:
        return ("p", request.shared_prefix, block)
    if request.session >= 0:
        return ("s", request.session, block)
    return ("r", request.index, block)


def prompt_block_keys(request: Request, block_size: int) -> tuple[BlockKey, ...]:
    """The content keys of ``request``'s full prompt blocks, in order."""
    return tuple(block_key(request, block, block_size) for block in range(request.prompt_tokens // block_size))


@dataclass
class PrefixCounts:
    """What a prefix cache saw: prompt tokens looked up on admission (``looked_up``), the tokens found cached
    (``hit``, on the GPU or in a tier), and what each KV tier did (``tiers``, by name)."""

    looked_up: int = 0
    hit: int = 0
    tiers: dict[str, TierCounts] = field(default_factory=dict)


def summed(counts: Iterable[PrefixCounts]) -> PrefixCounts:
    """The sum of ``counts`` (of several engines' caches)."""
    total = PrefixCounts()
    for each in counts:
        total.looked_up += each.looked_up
        total.hit += each.hit
        for name, tier in each.tiers.items():
            total.tiers.setdefault(name, TierCounts()).add(tier)
    return total


class PrefixCache(KvCache):
    """A replica's KV blocks (:class:`KvCache`: ``used`` are those sequences hold, a shared block once) with the
    cached full blocks: ``references`` (each registered block's referencing sequences) and ``evictable`` (those
    no sequence references, least recently released first), and the ``tiers`` below it; see the module
    docstring."""

    def __init__(self, blocks: int, block_size: int, tiers: KvTiers | None = None) -> None:
        super().__init__(blocks, block_size)
        self.references: dict[BlockKey, int] = {}
        self.evictable: OrderedDict[BlockKey, None] = OrderedDict()
        self.tiers = tiers
        self.counts = PrefixCounts(tiers={} if tiers is None else tiers.counts)
        self.copies_ps = [0, 0]

    def copied(self) -> tuple[int, int]:
        """The picoseconds of the copies to the tiers and back since the last call."""
        out, back = self.copies_ps
        self.copies_ps = [0, 0]
        return out, back

    def take(self, count: int) -> bool:
        """Hand out ``count`` new blocks if that many are free, empty ones first, then evicting the least recently
        used cached ones (True), else nothing (False)."""
        if count > self.blocks - self.used:
            return False
        for _ in range(count - (self.blocks - self.used - len(self.evictable))):
            key, _ = self.evictable.popitem(last=False)
            del self.references[key]
            if self.tiers is not None:
                self.copies_ps[0] += self.tiers.offload(key)
        self.used += count
        self.peak_used = max(self.peak_used, self.used)
        return True

    def match(self, request: Request, tokens: int) -> int:
        """How many leading full blocks of ``request``'s stream are cached (on the GPU or in a tier), of a
        prefill of ``tokens`` tokens: the longest run found, at most ``(tokens - 1) // block_size`` blocks (the last
        token is always computed)."""
        block_size, references, tiers = self.block_size, self.references, self.tiers
        limit, found = (tokens - 1) // block_size, 0
        while found < limit:
            key = block_key(request, found, block_size)
            if key not in references and (tiers is None or not tiers.holds(key)):
                break
            found += 1
        return found

    def claim(self, request: Request, hits: int, blocks: int, reserve: int = 0) -> list[BlockKey] | None:
        """Blocks for a prefill of ``blocks`` blocks whose first ``hits`` are cached (:meth:`match`): those on the
        GPU shared, those in a tier copied back into new blocks, the rest taken; their keys, or None (nothing
        changed) when the cache has no room beyond ``reserve`` blocks (an admission watermark)."""
        references = self.references
        keys = [block_key(request, block, self.block_size) for block in range(hits)]
        on_gpu = [key for key in keys if key in references]
        if sum(references[key] == 0 for key in on_gpu) + blocks - len(on_gpu) > self.blocks - self.used - reserve:
            return None
        for key in on_gpu:
            count = references[key]
            if not count:
                del self.evictable[key]
                self.used += 1
            references[key] = count + 1
        reloaded = [key for key in keys if key not in references]
        if reloaded:
            assert self.tiers is not None
            self.copies_ps[1] += sum(self.tiers.reload(key) for key in reloaded)
        self.take(blocks - len(on_gpu))
        for key in reloaded:
            references[key] = 1
        return keys

    def register(self, request: Request, first: int, last: int, shared: list[BlockKey]) -> None:
        """A sequence of ``request`` computed its full blocks ``first`` to ``last - 1``, so far its own: each
        whose key is not cached yet becomes cached, referenced by it (its key appended to ``shared``)."""
        references, block_size = self.references, self.block_size
        for block in range(first, last):
            key = block_key(request, block, block_size)
            if key not in references:
                references[key] = 1
                shared.append(key)

    def release(self, shared: list[BlockKey], own: int) -> None:
        """A sequence lets go of its ``own`` blocks (returned empty) and its ``shared`` ones, last first (a
        cached block no sequence references any more is free, and evictable)."""
        self.used -= own
        references, evictable = self.references, self.evictable
        for key in reversed(shared):
            count = references[key] - 1
            references[key] = count
            if not count:
                evictable[key] = None
                self.used -= 1
