"""Fabrics beyond a list of dimensions: one module per family, each with ``check``, ``layout``, ``size`` and ``build``.

A topology message with its ``fabric`` set names the family and its parameters; :func:`build` turns it into
a :class:`~stratasim.network_layer.link_graph.LinkGraph` both backends route on, in-process or behind a server alike.
:func:`topology_of` wraps a family's message into a topology whose dimensions are the family's layout for
collectives: a torus's own dimensions, ASTRA-sim's hierarchical alltoall's two, one flat dimension otherwise.

Each module also holds the study sections of the ``network.topology`` kinds it reads (``SECTIONS``, each a
:class:`~stratasim.network_layer.topologies.base.FabricSection` whose ``kind`` names them). A new topology kind is one
module here, listed once in ``_MODULES``: its ``SECTIONS`` and, when it brings a fabric family of its own
(a ``Topology.fabric`` message of the network contract), its ``FABRIC`` name, ``check``, ``layout``, ``size``
and ``build``; a kind built on an existing family (``mesh``, ``hierarchical_torus``) needs only its section.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from types import MappingProxyType, ModuleType
from typing import Any, get_args

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.network_layer.link_graph import LinkGraph
from stratasim.network_layer.topologies.base import SIZE_CAP, FabricSection, capped_product, fabric_topology
from stratasim.network_layer.topologies.graph import from_networkx
from stratasim.v1 import network_pb2

__all__ = ["SECTIONS", "FabricSection", "build", "check", "components", "from_networkx", "size", "topology_of"]

_RING = network_pb2.Dimension.RING
_FULLY_CONNECTED = network_pb2.Dimension.FULLY_CONNECTED

_MODULES: tuple[ModuleType, ...] = tuple(
    import_module(f"{__name__}.{name}")
    for name in ("torus", "fat_tree", "dragonfly", "dgx1", "nvswitch", "hierarchical", "graph")
)
"""The topology modules, in the order their kinds are listed to users."""

_FAMILIES: MappingProxyType[str, ModuleType] = MappingProxyType(
    {module.FABRIC: module for module in _MODULES if hasattr(module, "FABRIC")}
)
"""Each ``Topology.fabric`` field, and the module of its family."""

SECTIONS: MappingProxyType[str, type[FabricSection]] = MappingProxyType(
    {
        kind: section
        for module in _MODULES
        for section in module.SECTIONS
        for kind in get_args(section.model_fields["kind"].annotation)
    }
)
"""Each ``network.topology`` kind a study may name, and its section."""


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
    return fabric_topology(field, spec, _FAMILIES[field].layout)


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


def _dimensions_size(dimensions: Sequence[network_pb2.Dimension]) -> tuple[int, int]:
    """NPUs and links of a list of dimensions: rings link each NPU twice, a fully connected dimension links every
    pair, a switch adds one switch per line and two links per NPU."""
    npus = capped_product(dim.size for dim in dimensions) if dimensions else 0
    links = 0
    for dim in dimensions:
        if dim.kind == _FULLY_CONNECTED:
            links += npus * max(dim.size - 1, 0)
        elif dim.kind == _RING:
            links += 2 * npus
        else:
            links += 2 * npus + npus // max(dim.size, 1)
        links = min(links, SIZE_CAP)
    return npus, links


def size(topology: network_pb2.Topology) -> tuple[int, int]:
    """The NPUs and the links (switches counted with them) ``topology`` describes, from its fields alone: an upper
    bound of what a backend would build, in a few integer operations whatever the numbers (each family's ``size``;
    the NPUs its dimensions lay out when they are more). A list of dimensions or a torus shape costs one pass, each
    count stopping at :data:`~stratasim.network_layer.topologies.base.SIZE_CAP`."""
    npus, links = _dimensions_size(topology.dimensions)
    field = topology.WhichOneof("fabric")
    if field is None:
        return npus, links
    fabric_npus, fabric_links = _FAMILIES[field].size(getattr(topology, field))
    return max(fabric_npus, npus), fabric_links


def components(topology: network_pb2.Topology) -> tuple[int, int]:
    """The links (each cable once, whichever ways it carries traffic) and the switches (routers included) the
    topology is built of, as failure-prone components. A fabric counts its built graph's; a list of dimensions
    counts per line of each: a ring of n, n cables (one for n = 2); a fully connected dimension, n (n - 1) / 2; a
    switch dimension, one switch and n cables."""
    if topology.WhichOneof("fabric") is not None:
        graph = build(topology)
        cables = {(min(link.src, link.dst), max(link.src, link.dst)) for link in graph.links()}
        return len(cables), graph.nodes - graph.npus
    npus = capped_product(dim.size for dim in topology.dimensions) if topology.dimensions else 0
    links = switches = 0
    for dim in topology.dimensions:
        size = max(dim.size, 1)
        lines = npus // size
        if dim.kind == _FULLY_CONNECTED:
            links += lines * size * (size - 1) // 2
        elif dim.kind == _RING:
            links += lines * (size if size > 2 else size - 1)
        else:
            links += lines * size
            switches += lines
    return links, switches
