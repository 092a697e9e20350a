"""Fabrics beyond a list of dimensions: one module per family, each with ``check``, ``layout`` and ``build``.

A topology message with its ``fabric`` set names the family and its parameters; :func:`build` turns it into
a :class:`~stratasim.network_layer.link_graph.LinkGraph` both backends route on, in-process or behind a server alike.
:func:`topology_of` wraps a family's message into a topology whose dimensions are the family's layout for
collectives: a torus's own dimensions, ASTRA-sim's hierarchical alltoall's two, one flat dimension otherwise.
"""

from __future__ import annotations

from types import MappingProxyType, ModuleType
from typing import Any

from stratasim.network_layer.link_graph import LinkGraph
from stratasim.network_layer.topologies import dgx1, dragonfly, fat_tree, graph, hierarchical, nvswitch, torus
from stratasim.network_layer.topologies.graph import from_networkx
from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.v1 import network_pb2

__all__ = ["build", "check", "from_networkx", "topology_of"]

_FAMILIES: MappingProxyType[str, ModuleType] = MappingProxyType({
    "torus": torus,
    "fat_tree": fat_tree,
    "dragonfly": dragonfly,
    "dgx1": dgx1,
    "nvswitch": nvswitch,
    "hierarchical_alltoall": hierarchical,
    "graph": graph,
})
"""Each ``Topology.fabric`` field, and the module of its family."""


def _family(topology: network_pb2.Topology) -> tuple[str, ModuleType, Any]:
    field = topology.WhichOneof("fabric")
    if field is None:
        raise TopologyError("topology: no fabric set")
    return field, _FAMILIES[field], getattr(topology, field)


def check(topology: network_pb2.Topology) -> None:
    """Raise :class:`TopologyError` if the fabric's parameters are impossible; its message starts with the
    offending key of the family (``k: ...``) or names the nodes (a disconnected graph)."""
    _, family, spec = _family(topology)
    family.check(spec)


def topology_of(field: str, spec: Any) -> network_pb2.Topology:
    """The topology of the family ``field`` (a ``Topology.fabric`` name) with parameters ``spec``, its
    dimensions the family's layout for collectives (set its delay quantum and forwarding as needed)."""
    sizes = _FAMILIES[field].layout(spec)
    return network_pb2.Topology(dimensions=[network_pb2.Dimension(size=size) for size in sizes], **{field: spec})


def build(topology: network_pb2.Topology) -> LinkGraph:
    """The links of the topology's fabric; :class:`TopologyError` naming ``topology.<family>`` if impossible."""
    field, family, spec = _family(topology)
    try:
        family.check(spec)
    except TopologyError as exc:
        raise TopologyError(f"topology.{field}: {exc}") from None
    sizes = [dim.size for dim in topology.dimensions]
    if not sizes or min(sizes) < 1:
        raise TopologyError(f"topology.dimensions: every dimension needs at least one NPU, got sizes {sizes}")
    links: LinkGraph = family.build(spec)
    if Grid(tuple(sizes)).npus != links.npus:
        raise TopologyError(
            f"topology.dimensions: sizes {sizes} lay out {Grid(tuple(sizes)).npus} NPUs but the {field} fabric "
            f"has {links.npus}"
        )
    return links
