"""Arbitrary graphs: named nodes and directed links, each with its own bandwidth and latency.

Nodes ``0 .. npus-1`` are the NPUs, the rest switches or routers (non-blocking, output-queued crossbars:
messages contend only for links). NPUs forward traffic that is not theirs, as chips of a DEAP-style
accelerator graph do. Routes are least-latency paths with stated tie-breaking
(:class:`stratasim.network_layer.routing.ShortestPaths`). The study file's ``kind: graph`` and :func:`from_networkx`
both produce the :class:`~stratasim.v1.network_pb2.GraphFabric` read here.

In a study (as DEAP describes accelerator graphs) a graph lists ``chips`` (the NPUs, in NPU id order) and
optionally ``switches``, each with an ``id`` and ``links``; a link names the node it goes ``to`` and has a
``bandwidth`` (else the graph's) and a ``latency``, or a ``distance`` whose latency is
``distance x latency_per_distance`` (signal propagation: about 5ns per metre of cable), else the graph's
``latency``. A link is a cable used both ways; listing it again from its other end is allowed if the two
agree. With ``directed: true`` every listed link goes one way only.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.schema import Latency, LinkBandwidth, Section
from stratasim.kernel.units import check_band, parse_bandwidth, parse_time_ps
from stratasim.network_layer.link_graph import Link, LinkGraph, link_speed
from stratasim.network_layer.topologies.base import FabricSection, fabric_topology
from stratasim.v1 import network_pb2

__all__ = ["FABRIC", "SECTIONS", "GraphSection", "check", "build", "layout", "from_networkx"]

FABRIC = "graph"
"""The ``Topology.fabric`` field this module checks, lays out and builds."""


def _name(value: object) -> object:
    """Chip ids may be written as numbers; they are names all the same."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


NodeName = Annotated[str, BeforeValidator(_name), WithJsonSchema({"type": ["string", "integer"]})]


class GraphLinkSection(Section):
    """One link of a graph node: ``to`` another node, with its own speed or the graph's."""

    to: NodeName
    """The node at the link's other end."""
    bandwidth: LinkBandwidth | None = None
    """The link's bandwidth (default: the graph's)."""
    latency: Latency | None = None
    """The link's latency (default: the graph's, or ``latency_per_distance`` times ``distance``)."""
    distance: float | None = Field(None, ge=0)
    """The link's length, priced by ``latency_per_distance``."""


class NodeSection(Section):
    """A chip (NPU) or switch of a graph and the links it lists."""

    id: NodeName
    """The node's name (a number is read as a name)."""
    links: list[GraphLinkSection] = []
    """The node's links to other nodes."""


class GraphSection(FabricSection):
    """``kind: graph``: chips and switches with links (see the module docstring); ``file`` is read by the study
    loader, relative to the study file, as if its keys were written in place."""

    kind: Literal["graph"]
    """Chips and switches with links, from YAML (DEAP style)."""
    file: str | None = None
    """A YAML file (relative to the study file) holding this mapping's keys."""
    chips: list[NodeSection] = Field(min_length=1)
    """The chips (NPUs), in NPU order."""
    switches: list[NodeSection] = []
    """The switches."""
    bandwidth: LinkBandwidth | None = None
    """Bandwidth of a link that gives none."""
    latency: Latency | None = None
    """Latency of a link that gives none (nor a distance)."""
    latency_per_distance: Latency | None = None
    """Latency per unit of a link's ``distance``."""
    directed: bool = False
    """Whether each link goes one way only (default: both ways)."""

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
                        raise TopologyError(
                            f"{at}: the link from {node.id!r} to {link.to!r} is also at {first}"
                            f"{'' if self.directed else ' with another bandwidth or latency'}"
                        )
                    continue
                listed[key] = (at, spec)
                fabric.link.add(src=number, dst=target, spec=spec)
                if not self.directed:
                    fabric.link.add(src=target, dst=number, spec=spec)
        return fabric_topology(FABRIC, fabric, layout)

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


SECTIONS = (GraphSection,)
"""The study's ``network.topology`` kinds this module reads."""


def check(spec: network_pb2.GraphFabric) -> None:
    """Raise :class:`TopologyError` naming the first impossible node or link, or two NPUs with no route."""
    if not 1 <= spec.npus <= len(spec.node):
        raise TopologyError(f"npus: must be between 1 and the {len(spec.node)} nodes, got {spec.npus}")
    seen: dict[str, int] = {}
    for index, name in enumerate(spec.node):
        if name in seen:
            raise TopologyError(f"node[{index}]: the name {name!r} is also node[{seen[name]}]'s")
        seen[name] = index
    for index, link in enumerate(spec.link):
        for end in ("src", "dst"):
            if getattr(link, end) >= len(spec.node):
                raise TopologyError(f"link[{index}].{end}: no node {getattr(link, end)} among {len(spec.node)}")
        link_speed(link.spec, f"link[{index}] ({spec.node[link.src]!r} -> {spec.node[link.dst]!r}).spec")
    graph = build(spec)
    pair = graph.unreachable_pair()
    if pair is not None:
        a, b = (repr(spec.node[npu]) for npu in pair[:2])
        if pair[2]:
            raise TopologyError(f"the graph is disconnected: {a} and {b} cannot reach each other")
        raise TopologyError(f"unroutable: no path from {a} to {b} (only the other way)")


def layout(spec: network_pb2.GraphFabric) -> tuple[int, ...]:
    """One flat dimension of all NPUs."""
    return (spec.npus,)


def size(spec: network_pb2.GraphFabric) -> tuple[int, int]:
    """Nodes and links (nodes counted with them), as the graph lists them."""
    return len(spec.node), len(spec.link) + len(spec.node)


def build(spec: network_pb2.GraphFabric) -> LinkGraph:
    names = list(spec.node)
    links = [Link(link.src, link.dst, *link_speed(link.spec, f"link[{i}].spec")) for i, link in enumerate(spec.link)]
    return LinkGraph(spec.npus, len(names), links, names.__getitem__)


def from_networkx(graph: Any, *, latency_per_distance_ps: int | None = None) -> network_pb2.Topology:
    """A topology from a networkx graph: nodes with ``switch=True`` are switches, the others NPUs (NPU ids in
    the graph's node order, switches after them); node names are ``str(node)``.

    Every edge needs ``bandwidth`` (bytes/s, or a string such as ``"50GB/s"``) and either ``latency`` (ps, or a
    string such as ``"500ns"``) or ``distance``, whose latency is ``distance * latency_per_distance_ps``
    (rounded to the nearest ps). An edge of an undirected graph is a link each way; of a directed graph one
    link. Multigraphs are refused: give one edge of the parallel edges' summed bandwidth.
    """
    if graph.is_multigraph():
        raise TopologyError("a multigraph: give one edge of the parallel edges' summed bandwidth instead")
    npus = [node for node, data in graph.nodes(data=True) if not data.get("switch", False)]
    switches = [node for node, data in graph.nodes(data=True) if data.get("switch", False)]
    index = {node: i for i, node in enumerate(npus + switches)}
    fabric = network_pb2.GraphFabric(node=[str(node) for node in npus + switches], npus=len(npus))
    for a, b, data in graph.edges(data=True):
        spec = _edge_speed(data, f"edge ({a!r}, {b!r})", latency_per_distance_ps)
        fabric.link.add(src=index[a], dst=index[b], spec=spec)
        if not graph.is_directed():
            fabric.link.add(src=index[b], dst=index[a], spec=spec)
    return network_pb2.Topology(dimensions=[network_pb2.Dimension(size=len(npus))], graph=fabric)


def _edge_speed(data: dict[str, Any], where: str, per_distance: int | None) -> network_pb2.LinkSpec:
    try:
        if "bandwidth" not in data:
            raise TopologyError(f"{where}: no 'bandwidth'")
        bandwidth = data["bandwidth"]
        bandwidth = parse_bandwidth(bandwidth) if isinstance(bandwidth, str) else float(bandwidth)
        if "latency" in data:
            latency = data["latency"]
            latency = parse_time_ps(latency) if isinstance(latency, str) else int(latency)
        elif "distance" in data and per_distance is not None:
            latency = round(float(data["distance"]) * per_distance)
        else:
            raise TopologyError(f"{where}: needs 'latency', or 'distance' and latency_per_distance_ps")
        check_band(Fraction(bandwidth), "bandwidth", data["bandwidth"])
        check_band(Fraction(latency), "time", latency, Fraction(10**12), "at most 1 s")
    except (TypeError, ValueError, OverflowError) as exc:  # a UnitError is a ValueError; Fraction(inf) overflows
        raise TopologyError(f"{where}: {exc}") from None
    return network_pb2.LinkSpec(bandwidth_bytes_per_s=bandwidth, latency_ps=latency)
