"""A network as a graph of directed links: NPUs and switches (or routers) as nodes, routes found on demand.

Nodes ``0 .. npus-1`` are the NPUs, the rest switches or routers. Every link has its own bandwidth (bytes/s,
held as an exact fraction) and latency (ps). A route is the list of links a message crosses from one NPU to
another; a :class:`Router` picks it (dimension order on tori, up/down on fat-trees, least latency on
arbitrary graphs...), and the graph keeps the most recently used routes in a bounded cache, so a network of
16k NPUs never holds an all-pairs table.

Every switch and router is an output-queued, non-blocking crossbar: traffic contends only for the links it
crosses (each a FIFO queue in the congestion-aware backend), never inside a switch.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from stratasim.kernel.errors import TopologyError
from stratasim.network_layer.routing import ShortestPaths
from stratasim.v1 import network_pb2

__all__ = ["Link", "LinkGraph", "Router", "duplex", "link_speed"]

_PS_PER_S = 10**12
_ROUTE_CACHE = 1 << 16


@dataclass(frozen=True, slots=True)
class Link:
    """The directed link ``src`` → ``dst`` (node ids): ``bandwidth`` bytes/s, ``latency_ps`` per traversal."""

    src: int
    dst: int
    bandwidth: Fraction
    latency_ps: int

    def serialisation_ps(self, size: int) -> int:
        """Picoseconds to push ``size`` bytes onto the link, rounded up (exact: no float on the way)."""
        return -(-(size * _PS_PER_S * self.bandwidth.denominator) // self.bandwidth.numerator)


def link_speed(spec: network_pb2.LinkSpec, where: str) -> tuple[Fraction, int]:
    """``spec`` as (exact bandwidth, latency); raise :class:`TopologyError` naming ``where`` if impossible."""
    bandwidth = spec.bandwidth_bytes_per_s
    if not (bandwidth > 0 and math.isfinite(bandwidth)):
        raise TopologyError(f"{where}.bandwidth_bytes_per_s: must be positive, got {bandwidth} B/s")
    if spec.latency_ps < 0:
        raise TopologyError(f"{where}.latency_ps: must not be negative, got {spec.latency_ps} ps")
    return Fraction(bandwidth), spec.latency_ps


def duplex(a: int, b: int, speed: tuple[Fraction, int]) -> tuple[Link, Link]:
    """A cable between ``a`` and ``b``: one link each way, both of ``speed`` (bandwidth, latency)."""
    return Link(a, b, *speed), Link(b, a, *speed)


class Router(Protocol):
    """Chooses the route of every message; must be deterministic (the same pair always gets the same path)."""

    def path(self, src: int, dst: int) -> Sequence[int]:
        """The nodes from ``src`` to ``dst``, both included, each consecutive pair joined by a link."""
        ...


class LinkGraph:
    """NPUs and switches joined by directed links; :meth:`route` finds a message's links on demand.

    ``symmetric`` claims that a message's zero-load delay depends only on the offset between its NPUs along
    the fabric's layout (a torus, say): the analytical backend then lets the engine simulate NPUs that are
    equivalent by translation once for all. ``router`` defaults to least-latency routing
    (:class:`stratasim.network_layer.routing.ShortestPaths`).
    """

    def __init__(
        self,
        npus: int,
        nodes: int,
        links: Iterable[Link],
        name: Callable[[int], str],
        router: Router | None = None,
        symmetric: bool = False,
    ) -> None:
        self.npus = npus
        self.nodes = nodes
        self.symmetric = symmetric
        self.name = name
        self._out: list[dict[int, Link]] = [{} for _ in range(nodes)]
        for link in links:
            if link.src == link.dst:
                raise TopologyError(f"a link from {name(link.src)} to itself")
            if link.dst in self._out[link.src]:
                raise TopologyError(f"two links from {name(link.src)} to {name(link.dst)}")
            self._out[link.src][link.dst] = link
        self._router: Router = router if router is not None else ShortestPaths(self)
        self._detour: ShortestPaths | None = None  # least-latency routes around failed links, once one failed
        self._routes: OrderedDict[tuple[int, int], tuple[Link, ...]] = OrderedDict()

    def out_links(self, node: int) -> Mapping[int, Link]:
        """The links leaving ``node``, by the node they lead to."""
        return self._out[node]

    def links(self) -> Iterable[Link]:
        """Every link, by source node."""
        for out in self._out:
            yield from out.values()

    def route(self, src: int, dst: int) -> tuple[Link, ...]:
        """The links a message from NPU ``src`` to NPU ``dst`` crosses, in order (cached, least recent evicted)."""
        key = (src, dst)
        cached = self._routes.get(key)
        if cached is not None:
            self._routes.move_to_end(key)
            return cached
        hops = self._along(self._router.path(src, dst))
        if isinstance(hops, tuple) and self._detour is not None:  # the router's way crosses a failed link
            hops = self._along(self._detour.path(src, dst))
        if isinstance(hops, tuple):
            here, there = hops
            raise TopologyError(
                f"no route from {self.name(src)} to {self.name(dst)}: "
                f"the route steps from {self.name(here)} to {self.name(there)} over no link"
            )
        route = self._routes[key] = tuple(hops)
        if len(self._routes) > _ROUTE_CACHE:
            self._routes.popitem(last=False)
        return route

    def _along(self, path: Sequence[int]) -> list[Link] | tuple[int, int]:
        """The links joining the nodes of ``path``, or the first two it steps between over no link."""
        hops = []
        for here, there in zip(path, path[1:]):
            link = self._out[here].get(there)
            if link is None:
                return here, there
            hops.append(link)
        return hops

    def detour(self, node: int, dst: int) -> tuple[Link, ...]:
        """The least-latency links from any ``node`` (a switch, say) to NPU ``dst`` over the links that have not
        failed; :class:`TopologyError` if none remains."""
        router = self._detour if self._detour is not None else ShortestPaths(self)
        hops = self._along(router.path(node, dst))
        assert isinstance(hops, list)  # a shortest path steps over links only
        return tuple(hops)

    def set_speed(self, src: int, dst: int, bandwidth: Fraction, latency_ps: int) -> None:
        """Give the link ``src`` → ``dst`` its own speed (routes keep their way; the graph is no longer
        symmetric)."""
        self._out[src][dst] = Link(src, dst, bandwidth, latency_ps)
        self._routes.clear()
        self.symmetric = False

    def fail(self, src: int, dst: int) -> None:
        """Remove the link ``src`` → ``dst``: routes that crossed it go around it by least latency from now on."""
        del self._out[src][dst]
        self._replan()

    def restore(self, src: int, dst: int, bandwidth: Fraction, latency_ps: int) -> None:
        """Put the failed link ``src`` → ``dst`` back, of ``bandwidth`` and ``latency_ps``: routes cross it again
        from now on."""
        self._out[src][dst] = Link(src, dst, bandwidth, latency_ps)
        self._replan()

    def _replan(self) -> None:
        """Forget the routes found so far: the links changed (least-latency searches start afresh)."""
        self._routes.clear()
        self._detour = ShortestPaths(self)
        if isinstance(self._router, ShortestPaths):  # its distances counted the links
            self._router = self._detour
        self.symmetric = False

    @property
    def routes_cached(self) -> int:
        """How many routes the cache holds now (bounded: routes are never tabulated for all pairs)."""
        return len(self._routes)

    def least_latency_ps(self) -> int:
        """A lower bound on the latency of any route between two NPUs (exact for routes of one or two links)."""
        into_npu = [min((lk.latency_ps for d, lk in out.items() if d < self.npus), default=0) for out in self._out]
        least = [
            link.latency_ps + (into_npu[link.dst] if link.dst >= self.npus else 0)
            for npu in range(self.npus)
            for link in self._out[npu].values()
        ]
        return min(least, default=0)

    def least_last_link_ps(self) -> int:
        """The least latency of a link into an NPU. Every route ends with one, so a message that has started
        on any link of its route arrives at least this long after."""
        return min((link.latency_ps for link in self.links() if link.dst < self.npus), default=0)

    def unreachable_pair(self) -> tuple[int, int, bool] | None:
        """Two NPUs ``(a, b, mutual)`` with no path from ``a`` to ``b`` (nor back, if ``mutual``), or None when
        every NPU reaches every other.

        Every NPU reaches every other exactly when NPU 0 reaches all and all reach NPU 0, so two searches do.
        """
        into: list[list[int]] = [[] for _ in range(self.nodes)]
        for link in self.links():
            into[link.dst].append(link.src)
        forward = _reached(0, lambda node: self._out[node])
        backward = _reached(0, lambda node: into[node])
        for npu in range(1, self.npus):
            if npu not in forward:
                return 0, npu, npu not in backward
            if npu not in backward:
                return npu, 0, False
        return None


def _reached(start: int, neighbours: Callable[[int], Iterable[int]]) -> set[int]:
    seen = {start}
    frontier = [start]
    while frontier:
        node = frontier.pop()
        for other in neighbours(node):
            if other not in seen:
                seen.add(other)
                frontier.append(other)
    return seen
