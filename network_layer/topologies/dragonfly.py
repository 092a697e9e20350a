"""The dragonfly of Kim, Dally, Scott and Abts ("Technology-driven, highly-scalable dragonfly topology",
ISCA 2008), with minimal routing.

``groups`` groups of ``routers_per_group`` (a) routers; the routers of a group are fully connected by local
links; each router serves ``hosts_per_router`` NPUs and has ``global_links_per_router`` (h) global links to
other groups. NPU ``x`` sits at router ``x // hosts_per_router``; router ``r`` is in group ``r // a``.

Global links are arranged so that every two groups share exactly one (hence at most a*h + 1 groups): global
port ``c = i*h + j`` of router ``i`` of group ``G`` (port ``j`` of that router) leads to group ``c`` if
``c < G``, else ``c + 1``, arriving there at the port that leads back to ``G``. Ports past the last group
stay unused.

Minimal routing: up from the NPU to its router, one local link to the router of the group holding the global
link to the destination's group (if that is another router), the global link, one local link to the
destination's router (if another), down to the NPU: at most one global and two local links, and only one
minimal route exists. Routers are non-blocking, output-queued crossbars: messages contend only for links.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from stratasim.kernel.errors import TopologyError
from stratasim.network_layer.link_graph import Link, LinkGraph, duplex, link_speed
from stratasim.network_layer.topologies.base import FabricSection, LinkSection, fabric_topology
from stratasim.v1 import network_pb2

__all__ = ["FABRIC", "SECTIONS", "DragonflySection", "check", "build", "layout"]

FABRIC = "dragonfly"
"""The ``Topology.fabric`` field this module checks, lays out and builds."""


class DragonflySection(FabricSection):
    """``kind: dragonfly``: groups of fully connected routers joined by global links."""

    kind: Literal["dragonfly"]
    """Groups of fully connected routers joined by global links, minimal routing."""
    groups: StrictInt = Field(ge=1)
    """Groups of routers."""
    routers_per_group: StrictInt = Field(ge=1)
    """Routers in each group."""
    hosts_per_router: StrictInt = Field(ge=1)
    """NPUs attached to each router."""
    global_links_per_router: StrictInt = Field(ge=0)
    """Links from each router to other groups."""
    host_link: LinkSection
    """Links between an NPU and its router."""
    local_link: LinkSection
    """Links between routers of a group."""
    global_link: LinkSection
    """Links between groups."""

    def topology(self) -> network_pb2.Topology:
        return fabric_topology(
            FABRIC,
            network_pb2.DragonflyFabric(
                groups=self.groups,
                routers_per_group=self.routers_per_group,
                hosts_per_router=self.hosts_per_router,
                global_links_per_router=self.global_links_per_router,
                host_link=self.host_link.link(),
                local_link=self.local_link.link(),
                global_link=self.global_link.link(),
            ),
            layout,
        )


SECTIONS = (DragonflySection,)
"""The study's ``network.topology`` kinds this module reads."""


def check(spec: network_pb2.DragonflyFabric) -> None:
    """Raise :class:`TopologyError` naming the first impossible field."""
    for key in ("groups", "routers_per_group", "hosts_per_router"):
        if getattr(spec, key) < 1:
            raise TopologyError(f"{key}: must be at least 1, got {getattr(spec, key)}")
    ports = spec.routers_per_group * spec.global_links_per_router
    if spec.groups > ports + 1:
        raise TopologyError(
            f"groups: {spec.groups} groups need {spec.groups - 1} global links per group to reach one another, but "
            f"{spec.routers_per_group} routers_per_group x {spec.global_links_per_router} global_links_per_router "
            f"give {ports}"
        )
    for key in ("host_link", "local_link", "global_link"):
        link_speed(getattr(spec, key), key)


def layout(spec: network_pb2.DragonflyFabric) -> tuple[int, ...]:
    """One flat dimension of all NPUs."""
    return (spec.groups * spec.routers_per_group * spec.hosts_per_router,)


def size(spec: network_pb2.DragonflyFabric) -> tuple[int, int]:
    """NPUs and links (routers counted with them): a host cable per NPU, each router's local and global links,
    and the routers."""
    routers = spec.groups * spec.routers_per_group
    npus = routers * spec.hosts_per_router
    return npus, 2 * npus + routers * (spec.routers_per_group + spec.global_links_per_router) + routers


class _Dragonfly:
    """Node ids: NPUs, then routers (group by group); and the minimal route between two NPUs."""

    def __init__(self, spec: network_pb2.DragonflyFabric) -> None:
        self.a = spec.routers_per_group
        self.h = spec.global_links_per_router
        self.p = spec.hosts_per_router
        self.groups = spec.groups
        self.npus = spec.groups * self.a * self.p

    def router(self, group: int, index: int) -> int:
        return self.npus + group * self.a + index

    def gateway(self, group: int, goal: int) -> int:
        """The router of ``group`` holding the global link to group ``goal``."""
        port = goal if goal < group else goal - 1
        return self.router(group, port // self.h)

    def name(self, node: int) -> str:
        if node < self.npus:
            return f"npu {node}"
        group, index = divmod(node - self.npus, self.a)
        return f"router {group}.{index}"

    def path(self, src: int, dst: int) -> list[int]:
        first, last = self.npus + src // self.p, self.npus + dst // self.p
        group, goal = (first - self.npus) // self.a, (last - self.npus) // self.a
        routers = [first]
        if group != goal:
            routers += [self.gateway(group, goal), self.gateway(goal, group)]
        routers.append(last)
        hops = [routers[0]] + [r for previous, r in zip(routers, routers[1:]) if r != previous]
        return [src, *hops, dst]


def build(spec: network_pb2.DragonflyFabric) -> LinkGraph:
    fly = _Dragonfly(spec)
    host, local, far = (link_speed(getattr(spec, key), key) for key in ("host_link", "local_link", "global_link"))
    links: list[Link] = []
    for npu in range(fly.npus):
        links += duplex(npu, fly.npus + npu // fly.p, host)
    for group in range(fly.groups):
        for i in range(fly.a):
            for j in range(i + 1, fly.a):
                links += duplex(fly.router(group, i), fly.router(group, j), local)
        for goal in range(group + 1, fly.groups):  # each pair of groups once, from its lower group
            links += duplex(fly.gateway(group, goal), fly.gateway(goal, group), far)
    return LinkGraph(fly.npus, fly.npus + fly.groups * fly.a, links, fly.name, router=fly)
