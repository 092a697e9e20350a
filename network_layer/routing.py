"""Deterministic routing shared by several fabrics: dimension order on tori and meshes, least latency elsewhere.

Both compute a route when it is first asked for; neither tabulates all pairs.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import TYPE_CHECKING

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid

if TYPE_CHECKING:
    from stratasim.network_layer.link_graph import LinkGraph

__all__ = ["DimensionOrder", "ShortestPaths", "ring_step"]

_TREES_CACHED = 32


def ring_step(own: int, goal: int, size: int) -> int:
    """+1 or -1: the direction of the shorter way round a ring of ``size`` from ``own`` to ``goal`` (+1 on a
    tie, as the dimension-list congestion-aware network does)."""
    forward = (goal - own) % size
    return 1 if forward <= size - forward else -1


class DimensionOrder:
    """Dimension-order routing on a torus or mesh laid out as ``grid`` (NPU ids vary fastest in dimension 0).

    A message corrects its coordinate in dimension 0 first, then 1, and so on. On a torus it goes the
    shorter way round each ring (the positive direction on a tie); on a mesh straight towards the goal.
    """

    def __init__(self, grid: Grid, wrap: bool) -> None:
        self._grid = grid
        self._wrap = wrap

    def path(self, src: int, dst: int) -> list[int]:
        path = [src]
        here = src
        for dim, size in enumerate(self._grid.sizes):
            stride = self._grid.stride(dim)
            own, goal = (here // stride) % size, (dst // stride) % size
            if own == goal:
                continue
            step = ring_step(own, goal, size) if self._wrap else (1 if goal > own else -1)
            while own != goal:
                following = (own + step) % size
                here += (following - own) * stride
                path.append(here)
                own = following
        return path


class ShortestPaths:
    """Least-latency routes on any graph, found on demand.

    A route minimises its total latency, then its number of links; among routes equal in both it steps, at
    every node, to the neighbour with the lowest node id (NPUs before switches, each in their given order).
    Asked for a route to a destination it has not seen lately, it runs one Dijkstra search backwards from that
    destination (O(links log nodes)) and keeps the distances of the last few destinations.
    """

    def __init__(self, graph: LinkGraph) -> None:
        self._graph = graph
        self._into: list[list[tuple[int, int]]] | None = None  # node -> [(from node, latency ps)]
        self._costs: OrderedDict[int, dict[int, int]] = OrderedDict()
        self._scale = graph.nodes + 1  # cost = latency * scale + links: one integer that orders both

    def path(self, src: int, dst: int) -> list[int]:
        costs = self._costs_to(dst)
        if src not in costs:
            raise TopologyError(f"no route from {self._graph.name(src)} to {self._graph.name(dst)}")
        path = [src]
        here = src
        while here != dst:
            remaining = costs[here]
            out = self._graph.out_links(here)
            here = min(
                node for node, link in out.items() if costs.get(node) == remaining - link.latency_ps * self._scale - 1
            )
            path.append(here)
        return path

    def _costs_to(self, dst: int) -> dict[int, int]:
        cached = self._costs.get(dst)
        if cached is not None:
            self._costs.move_to_end(dst)
            return cached
        if self._into is None:
            self._into = [[] for _ in range(self._graph.nodes)]
            for link in self._graph.links():
                self._into[link.dst].append((link.src, link.latency_ps))
        costs = {dst: 0}
        queue = [(0, dst)]
        while queue:
            cost, node = heapq.heappop(queue)
            if cost > costs[node]:
                continue
            for source, latency in self._into[node]:
                through = cost + latency * self._scale + 1
                if through < costs.get(source, through + 1):
                    costs[source] = through
                    heapq.heappush(queue, (through, source))
        self._costs[dst] = costs
        if len(self._costs) > _TREES_CACHED:
            self._costs.popitem(last=False)
        return costs
