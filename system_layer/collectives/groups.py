"""Communicator groups laid out on the topology: which phases a collective runs and who talks in each.

A group that is a product of coordinate sets (every combination of the coordinates it spans per dimension,
e.g. a whole dimension, the TP group inside one dimension, or the DP group across two) runs one phase per
dimension it spans, over lines of members that differ only in that dimension. Any other group runs a single
flat phase over all its members in NPU order, its messages routed by the network as they come.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stratasim.kernel.grid import Grid

__all__ = ["PhaseLines", "FLAT", "phases_of"]

FLAT = -1
"""The ``dim`` of a flat phase (a group that is not a product of coordinate sets)."""


@dataclass(frozen=True)
class PhaseLines:
    """One phase of a group: the dimension it runs along and how to find an NPU's line of peers.

    Along a dimension, a line holds the group's NPUs that share every other coordinate with the NPU, at the
    coordinates ``coords`` of dimension ``dim`` (whose NPUs are ``stride`` ids apart and which has
    ``dim_size`` positions). A flat phase has one line: ``members``.
    """

    dim: int
    coords: tuple[int, ...] = ()
    stride: int = 1
    dim_size: int = 1
    members: tuple[int, ...] = ()
    _lines: dict[int, tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)
    """Each line by the NPU at coordinate 0 of its dimension, built on first use (every member asks for it)."""

    @property
    def size(self) -> int:
        """How many NPUs each line holds."""
        return len(self.members) if self.dim == FLAT else len(self.coords)

    def coordinate(self, npu: int) -> int:
        """``npu``'s coordinate along this phase's dimension."""
        return (npu // self.stride) % self.dim_size

    def line(self, npu: int) -> tuple[tuple[int, ...], int]:
        """The NPUs of ``npu``'s line, in order, and ``npu``'s position in it."""
        if self.dim == FLAT:
            return self.members, self.members.index(npu)
        own = (npu // self.stride) % self.dim_size
        base = npu - own * self.stride
        line = self._lines.get(base)
        if line is None:
            line = self._lines[base] = tuple(base + c * self.stride for c in self.coords)
        return line, self.coords.index(own)


def phases_of(group: tuple[int, ...], grid: Grid) -> tuple[PhaseLines, ...]:
    """The phases a collective over ``group`` (sorted NPU ids) runs, innermost dimension first."""
    spans = [sorted({grid.coordinate(member, dim) for member in group}) for dim in range(len(grid.sizes))]
    product = 1
    for coords in spans:
        product *= len(coords)
    if product != len(group):
        return (PhaseLines(FLAT, members=group),)
    return tuple(
        PhaseLines(dim, tuple(coords), grid.stride(dim), grid.sizes[dim])
        for dim, coords in enumerate(spans)
        if len(coords) > 1
    )
