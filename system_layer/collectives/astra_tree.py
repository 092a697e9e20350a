"""ASTRA-sim 2.x's double binary tree all-reduce, for the ``astra_compat`` preset.

Read from astra-sim 518bd51. ``DoubleBinaryTreeTopology`` holds two ``BinaryTree`` s and hands them out in
turn (``get_topology``: the RootMax tree first, then RootMin), one per chunk. ``BinaryTree``'s constructor hangs a
complete binary tree of n - 1 nodes below a root and numbers the nodes in order (``build_tree``): RootMax's root
is position n - 1 (the subtree holds 0..n-2), RootMin's is position 0 (the subtree 1..n-1). Only a power of two
numbers every NPU of the line. ``DoubleBinaryTreeAllReduce::run`` sends the whole chunk over every edge: a leaf
sends it to its parent and waits for it back; an inner node waits for its children, reduces, sends up, waits
for its parent, reduces again (the data coming down is processed too) and sends to its children; the root
reduces what its one child sent and sends it back down.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from stratasim.kernel.errors import WorkloadError
from stratasim.system_layer.collectives.steps import Step

__all__ = ["planner"]

_UP, _DOWN = 0, 1


def planner(n: int, chunk: int) -> Callable[[str, int, int, int], tuple[Step, ...]]:
    """The planner of chunk number ``chunk`` on lines of ``n`` NPUs: RootMax's tree for even chunks, RootMin's
    for odd ones (ASTRA-sim's counter runs on across collectives; here it restarts with each one)."""
    if n & (n - 1):
        raise WorkloadError(
            f"double_binary_tree under preset astra_compat needs a power of two NPUs per line, not {n}: ASTRA-sim's "
            "BinaryTree numbers 2^floor(log2 n) of them and leaves the others out"
        )
    root_min = chunk % 2 == 1

    @cache  # one plan per position, as the default planners keep theirs
    def steps(collective: str, size: int, data_bytes: int, position: int) -> tuple[Step, ...]:
        parent, children = _tree(size, root_min)
        up = parent[position]
        below = tuple(child - position for child in children[position])
        if not below:  # a leaf
            return (Step((up - position,), data_bytes, 1, tag=_UP, wait=_DOWN),)
        gathered = Step((), data_bytes, len(below), wait=_UP, reduces=True, reduce_bytes=data_bytes)
        if up < 0:  # the root
            return gathered, Step(below, data_bytes, 0, tag=_DOWN)
        return (
            gathered,
            Step((up - position,), data_bytes, 1, tag=_UP, wait=_DOWN, reduces=True, reduce_bytes=data_bytes),
            Step(below, data_bytes, 0, tag=_DOWN),
        )

    return steps


@cache
def _tree(n: int, root_min: bool) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Each position's parent (-1 at the root) and children in ASTRA-sim's tree over ``n`` (a power of two)."""
    parent = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]

    def build(offset: int, levels: int, up: int) -> None:
        middle = offset + (1 << (levels - 1)) - 1  # in-order numbering puts a complete subtree's root mid-way
        parent[middle] = up
        children[up].append(middle)
        if levels > 1:
            build(offset, levels - 1, middle)
            build(middle + 1, levels - 1, middle)

    root = 0 if root_min else n - 1
    if n > 1:
        build(1 if root_min else 0, n.bit_length() - 1, root)
    return tuple(parent), tuple(tuple(c) for c in children)
