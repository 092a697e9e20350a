"""Where each parallelism axis's rank sits in an NPU id: the mapping of TP/PP/DP groups onto the topology.

NPU ids vary fastest along the topology's first dimension (:class:`stratasim.kernel.grid.Grid`), so listing the
axes innermost first decides which dimensions each group spans: with ``order = [tp, pp, dp]`` (Megatron-LM's
default, TP innermost) on a topology ``[8, 4, 16]``, a TP group is a line of the first dimension, and so on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RankLayout"]


@dataclass(frozen=True)
class RankLayout:
    """A mixed-radix numbering of NPUs by axis rank: ``order`` lists the axes innermost first, ``sizes`` their
    degrees; ``npu = sum(rank[axis] * stride[axis])`` with strides the products of the inner axes' sizes."""

    order: tuple[str, ...]
    sizes: Mapping[str, int]

    def stride(self, axis: str) -> int:
        """The distance in NPU id between neighbouring ranks of ``axis``."""
        stride = 1
        for inner in self.order[: self.order.index(axis)]:
            stride *= self.sizes[inner]
        return stride

    def rank(self, npu: int, axis: str) -> int:
        """``npu``'s rank along ``axis``."""
        return npu // self.stride(axis) % self.sizes[axis]

    def group(self, npu: int, axis: str) -> tuple[int, ...]:
        """The NPUs that share every rank with ``npu`` but ``axis``'s, by rank along it."""
        stride = self.stride(axis)
        base = npu - self.rank(npu, axis) * stride
        return tuple(base + i * stride for i in range(self.sizes[axis]))

    def npu(self, ranks: Mapping[str, int]) -> int:
        """The NPU at ``ranks`` (one per axis)."""
        return sum(ranks[axis] * self.stride(axis) for axis in self.order)
