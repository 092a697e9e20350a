"""Coordinates on a multi-dimensional topology: NPU ids vary fastest in dimension 0.

Shared by the network layer (which dimension a message travels in) and the system layer (who an NPU's
peers are in each phase of a collective).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from stratasim.kernel.errors import TopologyError
from stratasim.v1 import network_pb2

__all__ = ["BlockGrid", "DimensionLinks", "Grid", "block_grid", "validate_topology"]


@dataclass(frozen=True)
class DimensionLinks:
    """What a collective library's tuner reads of one dimension: its ``kind`` (``ring``, ``fully_connected``,
    ``switch``), each link's ``bandwidth`` in bytes/s and ``latency_ps``, and whether its switch reduces data in the
    network."""

    kind: str
    bandwidth: float
    in_network_reduction: bool = False
    latency_ps: int = 0


_KIND_NAMES = {
    network_pb2.Dimension.RING: "ring",
    network_pb2.Dimension.FULLY_CONNECTED: "fully_connected",
    network_pb2.Dimension.SWITCH: "switch",
}


@dataclass(frozen=True)
class Grid:
    """The shape of a multi-dimensional topology: ``sizes[d]`` NPUs along dimension d; along the dimensions in
    ``permutable`` every permutation of positions is a symmetry of the network (every pair of positions priced
    alike, as a switch), not only the translations (see :func:`block_grid`)."""

    sizes: tuple[int, ...]
    permutable: frozenset[int] = frozenset()
    links: tuple[DimensionLinks, ...] = field(default=(), compare=False)
    """Each dimension's links as the topology gives them; empty when a fabric lays the links out (or the grid is a
    logical one): only sizes are known then."""

    @classmethod
    def of(cls, topology: network_pb2.Topology) -> Grid:
        """The topology's dimensions; switch and fully-connected ones are permutable, unless a fabric lays the
        links out (its dimensions only give sizes)."""
        alike = (network_pb2.Dimension.SWITCH, network_pb2.Dimension.FULLY_CONNECTED)
        fabric = topology.WhichOneof("fabric") is not None
        permutable = frozenset(d for d, dim in enumerate(topology.dimensions) if dim.kind in alike and not fabric)
        links = () if fabric else tuple(_links(dim) for dim in topology.dimensions)
        return cls(tuple(dim.size for dim in topology.dimensions), permutable, links)

    @property
    def npus(self) -> int:
        total = 1
        for size in self.sizes:
            total *= size
        return total

    def stride(self, dim: int) -> int:
        """Distance in NPU id between neighbours along ``dim``."""
        stride = 1
        for size in self.sizes[:dim]:
            stride *= size
        return stride

    def coordinate(self, npu: int, dim: int) -> int:
        return (npu // self.stride(dim)) % self.sizes[dim]

    def coords(self, npu: int) -> tuple[int, ...]:
        """``npu``'s coordinate along every dimension."""
        return tuple(self.coordinate(npu, dim) for dim in range(len(self.sizes)))

    def npu_at(self, coords: list[int] | tuple[int, ...]) -> int:
        """The NPU at ``coords`` (one coordinate per dimension)."""
        return sum(c * self.stride(dim) for dim, c in enumerate(coords))

    def dims_between(self, a: int, b: int) -> tuple[int, ...]:
        """The dimensions along which NPUs ``a`` and ``b`` differ: those a message between them crosses."""
        return tuple(dim for dim in range(len(self.sizes)) if self.coordinate(a, dim) != self.coordinate(b, dim))

    def line(self, npu: int, dim: int) -> tuple[int, ...]:
        """The NPUs that share every coordinate with ``npu`` except along ``dim``, in coordinate order."""
        stride = self.stride(dim)
        base = npu - self.coordinate(npu, dim) * stride
        return tuple(base + i * stride for i in range(self.sizes[dim]))


@dataclass(frozen=True)
class BlockGrid:
    """A grid whose permutable dimensions are cut into nested blocks, each level of blocks a dimension of its own.

    Position ``p`` of a dimension cut into blocks of ``b`` is (block ``p // b``, offset ``p % b``); the translations
    of ``grid`` move blocks and offsets cyclically and independently, (q, r) -> (q + dq, r + dr), which on a
    permutable dimension are symmetries of the network. NPU ids are the same in both grids.
    """

    grid: Grid
    dims: tuple[int, ...]
    """The physical dimension each dimension of ``grid`` is a level of."""
    whole: dict[int, str] = field(default_factory=dict)
    """Permutable dimensions left whole (translations only), each with the reason the groups could not cut it."""


def block_grid(grid: Grid, groups: Iterable[Sequence[int]]) -> BlockGrid:
    """``grid`` with each permutable dimension cut into the blocks ``groups`` need.

    Along a permutable dimension of ``n`` positions, a group holding ``k`` of them, ``s`` apart (an aligned block
    when ``s`` is 1, one offset in every block when ``s * k`` is ``n``) cuts it into blocks of ``s`` and of
    ``s * k``: it is then one whole level of blocks, which the translations between its members rotate, as a ring
    or halving-doubling over the group expects. A dimension stays whole (its plain translations, the symmetries
    of any dimension) when a group is not such a level: not evenly spaced within one block, cuts that do not nest
    (each block size dividing the next), a group spanning more than one level (a whole node next to pairs in it).
    """
    members = [tuple(group) for group in groups if len(group) > 1]
    sizes: list[int] = []
    dims: list[int] = []
    whole: dict[int, str] = {}
    for dim, size in enumerate(grid.sizes):
        levels: tuple[int, ...] = (size,)
        if dim in grid.permutable and size > 1:
            spots = [sorted({grid.coordinate(npu, dim) for npu in group}) for group in members]
            cut = _levels(spots, size)
            if isinstance(cut, str):
                whole[dim] = cut
            else:
                levels = cut
        sizes += levels
        dims += [dim] * len(levels)
    return BlockGrid(Grid(tuple(sizes)), tuple(dims), whole)


def _levels(groups: list[list[int]], size: int) -> tuple[int, ...] | str:
    """The sizes of the levels of blocks that make each of ``groups`` (its sorted positions along a dimension of
    ``size``) one whole level, innermost first; or why there are none."""
    spans: list[tuple[int, int, int]] = []
    for spots in groups:
        count = len(spots)
        if count == 1:
            continue
        step = spots[1] - spots[0]
        span = step * count
        if any(b - a != step for a, b in zip(spots, spots[1:])) or size % span or spots[0] // span != spots[-1] // span:
            return f"positions {spots} are not evenly spaced within one block"
        spans.append((step, span, count))
    cuts = sorted({1, size, *(c for step, span, _ in spans for c in (step, span))})
    for inner, outer in zip(cuts, cuts[1:]):
        if outer % inner:
            return f"blocks of {inner} and of {outer} positions do not nest"
    for step, span, count in spans:
        if cuts.index(span) != cuts.index(step) + 1:
            return f"a group of {count} positions {step} apart spans more than one level of the blocks others cut"
    return tuple(outer // inner for inner, outer in zip(cuts, cuts[1:]))


def validate_topology(topology: network_pb2.Topology) -> None:
    """Raise :class:`TopologyError` naming the first dimension whose description is impossible."""
    if not topology.dimensions:
        raise TopologyError("topology.dimensions: the topology has no dimensions")
    for index, dim in enumerate(topology.dimensions):
        where = f"topology.dimensions[{index}]"
        if dim.kind == network_pb2.Dimension.KIND_UNSPECIFIED:
            raise TopologyError(f"{where}.kind: unspecified; expected ring, fully_connected or switch")
        if dim.size < 1:
            raise TopologyError(f"{where}.size: must be at least 1, got {dim.size}")
        if not (dim.bandwidth_bytes_per_s > 0 and math.isfinite(dim.bandwidth_bytes_per_s)):
            raise TopologyError(f"{where}.bandwidth: must be positive, got {dim.bandwidth_bytes_per_s} B/s")
        if dim.latency_ps < 0:
            raise TopologyError(f"{where}.latency: must not be negative, got {dim.latency_ps} ps")


def _links(dim: network_pb2.Dimension) -> DimensionLinks:
    kind = _KIND_NAMES.get(dim.kind, "ring")
    return DimensionLinks(kind, dim.bandwidth_bytes_per_s, dim.in_network_reduction, dim.latency_ps)
