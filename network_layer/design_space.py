"""The five topologies of DFModel's design-space exploration (Sec. VI.C) as lists of network dimensions.

DFModel connects 1,024 accelerators as a 2D torus, a 3D torus, DGX-1-like and DGX-2-like boxes joined by a switch,
and a dragonfly, every link of one technology (PCIe Gen4 or NVLink4). Each builder returns a ``network.topology``
description (innermost dimension first; every dimension's links at ``bandwidth`` bytes/s each way and
``latency_ps`` a hop), so the closed-form collectives, the event engine and the economics' network bill all read
the same thing:

- ``torus_2d``: rings of 32 x 32;
- ``torus_3d``: rings of 16 x 8 x 8 (the cube nearest 1,024 in powers of two);
- ``dgx1``: a ring of 8 (a DGX-1's hybrid cube-mesh, whose NCCL rings use one NVLink hop each) inside a box, then
  a switch of 128 boxes;
- ``dgx2``: a switch of 16 (a DGX-2's NVSwitch), then a switch of 64 boxes;
- ``dragonfly``: a fully connected group of 32, then 32 groups fully connected to one another.

The dragonfly is approximated: Kim et al.'s has one global link between each pair of groups, routed through
local links; as dimensions, every chip has a link to its counterpart in every other group, so a collective across
groups sees ``n - 1`` links per chip where the real one shares a group's few global links (the fabric in
:mod:`stratasim.network_layer.topologies.dragonfly` models those). That is also how DFModel's cost model counts a
fully connected outer dimension, so the price and power stay DFModel's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from stratasim.v1 import network_pb2

__all__ = ["DESIGN_SPACE_TOPOLOGIES", "design_space_topology", "dimensions"]

_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH
_FULLY_CONNECTED = network_pb2.Dimension.FULLY_CONNECTED

_LAYOUTS: Mapping[str, tuple[tuple[int, int], ...]] = MappingProxyType(
    {
        "torus_2d": ((_RING, 32), (_RING, 32)),
        "torus_3d": ((_RING, 16), (_RING, 8), (_RING, 8)),
        "dgx1": ((_RING, 8), (_SWITCH, 128)),
        "dgx2": ((_SWITCH, 16), (_SWITCH, 64)),
        "dragonfly": ((_FULLY_CONNECTED, 32), (_FULLY_CONNECTED, 32)),
    }
)

DESIGN_SPACE_TOPOLOGIES: tuple[str, ...] = tuple(_LAYOUTS)
"""The topologies' names, in the paper's order of Fig. 10's rows."""


def dimensions(kinds_and_sizes: Sequence[tuple[int, int]], bandwidth: float, latency_ps: int) -> network_pb2.Topology:
    """A topology of the given ``(kind, size)`` dimensions (innermost first), each at ``bandwidth`` bytes/s and
    ``latency_ps`` a hop; ValueError for a size below 2, a bandwidth that is not positive or a negative latency."""
    if not (bandwidth > 0 and math.isfinite(bandwidth)):
        raise ValueError(f"bandwidth must be a positive number of bytes/s, not {bandwidth!r}")
    if latency_ps < 0:
        raise ValueError(f"latency_ps must be at least 0, not {latency_ps!r}")
    topology = network_pb2.Topology()
    for kind, size in kinds_and_sizes:
        if size < 2:
            raise ValueError(f"a dimension needs at least 2 NPUs, not {size}")
        topology.dimensions.add(kind=kind, size=size, bandwidth_bytes_per_s=bandwidth, latency_ps=latency_ps)
    return topology


def design_space_topology(name: str, bandwidth: float, latency_ps: int = 1_000_000) -> network_pb2.Topology:
    """The design-space topology ``name`` (one of :data:`DESIGN_SPACE_TOPOLOGIES`) of 1,024 NPUs with every link at
    ``bandwidth`` bytes/s and ``latency_ps`` a hop (default 1 us); ValueError naming the known ones otherwise."""
    layout = _LAYOUTS.get(name)
    if layout is None:
        raise ValueError(f"unknown design-space topology {name!r}; known: {', '.join(DESIGN_SPACE_TOPOLOGIES)}")
    return dimensions(layout, bandwidth, latency_ps)
