"""``network.topology``: a list of dimensions, or a mapping whose ``kind`` names a fabric.

The list (innermost dimension first) is ASTRA-sim 2.x's multi-dimensional composition of ring,
fully_connected and switch dimensions. A mapping describes a fabric the network layer routes on link by link
(:mod:`stratasim.network_layer.topologies`); bandwidths are per link and direction, latencies per link traversal::

    {kind: torus, shape: [4, 4], bandwidth: 50GB/s, latency: 500ns}          # or kind: mesh
    {kind: hierarchical_torus, local: {size: 2, bandwidth: 500GB/s, latency: 100ns},
     horizontal: {size: 4, ...}, vertical: {size: 4, ...}}                   # ASTRA-sim Fig. 3a
    {kind: fat_tree, k: 4, bandwidth: 50GB/s, latency: 500ns}
    {kind: dragonfly, groups: 9, routers_per_group: 4, hosts_per_router: 2, global_links_per_router: 2,
     host_link: {bandwidth: ..., latency: ...}, local_link: {...}, global_link: {...}}
    {kind: dgx1, generation: v100, bandwidth: 25GB/s, latency: 700ns}       # bandwidth of one NVLink
    {kind: nvswitch, gpus_per_board: 8, planes: 6, boards: 2, bandwidth: 25GB/s, latency: 700ns,
     trunk_link: {bandwidth: 200GB/s, latency: 700ns}}                       # DGX-2
    {kind: hierarchical_alltoall, local: {size: 2, bandwidth: ..., latency: ...},
     alltoall: {size: 3, switches: 2, bandwidth: ..., latency: ...}}         # ASTRA-sim Fig. 3b
    {kind: graph, file: chips.yaml}                                          # or the file's keys inline

A graph (as DEAP describes accelerator graphs) lists ``chips`` (the NPUs, in NPU id order) and optionally
``switches``, each with an ``id`` and ``links``; a link names the node it goes ``to`` and has a
``bandwidth`` (else the graph's) and a ``latency``, or a ``distance`` whose latency is
``distance x latency_per_distance`` (signal propagation: about 5ns per metre of cable), else the graph's
``latency``. A link is a cable used both ways; listing it again from its other end is allowed if the two
agree. With ``directed: true`` every listed link goes one way only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from annotated_types import MinLen
from pydantic import BeforeValidator, Discriminator, Field, StrictInt, Tag

from stratasim.network_layer.topologies import topology_of
from stratasim.kernel.errors import TopologyError
from stratasim.kernel.schema import Bandwidth, Bytes, Section, TimePs
from stratasim.v1 import network_pb2

__all__ = ["DimensionSection", "TopologySection", "GraphSection", "FlitSection"]


class DimensionSection(Section):
    """One ``network.topology`` entry: a dimension of ``size`` NPUs; bandwidth in bytes/s, latency in ps;
    ``backend`` carries this dimension's traffic with another network backend than ``network.backend``
    (fidelity mixed per dimension: :mod:`stratasim.network_layer.mixed`)."""

    kind: Literal["ring", "fully_connected", "switch"]
    size: StrictInt = Field(ge=1)
    bandwidth: Bandwidth
    latency: TimePs
    backend: str | None = None


class LinkSection(Section):
    """A link's bandwidth (bytes/s, each direction) and latency (ps)."""

    bandwidth: Bandwidth
    latency: TimePs

    def link(self) -> network_pb2.LinkSpec:
        return network_pb2.LinkSpec(bandwidth_bytes_per_s=self.bandwidth, latency_ps=self.latency)


class LevelSection(LinkSection):
    """One level of a hierarchical fabric: ``size`` NPUs and the speed of its links."""

    size: StrictInt = Field(ge=2)


class AlltoallLevelSection(LevelSection):
    """The alltoall level of a hierarchical alltoall: ``size`` packages, joined by ``switches`` switches."""

    switches: StrictInt = Field(1, ge=1)


class TorusSection(LinkSection):
    """``kind: torus`` or ``mesh``: ``shape`` NPUs per dimension, dimension 0 innermost; every link alike."""

    kind: Literal["torus", "mesh"]
    shape: list[Annotated[StrictInt, Field(ge=2)]] = Field(min_length=1)

    def topology(self) -> network_pb2.Topology:
        fabric = network_pb2.TorusFabric(shape=self.shape, link=[self.link()], mesh=self.kind == "mesh")
        return topology_of("torus", fabric)


class HierarchicalTorusSection(Section):
    """``kind: hierarchical_torus``: ASTRA-sim's local x horizontal x vertical torus, each with its own links."""

    kind: Literal["hierarchical_torus"]
    local: LevelSection
    horizontal: LevelSection
    vertical: LevelSection

    def topology(self) -> network_pb2.Topology:
        levels = (self.local, self.horizontal, self.vertical)
        shape, links = [level.size for level in levels], [level.link() for level in levels]
        return topology_of("torus", network_pb2.TorusFabric(shape=shape, link=links))


class FatTreeSection(LinkSection):
    """``kind: fat_tree``: a k-ary fat-tree of k^3/4 NPUs; every link alike."""

    kind: Literal["fat_tree"]
    k: StrictInt = Field(ge=2)

    def topology(self) -> network_pb2.Topology:
        return topology_of("fat_tree", network_pb2.FatTreeFabric(k=self.k, link=self.link()))


class DragonflySection(Section):
    """``kind: dragonfly``: groups of fully connected routers joined by global links."""

    kind: Literal["dragonfly"]
    groups: StrictInt = Field(ge=1)
    routers_per_group: StrictInt = Field(ge=1)
    hosts_per_router: StrictInt = Field(ge=1)
    global_links_per_router: StrictInt = Field(ge=0)
    host_link: LinkSection
    local_link: LinkSection
    global_link: LinkSection

    def topology(self) -> network_pb2.Topology:
        return topology_of("dragonfly", network_pb2.DragonflyFabric(
            groups=self.groups, routers_per_group=self.routers_per_group, hosts_per_router=self.hosts_per_router,
            global_links_per_router=self.global_links_per_router, host_link=self.host_link.link(),
            local_link=self.local_link.link(), global_link=self.global_link.link(),
        ))  # fmt: skip


class Dgx1Section(LinkSection):
    """``kind: dgx1``: DGX-1's hybrid cube-mesh of 8 GPUs; ``bandwidth`` and ``latency`` of one NVLink."""

    kind: Literal["dgx1"]
    generation: Literal["p100", "v100"] = "v100"

    def topology(self) -> network_pb2.Topology:
        generation = network_pb2.Dgx1Fabric.Generation.Value(self.generation.upper())
        return topology_of("dgx1", network_pb2.Dgx1Fabric(generation=generation, nvlink=self.link()))


class NvSwitchSection(LinkSection):
    """``kind: nvswitch``: boards of GPUs, each GPU linked (``bandwidth``, ``latency``) to every switch plane."""

    kind: Literal["nvswitch"]
    gpus_per_board: StrictInt = Field(ge=1)
    planes: StrictInt = Field(ge=1)
    boards: StrictInt = Field(1, ge=1)
    trunk_link: LinkSection | None = None

    def topology(self) -> network_pb2.Topology:
        fabric = network_pb2.NvSwitchFabric(
            gpus_per_board=self.gpus_per_board, planes=self.planes, boards=self.boards, gpu_link=self.link()
        )
        if self.trunk_link is not None:
            fabric.trunk_link.CopyFrom(self.trunk_link.link())
        return topology_of("nvswitch", fabric)


class HierarchicalAlltoallSection(Section):
    """``kind: hierarchical_alltoall``: rings of ``local.size`` NPUs in ``alltoall.size`` packages."""

    kind: Literal["hierarchical_alltoall"]
    local: LevelSection
    alltoall: AlltoallLevelSection

    def topology(self) -> network_pb2.Topology:
        return topology_of("hierarchical_alltoall", network_pb2.HierarchicalAlltoallFabric(
            local_size=self.local.size, packages=self.alltoall.size, switches=self.alltoall.switches,
            local_link=self.local.link(), global_link=self.alltoall.link(),
        ))  # fmt: skip


def _name(value: object) -> object:
    """Chip ids may be written as numbers; they are names all the same."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


NodeName = Annotated[str, BeforeValidator(_name)]


class GraphLinkSection(Section):
    """One link of a graph node: ``to`` another node, with its own speed or the graph's."""

    to: NodeName
    bandwidth: Bandwidth | None = None
    latency: TimePs | None = None
    distance: float | None = Field(None, ge=0)


class NodeSection(Section):
    """A chip (NPU) or switch of a graph and the links it lists."""

    id: NodeName
    links: list[GraphLinkSection] = []


class GraphSection(Section):
    """``kind: graph``: chips and switches with links (see the module docstring)."""

    kind: Literal["graph"]
    file: str | None = None
    chips: list[NodeSection] = Field(min_length=1)
    switches: list[NodeSection] = []
    bandwidth: Bandwidth | None = None
    latency: TimePs | None = None
    latency_per_distance: TimePs | None = None
    directed: bool = False

    def topology(self) -> network_pb2.Topology:
        """The graph as the network contract's message; :class:`TopologyError` naming the entry at fault."""
        nodes = [(f"chips[{i}]", node) for i, node in enumerate(self.chips)]
        nodes += [(f"switches[{i}]", node) for i, node in enumerate(self.switches)]
        index: dict[str, int] = {}
        for number, (where, node) in enumerate(nodes):
            if node.id in index:
                raise TopologyError(f"{where}.id: {node.id!r} is also {nodes[index[node.id]][0]}'s id")
            index[node.id] = number
        fabric = network_pb2.GraphFabric(node=[node.id for _, node in nodes], npus=len(self.chips))
        listed: dict[tuple[int, int], tuple[str, network_pb2.LinkSpec]] = {}
        for number, (where, node) in enumerate(nodes):
            for j, link in enumerate(node.links):
                at = f"{where}.links[{j}]"
                if link.to not in index:
                    raise TopologyError(f"{at}.to: unknown chip or switch {link.to!r}")
                target = index[link.to]
                if target == number:
                    raise TopologyError(f"{at}.to: a link from {node.id!r} to itself")
                spec = self._speed(link, at)
                key = (number, target) if self.directed else (min(number, target), max(number, target))
                if key in listed:
                    first, first_spec = listed[key]
                    if self.directed or first_spec != spec:
                        raise TopologyError(f"{at}: the link from {node.id!r} to {link.to!r} is also at {first}"
                                            f"{'' if self.directed else ' with another bandwidth or latency'}")
                    continue
                listed[key] = (at, spec)
                fabric.link.add(src=number, dst=target, spec=spec)
                if not self.directed:
                    fabric.link.add(src=target, dst=number, spec=spec)
        return topology_of("graph", fabric)

    def _speed(self, link: GraphLinkSection, at: str) -> network_pb2.LinkSpec:
        bandwidth = link.bandwidth if link.bandwidth is not None else self.bandwidth
        if bandwidth is None:
            raise TopologyError(f"{at}.bandwidth: required (the graph gives no bandwidth for every link)")
        if link.latency is not None and link.distance is not None:
            raise TopologyError(f"{at}: give a latency or a distance, not both")
        if link.distance is not None:
            if self.latency_per_distance is None:
                raise TopologyError(f"{at}.distance: needs the graph's latency_per_distance")
            latency = round(link.distance * self.latency_per_distance)
        elif link.latency is not None:
            latency = link.latency
        elif self.latency is not None:
            latency = self.latency
        else:
            raise TopologyError(f"{at}.latency: required (or a distance; the graph gives no latency for every link)")
        return network_pb2.LinkSpec(bandwidth_bytes_per_s=bandwidth, latency_ps=latency)


_KINDS = ("torus", "mesh", "hierarchical_torus", "fat_tree", "dragonfly", "dgx1", "nvswitch",
          "hierarchical_alltoall", "graph")  # fmt: skip


def _form(value: Any) -> str | None:
    """The union member for ``value``: the list of dimensions, a fabric by its kind, or None (an error)."""
    if isinstance(value, Mapping):
        kind = value.get("kind")
        return kind if isinstance(kind, str) and kind in _KINDS else None
    return "dimensions"


TopologySection = Annotated[
    Union[
        Annotated[list[DimensionSection], MinLen(1), Tag("dimensions")],
        Annotated[TorusSection, Tag("torus")],
        Annotated[TorusSection, Tag("mesh")],
        Annotated[HierarchicalTorusSection, Tag("hierarchical_torus")],
        Annotated[FatTreeSection, Tag("fat_tree")],
        Annotated[DragonflySection, Tag("dragonfly")],
        Annotated[Dgx1Section, Tag("dgx1")],
        Annotated[NvSwitchSection, Tag("nvswitch")],
        Annotated[HierarchicalAlltoallSection, Tag("hierarchical_alltoall")],
        Annotated[GraphSection, Tag("graph")],
    ],
    Discriminator(
        _form,
        custom_error_type="topology_form",
        custom_error_message=f"expected a list of dimensions or a mapping whose kind is one of {', '.join(_KINDS)}",
    ),
]
"""``network.topology``: the tag pydantic puts in error locations ("dimensions", the kind) is not a key."""


class FlitSection(Section):
    """``network.flit``: the flit-level backend's routers (:class:`stratasim.network_layer.flit_level.FlitParameters`
    documents each key); an absent key keeps the backend's default."""

    flit_bytes: Bytes | None = Field(None, gt=0)
    packet_flits: StrictInt | None = Field(None, ge=1)
    header_bytes: Bytes | None = Field(None, ge=0)
    vcs: StrictInt | None = Field(None, ge=1)
    buffer_flits: StrictInt | None = Field(None, ge=0)
    pipeline_cycles: StrictInt | None = Field(None, ge=0)
    cycle: TimePs | None = Field(None, gt=0)

    def proto(self) -> network_pb2.FlitParameters:
        """The section as the network contract's message (unset keys stay unset)."""
        given = {key: value for key, value in self.model_dump().items() if value is not None}
        if "cycle" in given:
            given["cycle_ps"] = given.pop("cycle")
        return network_pb2.FlitParameters(**given)
