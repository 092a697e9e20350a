"""Arbitrary graphs: named nodes and directed links, each with its own bandwidth and latency.

Nodes ``0 .. npus-1`` are the NPUs, the rest switches or routers (non-blocking, output-queued crossbars:
messages contend only for links). NPUs forward traffic that is not theirs, as chips of a DEAP-style
accelerator graph do. Routes are least-latency paths with stated tie-breaking
(:class:`stratasim.network_layer.routing.ShortestPaths`). The study file's ``kind: graph`` and :func:`from_networkx`
both produce the :class:`~stratasim.v1.network_pb2.GraphFabric` read here.
"""

from __future__ import annotations

from typing import Any

from stratasim.network_layer.link_graph import Link, LinkGraph, link_speed
from stratasim.kernel.errors import TopologyError
from stratasim.kernel.units import parse_bandwidth, parse_time_ps
from stratasim.v1 import network_pb2

__all__ = ["check", "build", "layout", "from_networkx"]


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
    except (TypeError, ValueError) as exc:  # a UnitError is a ValueError
        raise TopologyError(f"{where}: {exc}") from None
    return network_pb2.LinkSpec(bandwidth_bytes_per_s=bandwidth, latency_ps=latency)
