"""The k-ary fat-tree of Al-Fares, Loukissas and Vahdat ("A scalable, commodity data center network
architecture", SIGCOMM 2008), routed up/down with the up-path chosen by the destination's id.

``k`` pods each hold k/2 edge and k/2 aggregation switches; every edge switch serves k/2 NPUs and is linked to
every aggregation switch of its pod; aggregation switch ``a`` of every pod is linked to the k/2 core switches
``a*k/2 .. a*k/2 + k/2 - 1``. That makes k^3/4 NPUs and (k/2)^2 core switches; NPU ``h`` sits in pod
``h // (k^2/4)`` under edge switch ``(h // (k/2)) % (k/2)`` of that pod. Every link has the same speed.

Routing goes up only as far as needed, then down: 2 links between NPUs of one edge switch, 4 within a pod,
6 between pods. The way up is fixed by the destination ``d`` (as the paper's suffix routing tables do): the
aggregation switch ``d % (k/2)`` of the source's pod and, between pods, its core switch
``(d // (k/2)) % (k/2)``; the way down is then the only one. Switches are non-blocking, output-queued
crossbars: messages contend only for links.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from stratasim.kernel.errors import TopologyError
from stratasim.network_layer.link_graph import Link, LinkGraph, duplex, link_speed
from stratasim.network_layer.topologies.base import FabricSection, LinkSection, fabric_topology
from stratasim.v1 import network_pb2

__all__ = ["FABRIC", "SECTIONS", "FatTreeSection", "check", "build", "layout"]

FABRIC = "fat_tree"
"""The ``Topology.fabric`` field this module checks, lays out and builds."""


class FatTreeSection(LinkSection, FabricSection):
    """``kind: fat_tree``: a k-ary fat-tree of k^3/4 NPUs; every link alike."""

    kind: Literal["fat_tree"]
    """A k-ary fat-tree routed up/down."""
    k: StrictInt = Field(ge=2)
    """Ports per switch (even); the tree holds k^3/4 NPUs."""

    def topology(self) -> network_pb2.Topology:
        return fabric_topology(FABRIC, network_pb2.FatTreeFabric(k=self.k, link=self.link()), layout)


SECTIONS = (FatTreeSection,)
"""The study's ``network.topology`` kinds this module reads."""


def check(spec: network_pb2.FatTreeFabric) -> None:
    """Raise :class:`TopologyError` naming the first impossible field."""
    if spec.k < 2 or spec.k % 2:
        raise TopologyError(f"k: a k-ary fat-tree needs an even k of at least 2, got {spec.k}")
    link_speed(spec.link, "link")


def layout(spec: network_pb2.FatTreeFabric) -> tuple[int, ...]:
    """One flat dimension of all NPUs: the tree has no dimensions for collectives to follow."""
    return (spec.k**3 // 4,)


def size(spec: network_pb2.FatTreeFabric) -> tuple[int, int]:
    """NPUs and links (switches counted with them): k^3/4 hosts, two links per host, edge-aggregation and
    aggregation-core cable, and 5k^2/4 switches."""
    k = spec.k
    return k**3 // 4, 2 * (k**3 // 4 + k * k * k // 2) + 5 * k * k // 4


class _Tree:
    """Node ids of a k-ary fat-tree: NPUs, then edge, aggregation and core switches."""

    def __init__(self, k: int) -> None:
        self.half = k // 2
        self.per_pod = self.half * self.half  # NPUs per pod, also edge-aggregation pairs per pod
        self.npus = k * self.per_pod
        self.first_aggregation = self.npus + k * self.half
        self.first_core = self.first_aggregation + k * self.half
        self.nodes = self.first_core + self.per_pod

    def edge(self, npu: int) -> int:
        return self.npus + npu // self.half

    def aggregation(self, pod: int, index: int) -> int:
        return self.first_aggregation + pod * self.half + index

    def core(self, aggregation_index: int, index: int) -> int:
        return self.first_core + aggregation_index * self.half + index

    def name(self, node: int) -> str:
        if node < self.npus:
            return f"npu {node}"
        if node < self.first_aggregation:
            pod, index = divmod(node - self.npus, self.half)
            return f"edge {pod}.{index}"
        if node < self.first_core:
            pod, index = divmod(node - self.first_aggregation, self.half)
            return f"aggregation {pod}.{index}"
        return f"core {node - self.first_core}"

    def path(self, src: int, dst: int) -> list[int]:
        up, down = self.edge(src), self.edge(dst)
        if up == down:
            return [src, up, dst]
        pod, goal_pod = src // self.per_pod, dst // self.per_pod
        index = dst % self.half
        if pod == goal_pod:
            return [src, up, self.aggregation(pod, index), down, dst]
        core = self.core(index, (dst // self.half) % self.half)
        return [src, up, self.aggregation(pod, index), core, self.aggregation(goal_pod, index), down, dst]


def build(spec: network_pb2.FatTreeFabric) -> LinkGraph:
    tree = _Tree(spec.k)
    speed = link_speed(spec.link, "link")
    links: list[Link] = []
    for npu in range(tree.npus):
        links += duplex(npu, tree.edge(npu), speed)
    for pod in range(spec.k):
        for a in range(tree.half):
            aggregation = tree.aggregation(pod, a)
            for e in range(tree.half):
                links += duplex(tree.npus + pod * tree.half + e, aggregation, speed)
            for c in range(tree.half):
                links += duplex(aggregation, tree.core(a, c), speed)
    return LinkGraph(tree.npus, tree.nodes, links, tree.name, router=tree)
