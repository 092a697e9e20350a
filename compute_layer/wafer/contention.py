"""Edge-shared DRAM and the NoC as contended resources: how long a core group's DRAM traffic takes.

PALM (section IV.C, Eqs. 2-5) treats each DRAM and each NoC link as a resource that one transfer holds at a
time, and a tile's DRAM access as Access_Time (Response_Time + size / BW_DRAM) plus the NoC time to the edge.
Here every used core moves the same ``T`` bytes (PALM's virtual tiles) to the DRAM channel at the nearer end of
its core row (:mod:`.accelerator`), along that row: dimension-order routing with nothing to correct in y. The
used cores are placed to balance the channels: first the core next to every channel, then the second core in
from every channel, and so on. With ``L`` cores on the busiest channel, fluid sharing gives::

    channel_ps = L·T / (tile DRAM bandwidth / channels per tile)
    link_ps    = (L - 1)·T / link bandwidth        (the link next to the edge carries all but the edge core)
    memory_ps  = max(channel_ps, link_ps) + Response_Time + (L - 1)·Link_Time

The stream is pipelined through the NoC into the DRAM, so the slower resource sets the rate (PALM's code uses
that minimum bandwidth); Eq. 5 adds the two times, which would charge the same bytes twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.compute_layer.wafer.accelerator import Wafer

__all__ = ["EdgeLoad", "edge_load", "layers"]

_PS_PER_SECOND = 10**12


def layers(wafer: Wafer) -> list[int]:
    """How many channels have a core at depth 0, 1, ... from their edge (depth 0 touches the channel)."""
    x, y = wafer.cores
    per_row = [(d < -(-x // 2)) + (x >= 2 and d < x // 2) for d in range(-(-x // 2))]
    return [wafer.tile_count * y * count for count in per_row]


@dataclass(frozen=True)
class EdgeLoad:
    """The busiest DRAM channel and NoC link when ``cores`` cores each move ``bytes_per_core`` bytes."""

    depth: int
    channel_ps: int
    link_ps: int
    latency_ps: int
    byte_hops: int

    @property
    def memory_ps(self) -> int:
        """The time the group's DRAM traffic takes: the slower resource plus the latencies."""
        return max(self.channel_ps, self.link_ps) + self.latency_ps


def edge_load(wafer: Wafer, cores: int, bytes_per_core: int) -> EdgeLoad:
    """The load of ``cores`` balanced cores (at most the wafer's) each moving ``bytes_per_core`` DRAM bytes."""
    if not 0 < cores <= wafer.core_count:
        raise ValueError(f"a group of {cores} cores does not fit the {wafer.core_count} of wafer {wafer.name!r}")
    depth, placed, hops = 0, 0, 0
    for layer in layers(wafer):
        here = min(layer, cores - placed)
        hops += here * depth
        placed += here
        depth += 1
        if placed == cores:
            break
    if bytes_per_core == 0:
        return EdgeLoad(depth, 0, 0, 0, 0)
    channel = depth * bytes_per_core * _PS_PER_SECOND * wafer.channels_per_tile
    link = (depth - 1) * bytes_per_core * _PS_PER_SECOND
    return EdgeLoad(
        depth=depth,
        channel_ps=-(-channel // wafer.dram_bandwidth),
        link_ps=-(-link // wafer.link_bandwidth),
        latency_ps=wafer.dram_latency_ps + (depth - 1) * wafer.link_latency_ps,
        byte_hops=hops * bytes_per_core,
    )
