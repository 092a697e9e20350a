"""Where each parallelism axis's rank sits in an NPU id: the mapping of TP/PP/DP groups onto the topology.

NPU ids vary fastest along the topology's first dimension (:class:`stratasim.kernel.grid.Grid`), so listing the
axes innermost first decides which dimensions each group spans: with ``order = [tp, pp, dp]`` (Megatron-LM's
default, TP innermost) on a topology ``[8, 4, 16]``, a TP group is a line of the first dimension, and so on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

__all__ = ["RankLayout", "with_cp_after_tp", "hsdp_groups"]


@dataclass(frozen=True)
class RankLayout:
    """A mixed-radix numbering of NPUs by axis rank: ``order`` lists the axes innermost first, ``sizes`` their
    degrees; ``npu = sum(rank[axis] * stride[axis])`` with strides the products of the inner axes' sizes."""

    order: tuple[str, ...]
    sizes: Mapping[str, int]

    @cached_property
    def _strides(self) -> dict[str, int]:
        """Each axis's stride, worked out once: a layout is asked for ranks and groups per NPU and per group."""
        strides: dict[str, int] = {}
        stride = 1
        for axis in self.order:
            strides[axis] = stride
            stride *= self.sizes[axis]
        return strides

    def stride(self, axis: str) -> int:
        """The distance in NPU id between neighbouring ranks of ``axis``."""
        return self._strides[axis]

    def rank(self, npu: int, axis: str) -> int:
        """``npu``'s rank along ``axis``."""
        return npu // self._strides[axis] % self.sizes[axis]

    def group(self, npu: int, axis: str) -> tuple[int, ...]:
        """The NPUs that share every rank with ``npu`` but ``axis``'s, by rank along it."""
        stride, size = self._strides[axis], self.sizes[axis]
        base = npu - npu // stride % size * stride
        return tuple(range(base, base + size * stride, stride))

    def joint_group(self, npu: int, axes: tuple[str, ...]) -> tuple[int, ...]:
        """The NPUs that share every rank with ``npu`` but those of ``axes``, by rank along them, ``axes[0]``
        fastest (Megatron's combined groups, such as dp-cp)."""
        members: tuple[int, ...] = (npu,)
        for axis in reversed(axes):
            members = tuple(m for member in members for m in self.group(member, axis))
        return members

    def npu(self, ranks: Mapping[str, int]) -> int:
        """The NPU at ``ranks`` (one per axis; an axis not named is at rank 0)."""
        return sum(ranks.get(axis, 0) * self.stride(axis) for axis in self.order)


def with_cp_after_tp(order: tuple[str, ...]) -> tuple[str, ...]:
    """``order`` with the context-parallel axis just outside TP (Megatron-core's default ``tp-cp-ep-dp-pp``)."""
    at = order.index("tp") + 1
    return (*order[:at], "cp", *order[at:])


def hsdp_groups(layout: RankLayout, npu: int, hsdp: int) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """HSDP's groups of ``npu``: the shard group ZeRO-3 gathers and reduce-scatters over (the ``hsdp`` DP ranks of
    its block, by ``hsdp`` consecutive DP ranks, times CP) and the replica group all-reducing each gradient shard
    across the ``dp / hsdp`` blocks (the NPUs at its place in the others); ``(None, ())`` for ``hsdp = 1``, ZeRO
    over the whole DP x CP group."""
    if hsdp == 1:
        return None, ()
    data = layout.joint_group(npu, ("cp", "dp"))
    size = hsdp * layout.sizes["cp"]
    position = data.index(npu)
    start = position - position % size
    return data[start : start + size], data[position % size :: size]
