"""Interconnect technologies and what a topology's links and switch ports cost: DFModel's network bill.

DFModel prices a network by bandwidth: a link costs ``link_unit_price`` dollars per GB/s and a switch port
``switch_unit_price`` dollars per GB/s; each draws its ``*_unit_power`` joules per GB carried, which at full
bandwidth is watts per GB/s. Its README's example publishes 2 $/(GB/s) a link, 24 $/(GB/s) a switch port and
0.052 J/GB for both (about 6.5 pJ/bit); its design-space exploration compares PCIe Gen4 (25 GB/s) with NVLink4
(900 GB/s) links, the same unit figures applied to each one's bandwidth (:data:`LINK_TECHNOLOGIES`).

:func:`network_bill` counts a ``network.topology`` list of dimensions the way DFModel's cost model counts its
topologies (ring, switch and fully connected dimensions composed into tori, DGX boxes, dragonflies). With ``N``
NPUs and ``E`` the endpoints a dimension connects (``N`` for the innermost; for an outer dimension the groups the
inner dimensions form, ``N / (n_0 ... n_{i-1})``):

* a ring of ``n``: ``N`` links (every NPU's, as in a torus) and ``2 N / n`` switch ports;
* a switch dimension: ``E`` links and ``E`` switch ports;
* a fully connected dimension of ``n``: ``E (n - 1)`` links (each direction its own), and ``E n`` switch ports
  when it is an outer dimension (a dragonfly's global routers), none when innermost.

A system of one NPU has no network; one of up to four NPUs no switch (DFModel's two special cases). Fabrics
(``network.topology`` with a ``kind``) are not priced here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from stratasim.v1 import network_pb2

__all__ = ["DimensionBill", "LINK_TECHNOLOGIES", "LinkTechnology", "NetworkBill", "link_technology", "network_bill"]

_GB = 1e9
_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH
_FULLY_CONNECTED = network_pb2.Dimension.FULLY_CONNECTED
_NO_SWITCH_UP_TO = 4
"""DFModel prices no switch for a system of at most this many NPUs."""


@dataclass(frozen=True)
class LinkTechnology:
    """One interconnect technology: ``bandwidth`` a link's bytes/s each way (the paper's design point); what a GB/s
    of a link and of a switch port costs (``*_price_usd_per_gbps``) and draws at full use (``*_power_w_per_gbps``,
    joules per GB); ``source`` where the figures come from."""

    name: str
    bandwidth: float
    link_price_usd_per_gbps: float
    link_power_w_per_gbps: float
    switch_price_usd_per_gbps: float
    switch_power_w_per_gbps: float
    source: str


_DFMODEL_UNITS = (
    "DFModel README cost example: link 2 $/(GB/s), switch port 24 $/(GB/s), 0.052 J/GB for each (link_unit_price, "
    "switch_unit_price, link_unit_power, switch_unit_power)"
)

LINK_TECHNOLOGIES: Mapping[str, LinkTechnology] = MappingProxyType(
    {
        "pcie4": LinkTechnology("pcie4", 25 * _GB, 2.0, 0.052, 24.0, 0.052, f"DFModel: 25 GB/s; {_DFMODEL_UNITS}"),
        "nvlink4": LinkTechnology(
            "nvlink4", 900 * _GB, 2.0, 0.052, 24.0, 0.052, f"DFModel: 900 GB/s; {_DFMODEL_UNITS}"
        ),
    }
)
"""The technologies by name: ``pcie4`` (PCIe Gen4) and ``nvlink4`` (NVLink4), DFModel's two."""


def link_technology(name: str) -> LinkTechnology:
    """The technology called ``name`` (ValueError naming the known ones otherwise)."""
    found = LINK_TECHNOLOGIES.get(name)
    if found is None:
        raise ValueError(f"unknown link technology {name!r}; known: {', '.join(LINK_TECHNOLOGIES)}")
    return found


@dataclass(frozen=True)
class DimensionBill:
    """One dimension's share: its ``links`` and ``switch_ports`` (counts), each of ``bandwidth`` bytes/s; their
    ``price_usd`` and their ``power_w`` at full use."""

    links: int
    switch_ports: int
    bandwidth: float
    price_usd: float
    power_w: float


@dataclass(frozen=True)
class NetworkBill:
    """A topology's links and switch ports, one :class:`DimensionBill` per dimension, innermost first."""

    dimensions: tuple[DimensionBill, ...]

    @property
    def price_usd(self) -> float:
        """What every link and switch port costs together, in US dollars."""
        return sum(dim.price_usd for dim in self.dimensions)

    @property
    def power_w(self) -> float:
        """What every link and switch port draws together at full use, in W."""
        return sum(dim.power_w for dim in self.dimensions)


def _counts(kind: int, size: int, npus: int, endpoints: int, innermost: bool) -> tuple[int, int]:
    """The links and switch ports of one dimension of ``size`` connecting ``endpoints`` in a system of ``npus``."""
    if size <= 1:  # a dimension of one NPU connects nothing
        return 0, 0
    if kind == _RING:
        return npus, 2 * npus // size
    if kind == _SWITCH:
        return endpoints, endpoints
    if kind == _FULLY_CONNECTED:
        return endpoints * (size - 1), 0 if innermost else endpoints * size
    raise ValueError(f"a dimension of kind {kind} has no cost model (ring, switch and fully_connected have)")


def network_bill(topology: network_pb2.Topology, technologies: Sequence[LinkTechnology]) -> NetworkBill:
    """The links and switch ports of ``topology``'s dimensions, priced with ``technologies`` (one per dimension,
    innermost first) at each dimension's own bandwidth. ValueError for a fabric or a count mismatch."""
    if topology.WhichOneof("fabric") is not None:
        raise ValueError("a fabric topology has no cost model here; describe the network as a list of dimensions")
    dims = list(topology.dimensions)
    if len(technologies) != len(dims):
        raise ValueError(f"{len(technologies)} link technologies for {len(dims)} dimensions: give one per dimension")
    npus = math.prod(dim.size for dim in dims)
    bills: list[DimensionBill] = []
    endpoints = npus
    for index, (dim, tech) in enumerate(zip(dims, technologies)):
        links, ports = _counts(dim.kind, dim.size, npus, endpoints, index == 0)
        endpoints //= dim.size
        links = 0 if npus <= 1 else links
        ports = 0 if npus <= _NO_SWITCH_UP_TO else ports
        gbps = dim.bandwidth_bytes_per_s / _GB
        price = gbps * (links * tech.link_price_usd_per_gbps + ports * tech.switch_price_usd_per_gbps)
        power = gbps * (links * tech.link_power_w_per_gbps + ports * tech.switch_power_w_per_gbps)
        bills.append(DimensionBill(links, ports, dim.bandwidth_bytes_per_s, price, power))
    return NetworkBill(tuple(bills))
