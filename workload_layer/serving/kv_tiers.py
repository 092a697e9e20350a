"""The KV tiers below a replica's GPU (``scheduler.kv_tiers``): host memory and local disk holding prefix-cached
blocks the GPU evicted, as LMCache and vLLM's CPU offloading keep them.

A block the prefix cache (:class:`~stratasim.workload_layer.serving.prefix_cache.PrefixCache`) evicts is copied
to the first tier (the first holding any block at all), unless a tier holds it already (then it is only marked
used); a full tier moves its least recently used block down to the next, and the last drops it. A lookup that
runs past the GPU's cached blocks continues into the tiers; a block found there is copied back to the GPU (the
tier keeps its copy). Each copy between the GPU and a tier takes the tier's ``block_ps`` (every NPU copying its
share of the block over its own link at once, as :class:`~stratasim.workload_layer.serving.kv_cache.HostSwap`);
the moves between tiers happen off the GPU's path and cost the iterations nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["KvTier", "KvTiers", "TierCounts"]

Key = tuple[str, int, int]
"""A block's content key (:data:`~stratasim.workload_layer.serving.prefix_cache.BlockKey`)."""


@dataclass(frozen=True)
class KvTier:
    """A tier as one engine sees it: its name (``host``, ``disk``), its room in blocks and the picoseconds one
    block takes to or from the GPU."""

    name: str
    blocks: int
    block_ps: int


@dataclass
class TierCounts:
    """What a tier did: blocks found there and copied back (``reloaded``, in ``reload_ps``), and blocks copied
    into it from the GPU (``offloaded``, in ``offload_ps``)."""

    reloaded: int = 0
    reload_ps: int = 0
    offloaded: int = 0
    offload_ps: int = 0

    def add(self, other: TierCounts) -> None:
        """Add ``other``'s counts to these."""
        self.reloaded += other.reloaded
        self.reload_ps += other.reload_ps
        self.offloaded += other.offloaded
        self.offload_ps += other.offload_ps


class KvTiers:
    """The blocks each of an engine's ``tiers`` holds (least recently used first) and what each did
    (``counts``); see the module docstring."""

    def __init__(self, tiers: tuple[KvTier, ...]) -> None:
        self.tiers = tiers
        self.held: list[OrderedDict[Key, None]] = [OrderedDict() for _ in tiers]
        self.counts = {tier.name: TierCounts() for tier in tiers}

    def holds(self, key: Key) -> bool:
        """Whether a tier holds ``key``'s block."""
        return any(key in held for held in self.held)

    def offload(self, key: Key) -> int:
        """The GPU evicts ``key``'s block: the picoseconds of copying it to the first tier (0 when a tier holds
        it already, or none can)."""
        for held in self.held:
            if key in held:
                held.move_to_end(key)
                return 0
        for level, tier in enumerate(self.tiers):
            if tier.blocks:
                self._put(level, key)
                counts = self.counts[tier.name]
                counts.offloaded += 1
                counts.offload_ps += tier.block_ps
                return tier.block_ps
        return 0

    def reload(self, key: Key) -> int:
        """The picoseconds of copying ``key``'s block back to the GPU from the tier holding it (which keeps it,
        now its most recently used)."""
        for tier, held in zip(self.tiers, self.held, strict=True):
            if key in held:
                held.move_to_end(key)
                counts = self.counts[tier.name]
                counts.reloaded += 1
                counts.reload_ps += tier.block_ps
                return tier.block_ps
        raise KeyError(key)

    def _put(self, level: int, key: Key) -> None:
        """``key``'s block into tier ``level``, its least recently used block moving down when it is full."""
        while level < len(self.tiers):
            held = self.held[level]
            held[key] = None
            if len(held) <= self.tiers[level].blocks:
                return
            key, _ = held.popitem(last=False)
            level += 1
            while level < len(self.tiers) and not self.tiers[level].blocks:
                level += 1
