"""NVIDIA DGX-1's hybrid cube-mesh: 8 GPUs joined by NVLink, routed on least latency.

NVIDIA describes it ("NVIDIA DGX-1 With Tesla V100 System Architecture", white paper WP-08437-002) as a cube
with GPUs at its corners, all twelve edges connected through NVLink (some edges by two NVLinks) and two of the
six faces with their diagonals connected as well: GPUs 0-3 and 4-7 are each fully connected (the two faces)
and GPU ``i`` is joined to GPU ``i + 4`` (the other four edges). On the V100 system every GPU uses all six of
its NVLinks; ``nvidia-smi topo -m`` there shows two links (NV2) between GPUs 0-3, 0-4, 1-2, 1-5, 2-3, 4-7,
5-6, 6-7 and one (NV1) for the other connected pairs (Alibaba Cloud's topology-aware GPU scheduling guide gives
GPU 0's row: two NVLinks to GPUs 3 and 4, one to GPUs 1 and 2, none to GPU 6). The P100 system (white paper
WP-08437-001) has the same pairs with one of each GPU's four NVLinks each.

The NVLinks between a pair act as one link of their summed bandwidth (a message is striped over them).
GPUs that share no NVLink reach each other through a third GPU, which forwards (as NCCL does): on the route
of least latency, then fewest links, then lowest GPU id (see :class:`stratasim.network_layer.routing.ShortestPaths`).
There are no switches.
"""

from __future__ import annotations

from typing import Literal

from stratasim.kernel.errors import TopologyError
from stratasim.network_layer.link_graph import Link, LinkGraph, duplex, link_speed
from stratasim.network_layer.topologies.base import FabricSection, LinkSection, fabric_topology
from stratasim.v1 import network_pb2

__all__ = ["FABRIC", "SECTIONS", "Dgx1Section", "check", "build", "layout", "nvlinks"]

FABRIC = "dgx1"
"""The ``Topology.fabric`` field this module checks, lays out and builds."""


class Dgx1Section(LinkSection, FabricSection):
    """``kind: dgx1``: DGX-1's hybrid cube-mesh of 8 GPUs; ``bandwidth`` and ``latency`` of one NVLink."""

    kind: Literal["dgx1"]
    """DGX-1's hybrid cube-mesh of 8 GPUs; ``bandwidth`` and ``latency`` are one NVLink's."""
    generation: Literal["p100", "v100"] = "v100"
    """Which DGX-1: ``p100`` or ``v100`` (its NVLink count per GPU pair)."""

    def topology(self) -> network_pb2.Topology:
        generation = network_pb2.Dgx1Fabric.Generation.Value(self.generation.upper())
        return fabric_topology(FABRIC, network_pb2.Dgx1Fabric(generation=generation, nvlink=self.link()), layout)


SECTIONS = (Dgx1Section,)
"""The study's ``network.topology`` kinds this module reads."""

_PAIRS = (
    (0, 1),
    (0, 2),
    (0, 3),
    (1, 2),
    (1, 3),
    (2, 3),
    (4, 5),
    (4, 6),
    (4, 7),
    (5, 6),
    (5, 7),
    (6, 7),
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
)
_DOUBLED_ON_V100 = frozenset({(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)})

_GENERATIONS = (network_pb2.Dgx1Fabric.P100, network_pb2.Dgx1Fabric.V100)


def nvlinks(generation: int) -> dict[tuple[int, int], int]:
    """How many NVLinks join each connected pair of GPUs ``(a, b)``, ``a < b``, in a DGX-1 of ``generation``."""
    doubled = _DOUBLED_ON_V100 if generation == network_pb2.Dgx1Fabric.V100 else frozenset()
    return {pair: 2 if pair in doubled else 1 for pair in _PAIRS}


def check(spec: network_pb2.Dgx1Fabric) -> None:
    """Raise :class:`TopologyError` naming the first impossible field."""
    if spec.generation not in _GENERATIONS:
        raise TopologyError("generation: unspecified; expected P100 or V100")
    link_speed(spec.nvlink, "nvlink")


def layout(spec: network_pb2.Dgx1Fabric) -> tuple[int, ...]:
    """One flat dimension of the 8 GPUs."""
    return (8,)


def size(spec: network_pb2.Dgx1Fabric) -> tuple[int, int]:
    """Eight GPUs and the links of their NVLink pairs (a duplex cable, two links, per connected pair)."""
    return 8, 2 * len(_PAIRS)


def build(spec: network_pb2.Dgx1Fabric) -> LinkGraph:
    bandwidth, latency = link_speed(spec.nvlink, "nvlink")
    links: list[Link] = []
    for (a, b), count in nvlinks(spec.generation).items():
        links += duplex(a, b, (bandwidth * count, latency))
    return LinkGraph(8, 8, links, lambda node: f"gpu {node}")
