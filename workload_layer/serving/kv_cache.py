"""A replica's paged KV cache (vLLM's PagedAttention block manager, counted rather than mapped): ``blocks``
blocks of ``block_size`` tokens each, handed out to sequences whole and returned when a sequence finishes or is
preempted."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KvCache", "HostSwap", "blocks_for"]


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks holding ``tokens`` tokens' keys and values: ``ceil(tokens / block_size)``."""
    return -(-tokens // block_size)


class KvCache:
    """Free and used blocks of one replica; ``peak_used`` is the most ever in use at once."""

    def __init__(self, blocks: int, block_size: int) -> None:
        self.blocks = blocks
        self.block_size = block_size
        self.used = 0
        self.peak_used = 0

    @property
    def free(self) -> int:
        """Blocks not held by any sequence."""
        return self.blocks - self.used

    def take(self, count: int) -> bool:
        """Hand out ``count`` blocks if that many are free (True), else nothing (False)."""
        if count > self.free:
            return False
        self.used += count
        self.peak_used = max(self.peak_used, self.used)
        return True

    def give_back(self, count: int) -> None:
        """Return ``count`` blocks a sequence held."""
        self.used -= count


@dataclass(frozen=True)
class HostSwap:
    """Host memory a replica swaps preempted sequences' KV blocks to (vLLM's ``--swap-space``): ``blocks`` blocks
    of room, each moving either way in ``block_ps`` picoseconds (every NPU copies its share of a block over its own
    host link at once, so a block takes its per-NPU bytes over one link's bandwidth)."""

    blocks: int
    block_ps: int
