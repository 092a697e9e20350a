"""ASTRA-sim's hierarchical alltoall M x N (Rashidi et al., ISPASS 2020, Fig. 3b).

``packages`` packages each hold ``local_size`` NPUs on a bidirectional ring of fast in-package links; every
NPU is linked to each of ``switches`` global switches by an inter-package link. NPU ids vary fastest within a
package: NPU ``x`` is NPU ``x % local_size`` of package ``x // local_size``, and collectives run on the two
dimensions (local, then alltoall).

Within a package a message goes the shorter way round the ring (the positive direction on a tie); between
packages it goes up to switch ``(src package + dst package) % switches`` and straight down to its
destination, whatever its local position. Switches are non-blocking, output-queued crossbars: messages
contend only for links. (The hierarchical torus of the paper's Fig. 3a is a 3-D
:mod:`~stratasim.network_layer.topologies.torus`.)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from stratasim.kernel.errors import TopologyError
from stratasim.network_layer.link_graph import Link, LinkGraph, duplex, link_speed
from stratasim.network_layer.routing import ring_step
from stratasim.network_layer.topologies.base import FabricSection, LevelSection, fabric_topology
from stratasim.v1 import network_pb2

__all__ = ["FABRIC", "SECTIONS", "HierarchicalAlltoallSection", "check", "build", "layout"]

FABRIC = "hierarchical_alltoall"
"""The ``Topology.fabric`` field this module checks, lays out and builds."""


class AlltoallLevelSection(LevelSection):
    """The alltoall level of a hierarchical alltoall: ``size`` packages, joined by ``switches`` switches."""

    switches: StrictInt = Field(1, ge=1)
    """Switches joining the packages."""


class HierarchicalAlltoallSection(FabricSection):
    """``kind: hierarchical_alltoall``: rings of ``local.size`` NPUs in ``alltoall.size`` packages."""

    kind: Literal["hierarchical_alltoall"]
    """Rings of ``local.size`` NPUs in ``alltoall.size`` packages joined by switches (ASTRA-sim Fig. 3b)."""
    local: LevelSection
    """The ring inside a package: its size and links."""
    alltoall: AlltoallLevelSection
    """The packages and the switches joining them."""

    def topology(self) -> network_pb2.Topology:
        return fabric_topology(
            FABRIC,
            network_pb2.HierarchicalAlltoallFabric(
                local_size=self.local.size,
                packages=self.alltoall.size,
                switches=self.alltoall.switches,
                local_link=self.local.link(),
                global_link=self.alltoall.link(),
            ),
            layout,
        )


SECTIONS = (HierarchicalAlltoallSection,)
"""The study's ``network.topology`` kinds this module reads."""


def check(spec: network_pb2.HierarchicalAlltoallFabric) -> None:
    """Raise :class:`TopologyError` naming the first impossible field."""
    for key, least in (("local_size", 2), ("packages", 2), ("switches", 1)):
        if getattr(spec, key) < least:
            raise TopologyError(f"{key}: must be at least {least}, got {getattr(spec, key)}")
    link_speed(spec.local_link, "local_link")
    link_speed(spec.global_link, "global_link")


def layout(spec: network_pb2.HierarchicalAlltoallFabric) -> tuple[int, ...]:
    """The local ring, then the packages."""
    return (spec.local_size, spec.packages)


def size(spec: network_pb2.HierarchicalAlltoallFabric) -> tuple[int, int]:
    """NPUs and links (switches counted with them): each NPU's ring cable and a cable to every switch, and the
    switches."""
    npus = spec.local_size * spec.packages
    return npus, 2 * npus * (spec.switches + 1) + spec.switches


class _Hierarchy:
    def __init__(self, spec: network_pb2.HierarchicalAlltoallFabric) -> None:
        self.local = spec.local_size
        self.switches = spec.switches
        self.npus = spec.local_size * spec.packages

    def name(self, node: int) -> str:
        return f"npu {node}" if node < self.npus else f"switch {node - self.npus}"

    def path(self, src: int, dst: int) -> list[int]:
        package, goal = src // self.local, dst // self.local
        if package != goal:
            return [src, self.npus + (package + goal) % self.switches, dst]
        own, target = src % self.local, dst % self.local
        step = ring_step(own, target, self.local)
        base = package * self.local
        path = [src]
        while own != target:
            own = (own + step) % self.local
            path.append(base + own)
        return path


def build(spec: network_pb2.HierarchicalAlltoallFabric) -> LinkGraph:
    shape = _Hierarchy(spec)
    local = link_speed(spec.local_link, "local_link")
    far = link_speed(spec.global_link, "global_link")
    links: list[Link] = []
    for npu in range(shape.npus):
        position = npu % spec.local_size
        if position + 1 < spec.local_size:
            links += duplex(npu, npu + 1, local)
        elif spec.local_size > 2:  # the cable closing the package's ring
            links += duplex(npu, npu - position, local)
        for switch in range(spec.switches):
            links += duplex(npu, shape.npus + switch, far)
    return LinkGraph(shape.npus, shape.npus + spec.switches, links, shape.name, router=shape, symmetric=True)
