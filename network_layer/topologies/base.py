"""What every topology kind's study section builds on: the base class, a link's and a level's keys, and the
wrapping of a fabric's message into the network contract's topology."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import Field, StrictInt

from stratasim.kernel.schema import Latency, LinkBandwidth, Section
from stratasim.v1 import network_pb2

__all__ = ["SIZE_CAP", "FabricSection", "LevelSection", "LinkSection", "capped_product", "fabric_topology"]

SIZE_CAP = 1 << 63
"""Where a topology's counted size stops growing: beyond any limit a server or a study's budget sets, and small
enough that counting and printing it stay a few machine words whatever the message holds."""

_Spec = TypeVar("_Spec")


def capped_product(values: Iterable[int]) -> int:
    """The product of ``values`` (non-negative), or :data:`SIZE_CAP` when it is larger: one step per value, each on
    numbers of a few words, so a shape list of 10^6 entries costs a linear pass (the exact product would grow to
    millions of digits, each multiplication dearer than the last)."""
    product = 1
    for value in values:
        product = min(product * value, SIZE_CAP)
    return product


class FabricSection(Section):
    """A ``network.topology`` mapping whose ``kind`` names a fabric routed link by link.

    Subclasses declare ``kind`` (a ``Literal`` of the kinds they read) and their keys, and say how those
    become the network contract's topology by overriding :meth:`topology`."""

    @abstractmethod
    def topology(self) -> network_pb2.Topology:
        """The fabric as the network contract's message; :class:`~stratasim.kernel.errors.TopologyError` if impossible."""


class LinkSection(Section):
    """A link's bandwidth (bytes/s, each direction) and latency (ps)."""

    bandwidth: LinkBandwidth
    """Bandwidth of a link, each direction."""
    latency: Latency
    """Latency of a link traversal."""

    def link(self) -> network_pb2.LinkSpec:
        return network_pb2.LinkSpec(bandwidth_bytes_per_s=self.bandwidth, latency_ps=self.latency)


class LevelSection(LinkSection):
    """One level of a hierarchical fabric: ``size`` NPUs and the speed of its links."""

    size: StrictInt = Field(ge=2)
    """NPUs (or packages) at this level."""


def fabric_topology(field: str, spec: _Spec, layout: Callable[[_Spec], tuple[int, ...]]) -> network_pb2.Topology:
    """The topology whose ``fabric`` is ``field`` (a ``Topology.fabric`` name) with parameters ``spec``, its
    dimensions the family's ``layout`` for collectives (set its delay quantum and forwarding as needed)."""
    dimensions = [network_pb2.Dimension(size=size) for size in layout(spec)]
    fabric: dict[str, Any] = {field: spec}
    return network_pb2.Topology(dimensions=dimensions, **fabric)
