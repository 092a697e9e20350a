"""A list of dimensions (ASTRA-sim's ring / fully connected / switch composition) as a graph of links.

The links are those the congestion-aware network models: along a ring a link to each neighbour each way (one
cable for a ring of two), in a fully connected dimension one link per ordered pair, and through a switch an
up-link and a down-link per NPU, here joined at one switch node per line of the dimension. Links given their own speed from the start
(``Topology.link_changes``) get it with :meth:`DimensionFabric.set_speeds`. A message travels
one dimension after the other, dimension 0 first, as on the other backends: the shorter way round a ring
(the positive direction on a tie), straight across a fully connected dimension, up and down through a switch;
around a failed link, the other way round a ring (no other dimension offers another way).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from fractions import Fraction

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.kernel.link_changes import LinkKey, no_detour
from stratasim.network_layer.link_graph import Link, LinkGraph, duplex
from stratasim.network_layer.routing import ring_step
from stratasim.v1 import network_pb2

__all__ = ["DimensionFabric", "NoWay"]

_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH


class DimensionFabric:
    """The links of a (validated) list of dimensions and the path of a message through each dimension."""

    def __init__(self, topology: network_pb2.Topology) -> None:
        self.grid = Grid.of(topology)
        self._dims = list(topology.dimensions)
        npus = self.grid.npus
        self._switches: dict[tuple[int, int], int] = {}  # (dimension, first NPU of the line) -> node
        self._dim_of: dict[tuple[int, int], int] = {}
        links: list[Link] = []
        for d, dim in enumerate(self._dims):
            if dim.size < 2:
                continue
            speed = (Fraction(dim.bandwidth_bytes_per_s), dim.latency_ps)
            for npu in range(npus):
                cables = self._cables(d, dim, npu, npus + len(self._switches))
                for a, b in cables:
                    links += duplex(a, b, speed)
                    self._dim_of[a, b] = self._dim_of[b, a] = d
        self.graph = LinkGraph(npus, npus + len(self._switches), links, self._node_name)
        self._switch_dims = {node: d for (d, _), node in self._switches.items()}

    def _cables(self, d: int, dim: network_pb2.Dimension, npu: int, next_node: int) -> list[tuple[int, int]]:
        """The cables of dimension ``d`` that NPU ``npu`` is the first end of (creating its line's switch)."""
        stride = self.grid.stride(d)
        position = self.grid.coordinate(npu, d)
        if dim.kind == _SWITCH:
            line = npu - position * stride
            switch = self._switches.setdefault((d, line), next_node)
            return [(npu, switch)]
        if dim.kind == _RING:
            if position + 1 < dim.size:
                return [(npu, npu + stride)]
            return [(npu, npu - position * stride)] if dim.size > 2 else []
        return [(npu, npu + k * stride) for k in range(1, dim.size - position)]

    def set_speeds(self, speeds: Mapping[LinkKey, tuple[Fraction, int]]) -> None:
        """Give the links ``speeds`` names (``(dimension, from NPU, to NPU)``, -1 for the switch of a switch
        dimension) their own (bandwidth in bytes/s, latency in ps)."""
        for key, (bandwidth, latency) in speeds.items():
            self.graph.set_speed(*self.nodes(key), bandwidth, latency)

    def _node(self, d: int, end: int, other: int) -> int:
        """The graph node of a link's ``end`` in dimension ``d``: the NPU, or the switch of ``other``'s line."""
        if end >= 0:
            return end
        return self._switches[d, other - self.grid.coordinate(other, d) * self.grid.stride(d)]

    def _node_name(self, node: int) -> str:
        if node < self.grid.npus:
            return f"npu {node}"
        return next(f"dim {d} switch of npu {line}" for (d, line), switch in self._switches.items() if switch == node)

    def segments(self, src: int, dst: int, failed: Collection[tuple[int, int]] = ()) -> list[list[int]]:
        """The nodes a message from ``src`` to ``dst`` visits in each dimension it travels in, in order, around the
        ``failed`` links (see :meth:`path`)."""
        segments = []
        here = src
        for d in range(len(self._dims)):
            own, goal = self.grid.coordinate(here, d), self.grid.coordinate(dst, d)
            if own != goal:
                segments.append(self.path(here, here + (goal - own) * self.grid.stride(d), failed))
                here = segments[-1][-1]
        return segments

    def path(self, here: int, target: int, failed: Collection[tuple[int, int]] = ()) -> list[int]:
        """The nodes from ``here`` (an NPU, or the switch of a switch dimension's line) to NPU ``target`` of the
        same line of one dimension: the usual way, else — when it crosses a link of ``failed`` (graph node pairs) —
        the other way round a ring; :class:`NoWay` when that is cut too, or the dimension has no other way."""
        if here >= self.grid.npus:  # a switch: straight down
            d = self._switch_dims[here]
            path = [here, target]
        else:
            d = next(
                d for d in range(len(self._dims)) if self.grid.coordinate(here, d) != self.grid.coordinate(target, d)
            )
            path = self._way(d, here, target, 0)
        blocked = [hop for hop in zip(path, path[1:]) if hop in failed]
        if not blocked:
            return path
        kind, size = self._dims[d].kind, self._dims[d].size
        if kind == _RING and size > 2 and here < self.grid.npus:
            other = self._way(d, here, target, -_path_step(self.grid, d, path))
            cut = [hop for hop in zip(other, other[1:]) if hop in failed]
            if not cut:
                return other
            blocked += cut
        raise NoWay(here, target, blocked, f"{no_detour(kind, size)} (dimension {d})")

    def _way(self, d: int, here: int, target: int, step: int) -> list[int]:
        """The nodes from NPU ``here`` to NPU ``target`` along dimension ``d``: round a ring by ``step`` (+1 or -1;
        0: the shorter way), up and down through a switch, else straight."""
        dim, stride = self._dims[d], self.grid.stride(d)
        own, goal = self.grid.coordinate(here, d), self.grid.coordinate(target, d)
        if dim.kind == _SWITCH:
            return [here, self._switches[d, here - own * stride], target]
        if dim.kind != _RING:
            return [here, target]
        step = step or ring_step(own, goal, dim.size)
        path = [here]
        while own != goal:
            following = (own + step) % dim.size
            path.append(path[-1] + (following - own) * stride)
            own = following
        return path

    def link_key(self, src: int, dst: int) -> LinkKey:
        """The link ``src`` → ``dst`` (graph nodes) as :mod:`~stratasim.network_layer.link_changes` names it."""
        npus = self.grid.npus
        return self._dim_of[src, dst], src if src < npus else -1, dst if dst < npus else -1

    def nodes(self, key: LinkKey) -> tuple[int, int]:
        """The graph nodes of the link ``key`` (``(dimension, from NPU, to NPU)``, -1 for a switch)."""
        d, source, target = key
        return self._node(d, source, target), self._node(d, target, source)

    def label(self, src: int, dst: int) -> str:
        """The link's name as the congestion-aware network gives it: ``dim 1: 5->switch``."""

        def end(node: int) -> str:
            return str(node) if node < self.grid.npus else "switch"

        return f"dim {self._dim_of[src, dst]}: {end(src)}->{end(dst)}"

    def sort_key(self, src: int, dst: int) -> tuple[int, int, int]:
        """The congestion-aware network's order of links: dimension, then ends (a switch as -1)."""
        d, source, target = self.link_key(src, dst)
        return d, source, target


class NoWay(TopologyError):
    """No way from ``here`` to ``target`` is left: the ``blocked`` links (graph node pairs) failed, and ``why``."""

    def __init__(self, here: int, target: int, blocked: list[tuple[int, int]], why: str) -> None:
        super().__init__(why)
        self.here = here
        self.target = target
        self.blocked = blocked
        self.why = why


def _path_step(grid: Grid, d: int, path: list[int]) -> int:
    """+1 or -1: the direction ``path`` (of NPUs, along ring dimension ``d``) goes round."""
    size = grid.sizes[d]
    return 1 if (grid.coordinate(path[1], d) - grid.coordinate(path[0], d)) % size == 1 else -1
