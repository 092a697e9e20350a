"""Declaring which NPUs of a parallel plan live the same timeline (:class:`stratasim.kernel.contracts.SymmetricWorkload`).

A plan's ranks usually differ only by where they sit: the TP ranks of a pipeline stage, or its DP replicas,
run the same program on different coordinates. The claim the engine needs is that NPU ``x`` runs its
representative's graph moved by the grid translation from the representative to ``x``; this module checks the
part of that claim that depends on the topology — every group and peer an NPU talks to is its representative's,
translated — and returns the mapping only when it holds.

Along a permutable dimension (a switch: every permutation of positions is a symmetry) the translations are
those of the grid cut into the blocks the groups need that hold NPUs other than representatives
(:func:`stratasim.kernel.grid.block_grid`, the cuts the engine makes too): a TP group of 2 inside a node of 8 is
then one block, the DP group the same offset in every block, and moving blocks and offsets carries each onto
itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stratasim.kernel.grid import Grid, block_grid

__all__ = ["Partners", "translated_representatives"]

Partners = tuple[tuple[int, ...], ...]
"""An NPU's communication partners by role, in a fixed order of roles: each a group or a one-NPU peer (an
empty tuple for a role the NPU does not have, e.g. no previous pipeline stage)."""


def translated_representatives(
    grid: Grid, npus: int, representative: Callable[[int], int], partners: Callable[[int], Partners]
) -> tuple[int, ...] | None:
    """Each NPU's representative, or None when the topology breaks the symmetry for some NPU (its partners are
    not its representative's moved by the translation between them) or the workload does not fill the grid."""
    if grid.npus != npus:
        return None
    mapping = tuple(representative(npu) for npu in range(npus))
    reference = {rep: partners(rep) for rep in sorted(set(mapping))}
    mirrored = (role for roles in reference.values() for role in roles if any(mapping[m] != m for m in role))
    grid = block_grid(grid, mirrored).grid
    coords = [grid.coords(npu) for npu in range(npus)]
    axes = tuple(zip(grid.sizes, (grid.stride(dim) for dim in range(len(grid.sizes)))))
    for npu, rep in enumerate(mapping):
        if rep == npu:
            continue
        own = reference[rep]
        shift = [(c - r) for c, r in zip(coords[npu], coords[rep])]
        moved = [frozenset(_translate(axes, coords[m], shift) for m in role) for role in own]
        if moved != [frozenset(role) for role in partners(npu)]:
            return None
    return mapping


def _translate(axes: Sequence[tuple[int, int]], at: Sequence[int], shift: Sequence[int]) -> int:
    """The NPU at coordinates ``at`` moved by ``shift`` (wrapping round), on a grid of ``axes`` (each dimension's
    size and stride): :meth:`Grid.npu_at` with the strides worked out once per grid, as this runs per partner."""
    return sum((c + d) % size * stride for c, d, (size, stride) in zip(at, shift, axes))
