"""Link names on a fabric, and the links a message crosses in one dimension.

The changes themselves — :class:`~stratasim.kernel.link_changes.LinkChange`, how names on a list of dimensions read,
:func:`~stratasim.kernel.link_changes.resolve` — live in :mod:`stratasim.kernel.link_changes`, shared with the
adapters; here is what only the network layer knows: a fabric's links by name (:class:`FabricLinkNames`: ``npu
5->npu 6`` on a torus, ``edge 0.1->aggregation 0.0`` on a fat-tree, ``aggregation 0.0`` alone for every link into and
out of that switch), and the links of a route within a dimension (:func:`dimension_links`).

Which backends read what, and how a failure reroutes, is said in ``docs/how-to/link-failures.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.kernel.link_changes import DimensionLinkNames, LinkKey, LinkNaming, nearest_hint, unknown_link
from stratasim.network_layer.link_graph import LinkGraph
from stratasim.v1 import network_pb2

__all__ = ["FabricLinkNames", "dimension_links", "link_names", "refuse_changes"]

_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH


def link_names(topology: network_pb2.Topology, fabric: LinkGraph | None) -> LinkNaming:
    """The links of ``topology`` by name: of ``fabric`` (its links, built) when given, else of its dimensions."""
    return DimensionLinkNames(topology) if fabric is None else FabricLinkNames(fabric)


def dimension_links(dims: Grid, kinds: tuple[int, ...], d: int, here: int, goal: int, step: int) -> list[LinkKey]:
    """The links a message at NPU ``here`` crosses in dimension ``d`` to reach position ``goal`` of it: on a ring
    going ``step`` (+1 or -1) round, through a switch up and down, else the direct link."""
    size, stride = dims.sizes[d], dims.stride(d)
    own = (here // stride) % size
    target = here + (goal - own) * stride
    if kinds[d] == _SWITCH:
        return [(d, here, -1), (d, -1, target)]
    if kinds[d] != _RING:
        return [(d, here, target)]
    links: list[LinkKey] = []
    position = own
    while position != goal:
        following = (position + step) % size
        links.append((d, here + (position - own) * stride, here + (following - own) * stride))
        position = following
    return links


class FabricLinkNames:
    """The links of a fabric by name: ``<node>-><node>`` with the fabric's node names."""

    def __init__(self, fabric: LinkGraph) -> None:
        self._fabric = fabric
        self._nodes: dict[str, int] = {}  # the fabric's nodes by name, once a name is read

    def name(self, key: LinkKey) -> str:
        """The link's name, as the counters give it."""
        return f"{self._fabric.name(key[0])}->{self._fabric.name(key[1])}"

    def keys(self, text: str) -> list[LinkKey]:
        """The directed link ``text`` names (both, for ``a<->b``; every link into and out of a switch, for a switch's
        name alone); :class:`TopologyError` if there is none such."""
        if "->" not in text:
            return self._switch_links(text)
        arrow = "<->" if "<->" in text else "->"
        source, _, target = (part.strip() for part in text.partition(arrow))
        nodes = self._by_name()
        a, b = nodes.get(source), nodes.get(target)
        if a is None or b is None or b not in self._fabric.out_links(a):
            raise TopologyError(unknown_link(text, self._names(), "'<node>-><node>' with the fabric's node names"))
        return [(a, b), (b, a)] if arrow == "<->" else [(a, b)]

    def nominal(self, key: LinkKey, topology: network_pb2.Topology) -> tuple[Fraction, int]:
        """The link's speed as the fabric builds it: (bandwidth in bytes/s, latency in ps)."""
        link = self._fabric.out_links(key[0])[key[1]]
        return link.bandwidth, link.latency_ps

    def _by_name(self) -> dict[str, int]:
        if not self._nodes:
            self._nodes = {self._fabric.name(node): node for node in range(self._fabric.nodes)}
        return self._nodes

    def _switch_links(self, text: str) -> list[LinkKey]:
        """Every link out of and into the switch ``text`` names: a fabric node that is no NPU."""
        fabric = self._fabric
        node = self._by_name().get(text.strip())
        if node is None or node < fabric.npus:
            raise TopologyError(self._unknown_switch(text, node is not None))
        out: list[LinkKey] = [(node, other) for other in fabric.out_links(node)]
        into: list[LinkKey] = [(link.src, node) for link in fabric.links() if link.dst == node]
        return out + into

    def _unknown_switch(self, text: str, npu: bool) -> str:
        """Why ``text`` names no switch: an NPU's name, or how switches (and links) are named and the nearest one."""
        if npu:
            return f"{text!r} is an NPU, not a switch: system.failures fails an NPU"
        fabric = self._fabric
        names = [fabric.name(node) for node in range(fabric.npus, fabric.nodes)]
        if not names:
            return f"no switch named {text!r}: this topology has no switches; a link is named '<node>-><node>'"
        return (
            f"no switch named {text!r}: switches are named by the fabric's node names, as in the report's link table "
            f"(a link: '<node>-><node>'){nearest_hint(text, names)}"
        )

    def _names(self) -> Iterator[str]:
        yield from (self.name((link.src, link.dst)) for link in self._fabric.links())


def refuse_changes(topology: network_pb2.Topology, backend: str) -> None:
    """Raise :class:`TopologyError` if ``topology`` has link changes: ``backend`` does not model them."""
    if topology.link_changes:
        raise TopologyError(
            f"link_changes: the {backend} backend does not model links of their own speed or failures; "
            "use congestion_aware (or analytical or flit_level, for speeds from the start)"
        )
