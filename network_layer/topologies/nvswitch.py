"""NVSwitch nodes (DGX-2, HGX): GPUs each linked to every switch plane of their board.

A board holds ``gpus_per_board`` GPUs and ``planes`` NVSwitches; every GPU has one link (all its NVLinks to
that switch together) to each switch of its board. With several boards, switch ``p`` of each board is linked
to switch ``p`` of every other board (DGX-2: two boards of 8 GPUs and 6 switches, each switch joined to its
peer by 8 NVLinks). GPU ``g`` is on board ``g // gpus_per_board``.

A message is not striped: it crosses one plane, ``(src + dst) % planes``, going GPU → switch → GPU, or
GPU → switch → peer switch → GPU between boards; different pairs spread over the planes. To model perfect
striping instead, give one plane whose link has the GPU's whole NVLink bandwidth. NVSwitches are
non-blocking, output-queued crossbars: messages contend only for links.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from stratasim.kernel.errors import TopologyError
from stratasim.network_layer.link_graph import Link, LinkGraph, duplex, link_speed
from stratasim.network_layer.topologies.base import FabricSection, LinkSection, fabric_topology
from stratasim.v1 import network_pb2

__all__ = ["FABRIC", "SECTIONS", "NvSwitchSection", "check", "build", "layout"]

FABRIC = "nvswitch"
"""The ``Topology.fabric`` field this module checks, lays out and builds."""


class NvSwitchSection(LinkSection, FabricSection):
    """``kind: nvswitch``: boards of GPUs, each GPU linked (``bandwidth``, ``latency``) to every switch plane."""

    kind: Literal["nvswitch"]
    """Boards of GPUs, each GPU linked to every switch plane (DGX-2, HGX); ``bandwidth`` and ``latency`` are a GPU-
    to-switch link's."""
    gpus_per_board: StrictInt = Field(ge=1)
    """GPUs on each board."""
    planes: StrictInt = Field(ge=1)
    """NVSwitch planes on each board."""
    boards: StrictInt = Field(1, ge=1)
    """Boards, joined plane by plane by trunk links."""
    trunk_link: LinkSection | None = None
    """Links between the boards' switches (needed with more than one board)."""

    def topology(self) -> network_pb2.Topology:
        fabric = network_pb2.NvSwitchFabric(
            gpus_per_board=self.gpus_per_board, planes=self.planes, boards=self.boards, gpu_link=self.link()
        )
        if self.trunk_link is not None:
            fabric.trunk_link.CopyFrom(self.trunk_link.link())
        return fabric_topology(FABRIC, fabric, layout)


SECTIONS = (NvSwitchSection,)
"""The study's ``network.topology`` kinds this module reads."""


def check(spec: network_pb2.NvSwitchFabric) -> None:
    """Raise :class:`TopologyError` naming the first impossible field."""
    for key in ("gpus_per_board", "planes", "boards"):
        if getattr(spec, key) < 1:
            raise TopologyError(f"{key}: must be at least 1, got {getattr(spec, key)}")
    link_speed(spec.gpu_link, "gpu_link")
    if spec.boards > 1:
        if not spec.HasField("trunk_link"):
            raise TopologyError(f"trunk_link: required to join {spec.boards} boards")
        link_speed(spec.trunk_link, "trunk_link")


def layout(spec: network_pb2.NvSwitchFabric) -> tuple[int, ...]:
    """One flat dimension of all GPUs."""
    return (spec.gpus_per_board * spec.boards,)


def size(spec: network_pb2.NvSwitchFabric) -> tuple[int, int]:
    """NPUs and links (switches counted with them): a cable per GPU and plane, each switch's trunks and the
    switches."""
    npus = spec.gpus_per_board * spec.boards
    switches = spec.planes * spec.boards
    return npus, 2 * npus * spec.planes + switches * (spec.boards + 1)


class _Node:
    """Node ids: GPUs, then switches board by board; and the route through one plane."""

    def __init__(self, spec: network_pb2.NvSwitchFabric) -> None:
        self.per_board = spec.gpus_per_board
        self.planes = spec.planes
        self.gpus = spec.gpus_per_board * spec.boards

    def switch(self, board: int, plane: int) -> int:
        return self.gpus + board * self.planes + plane

    def name(self, node: int) -> str:
        if node < self.gpus:
            return f"gpu {node}"
        board, plane = divmod(node - self.gpus, self.planes)
        return f"nvswitch {board}.{plane}"

    def path(self, src: int, dst: int) -> list[int]:
        plane = (src + dst) % self.planes
        up, down = self.switch(src // self.per_board, plane), self.switch(dst // self.per_board, plane)
        return [src, up, dst] if up == down else [src, up, down, dst]


def build(spec: network_pb2.NvSwitchFabric) -> LinkGraph:
    node = _Node(spec)
    gpu_link = link_speed(spec.gpu_link, "gpu_link")
    links: list[Link] = []
    for gpu in range(node.gpus):
        for plane in range(spec.planes):
            links += duplex(gpu, node.switch(gpu // spec.gpus_per_board, plane), gpu_link)
    if spec.boards > 1:
        trunk = link_speed(spec.trunk_link, "trunk_link")
        for plane in range(spec.planes):
            for board in range(spec.boards):
                for other in range(board + 1, spec.boards):
                    links += duplex(node.switch(board, plane), node.switch(other, plane), trunk)
    return LinkGraph(
        node.gpus, node.gpus + spec.boards * spec.planes, links, node.name, router=node, symmetric=spec.boards == 1
    )
