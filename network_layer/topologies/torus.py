"""Tori and meshes of any number of dimensions, routed in dimension order.

NPU ids vary fastest in dimension 0 (as :class:`stratasim.kernel.grid.Grid`). Along each dimension every NPU is
joined to its neighbours by one cable (a link each way); a torus also joins the two ends of every line,
except along a dimension of 2, where the ends are already neighbours. ASTRA-sim's hierarchical torus M x N x K
(its Fig. 3a) is the 3-D torus whose dimension 0 is the local, in-package ring, each dimension with its own
link speed. There are no switches.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.network_layer.link_graph import Link, LinkGraph, duplex, link_speed
from stratasim.network_layer.routing import DimensionOrder
from stratasim.network_layer.topologies.base import (
    SIZE_CAP,
    FabricSection,
    LevelSection,
    LinkSection,
    capped_product,
    fabric_topology,
)
from stratasim.v1 import network_pb2

__all__ = [
    "FABRIC",
    "SECTIONS",
    "TorusSection",
    "HierarchicalTorusSection",
    "check",
    "build",
    "layout",
    "link_dimension",
]

FABRIC = "torus"
"""The ``Topology.fabric`` field this module checks, lays out and builds."""


class TorusSection(LinkSection, FabricSection):
    """``kind: torus`` or ``mesh``: ``shape`` NPUs per dimension, dimension 0 innermost; every link alike."""

    kind: Literal["torus", "mesh"]
    """``torus`` (wrap-around links) or ``mesh``."""
    shape: list[Annotated[StrictInt, Field(ge=2)]] = Field(min_length=1)
    """NPUs per dimension, dimension 0 innermost."""

    def topology(self) -> network_pb2.Topology:
        fabric = network_pb2.TorusFabric(shape=self.shape, link=[self.link()], mesh=self.kind == "mesh")
        return fabric_topology(FABRIC, fabric, layout)


class HierarchicalTorusSection(FabricSection):
    """``kind: hierarchical_torus``: ASTRA-sim's local x horizontal x vertical torus, each with its own links."""

    kind: Literal["hierarchical_torus"]
    """ASTRA-sim's local x horizontal x vertical torus."""
    local: LevelSection
    """The innermost level: its size and links."""
    horizontal: LevelSection
    """The middle level: its size and links."""
    vertical: LevelSection
    """The outermost level: its size and links."""

    def topology(self) -> network_pb2.Topology:
        levels = (self.local, self.horizontal, self.vertical)
        shape, links = [level.size for level in levels], [level.link() for level in levels]
        return fabric_topology(FABRIC, network_pb2.TorusFabric(shape=shape, link=links), layout)


SECTIONS = (TorusSection, HierarchicalTorusSection)
"""The study's ``network.topology`` kinds this module reads."""


def check(spec: network_pb2.TorusFabric) -> None:
    """Raise :class:`TopologyError` naming the first impossible field."""
    kind = "mesh" if spec.mesh else "torus"
    if not spec.shape:
        raise TopologyError(f"shape: a {kind} needs at least one dimension")
    for dim, size in enumerate(spec.shape):
        if size < 2:
            raise TopologyError(f"shape[{dim}]: a {kind} dimension needs at least 2 NPUs, got {size}")
    if len(spec.link) not in (1, len(spec.shape)):
        raise TopologyError(
            f"link: expected one link description for every dimension or one per dimension "
            f"({len(spec.shape)}), got {len(spec.link)}"
        )
    for index, link in enumerate(spec.link):
        link_speed(link, f"link[{index}]")


def layout(spec: network_pb2.TorusFabric) -> tuple[int, ...]:
    """Collectives run along the torus's own dimensions."""
    return tuple(spec.shape)


def size(spec: network_pb2.TorusFabric) -> tuple[int, int]:
    """NPUs and links: a duplex cable (two links) per NPU and dimension, an upper bound of a mesh's and of a
    two-wide torus's."""
    npus = capped_product(spec.shape) if spec.shape else 0
    return npus, min(2 * npus * len(spec.shape), SIZE_CAP)


def link_dimension(shape: tuple[int, ...], a: int, b: int) -> int | None:
    """The dimension of a torus or mesh of ``shape`` whose link joins NPUs ``a`` and ``b``: the one their
    coordinates differ in (None when they are no neighbours, or no NPUs of it)."""
    grid = Grid(shape)
    if not (0 <= a < grid.npus and 0 <= b < grid.npus):
        return None
    differ = [d for d in range(len(shape)) if grid.coordinate(a, d) != grid.coordinate(b, d)]
    return differ[0] if len(differ) == 1 else None


def build(spec: network_pb2.TorusFabric) -> LinkGraph:
    grid = Grid(tuple(spec.shape))
    speeds = [link_speed(spec.link[min(d, len(spec.link) - 1)], f"link[{d}]") for d in range(len(grid.sizes))]
    links: list[Link] = []
    for npu in range(grid.npus):
        for dim, size in enumerate(grid.sizes):
            coordinate = grid.coordinate(npu, dim)
            if coordinate + 1 < size:
                links += duplex(npu, npu + grid.stride(dim), speeds[dim])
            elif not spec.mesh and size > 2:  # the wrap-around cable closing the ring
                links += duplex(npu, npu - coordinate * grid.stride(dim), speeds[dim])
    return LinkGraph(
        grid.npus,
        grid.npus,
        links,
        lambda node: f"npu {node}",
        router=DimensionOrder(grid, wrap=not spec.mesh),
        symmetric=not spec.mesh,
    )
