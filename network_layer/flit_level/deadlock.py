"""Deadlock freedom: which virtual channels each hop of a route may use.

Wormhole routing deadlocks when packets hold buffers in a cycle, each waiting for the buffer the next one
holds (Dally and Seitz). Each policy here splits every port's virtual channels into classes and gives each hop
of a route a class so that the channel dependency graph — from the buffer a packet holds to the buffer it asks
for next — has no cycle. Nothing else can close one: network interfaces queue in the sending NPU's memory,
and ejection into the destination NPU never blocks.

- :class:`OneClass` where routes already cannot form a cycle: dimension order on a mesh, up/down on a
  fat-tree (no route turns down and then up), a star of switches, one hop per dimension.
- :class:`Dateline` on rings and tori (Dally and Towles): a packet starts each ring on class 0 and moves to
  class 1 when it crosses the ring's wrap-around link. Class 0 never uses the wrap-around link, so its links
  along a ring form a line, not a cycle; class 1 is entered only over the wrap-around link and a shortest way
  round never reaches it again, so its links form a line too. Dimension order never returns to an earlier
  dimension, so dependencies between rings cannot close a cycle either.
- :class:`AfterGlobal` on the dragonfly (Kim et al.): class 0 up to and over the global link, class 1 after
  it. A minimal route takes at most one local link before its global link and one after.
- :class:`HopIndex` on arbitrary graphs and the DGX-1, whose least-latency routes promise nothing: hop ``i``
  of a route uses class ``i``, so every dependency goes to a higher class. A route needs as many classes as
  it has links; one with more links than there are virtual channels is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from stratasim.kernel.errors import BackendError
from stratasim.kernel.grid import Grid
from stratasim.network_layer.link_graph import LinkGraph
from stratasim.v1 import network_pb2

__all__ = ["VcClasses", "OneClass", "Dateline", "AfterGlobal", "HopIndex", "for_dimensions", "for_fabric", "vc_ranges"]


class VcClasses(Protocol):
    """A deadlock-avoidance policy: ``classes`` classes of virtual channels and the class of every hop."""

    classes: int

    def of(self, nodes: Sequence[int]) -> tuple[int, ...]:
        """The class of each hop of the route visiting ``nodes`` (one fewer than the nodes)."""
        ...


class OneClass:
    """Every hop may use every virtual channel: the routes cannot form a cycle."""

    classes = 1

    def of(self, nodes: Sequence[int]) -> tuple[int, ...]:
        return (0,) * (len(nodes) - 1)


class Dateline:
    """Rings along the ``rings`` dimensions of ``grid`` (NPU nodes only): class 1 from the wrap-around link
    to the end of the ring, class 0 elsewhere. Hops through switches, or along other dimensions, are class 0."""

    classes = 2

    def __init__(self, grid: Grid, rings: Collection[int]) -> None:
        self._grid = grid
        self._rings = frozenset(rings)

    def of(self, nodes: Sequence[int]) -> tuple[int, ...]:
        grid, npus = self._grid, self._grid.npus
        classes = []
        along, crossed = -1, False
        for here, there in zip(nodes, nodes[1:]):
            dim = -1
            if here < npus and there < npus:
                dim = next(d for d in range(len(grid.sizes)) if grid.coordinate(here, d) != grid.coordinate(there, d))
            if dim != along:
                along, crossed = dim, False
            if dim in self._rings and abs(grid.coordinate(here, dim) - grid.coordinate(there, dim)) > 1:
                crossed = True
            classes.append(1 if crossed else 0)
        return tuple(classes)


class AfterGlobal:
    """Class 0 up to and over the first link ``is_global`` names, class 1 after it."""

    classes = 2

    def __init__(self, is_global: Callable[[int, int], bool]) -> None:
        self._is_global = is_global

    def of(self, nodes: Sequence[int]) -> tuple[int, ...]:
        classes = []
        crossed = False
        for here, there in zip(nodes, nodes[1:]):
            classes.append(1 if crossed else 0)
            crossed = crossed or self._is_global(here, there)
        return tuple(classes)


class HopIndex:
    """Hop ``i`` uses class ``i``: ``classes`` is the number of virtual channels, the longest route allowed."""

    def __init__(self, classes: int, name: Callable[[int], str]) -> None:
        self.classes = classes
        self._name = name

    def of(self, nodes: Sequence[int]) -> tuple[int, ...]:
        hops = len(nodes) - 1
        if hops > self.classes:
            raise BackendError(
                f"flit_level.vcs: the route from {self._name(nodes[0])} to {self._name(nodes[-1])} crosses {hops} "
                f"links, but on this topology every hop needs a virtual channel class of its own to stay free of "
                f"deadlock and there are {self.classes} virtual channels per port"
            )
        return tuple(range(hops))


def vc_ranges(classes: int, vcs: int) -> list[tuple[int, int]]:
    """The virtual channels ``[low, high)`` of each class when ``vcs`` are split evenly into ``classes``."""
    if vcs < classes:
        raise BackendError(
            f"flit_level.vcs: this topology needs {classes} virtual channel classes to stay free of deadlock, "
            f"but there are {vcs} virtual channels per port"
        )
    return [(c * vcs // classes, (c + 1) * vcs // classes) for c in range(classes)]


def for_dimensions(topology: network_pb2.Topology) -> VcClasses:
    """Datelines on the rings of a list of dimensions (a message crosses one dimension per segment)."""
    rings = [d for d, dim in enumerate(topology.dimensions) if dim.kind == network_pb2.Dimension.RING and dim.size > 2]
    return Dateline(Grid.of(topology), rings) if rings else OneClass()


def for_fabric(topology: network_pb2.Topology, graph: LinkGraph, vcs: int) -> VcClasses:
    """The policy of the topology's fabric family (see the module's list)."""
    family = topology.WhichOneof("fabric")
    if family == "torus":
        rings = [d for d, size in enumerate(topology.torus.shape) if size > 2]
        if topology.torus.mesh or not rings:
            return OneClass()
        return Dateline(Grid(tuple(topology.torus.shape)), rings)
    if family == "hierarchical_alltoall":
        spec = topology.hierarchical_alltoall
        return Dateline(Grid((spec.local_size, spec.packages)), [0]) if spec.local_size > 2 else OneClass()
    if family == "dragonfly":
        npus, per_group = graph.npus, topology.dragonfly.routers_per_group

        def is_global(here: int, there: int) -> bool:
            return here >= npus and there >= npus and (here - npus) // per_group != (there - npus) // per_group

        return AfterGlobal(is_global)
    if family in ("fat_tree", "nvswitch"):
        return OneClass()
    return HopIndex(vcs, graph.name)
