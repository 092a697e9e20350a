"""The flit-level network's links as they change (``Topology.link_changes``): new speeds, failures and links that
come back, each at its time, and the ways messages take around the links down.

A change at ``at`` is applied once every arbitration before ``at`` is decided. A new bandwidth applies to the link's
slots from the first one starting at or after ``at`` (the flit under way ends at the old rate). A failure applies to
every packet whose head has not crossed the link by ``at``: each such packet on its way is rerouted from the router
its head is at — on a fabric by its router's way if that avoids the links down, else by the least-latency way left;
on a list of dimensions the other way round a ring — and a packet whose head has crossed drains through it (its
body follows its head, as wormhole flow control requires). Where no way is left, the run fails naming the failed
links, their time and the ends. A link that comes back (``restore``) carries from ``at`` on: every packet on its way
whose head has not yet reached its destination takes its router's usual way from where its head is, as do messages
sent later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction

from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.kernel.link_changes import LinkKey
from stratasim.network_layer.flit_level.dimensions import DimensionFabric, NoWay
from stratasim.network_layer.flit_level.engine import FlitEngine
from stratasim.network_layer.flit_level.packets import Message
from stratasim.network_layer.flit_level.router import OutputPort, Route
from stratasim.network_layer.link_graph import Link, LinkGraph
from stratasim.network_layer.link_schedule import LinkSchedule
from stratasim.v1 import network_pb2

__all__ = ["LiveLinks"]

Nodes = tuple[int, int]
"""A link as the graph nodes it joins (a port's key)."""


class LiveLinks:
    """The link changes of ``topology`` on ``graph`` — a fabric's, or ``dimensions``' on a list of dimensions —,
    those from the start applied: the ways messages take now, and each later change applied when it is due."""

    def __init__(self, topology: network_pb2.Topology, graph: LinkGraph, dimensions: DimensionFabric | None) -> None:
        self._topology = topology
        self._graph = graph
        self._dimensions = dimensions
        built = list(graph.links())
        self.schedule = LinkSchedule(topology, graph if dimensions is None else None)
        if dimensions is not None:
            dimensions.set_speeds(self.schedule.speeds)
        self.links: list[Link] = [graph.out_links(link.src).get(link.dst, link) for link in built]
        """Every link of the network at its speed from the start, those failed from the start included."""
        self.failed: set[Nodes] = {self.nodes(key) for key in self.schedule.failed}
        """The links down now."""

    @property
    def next_ps(self) -> int:
        """When the next change comes (a time beyond any run when none does)."""
        return self.schedule.next_ps

    def later_rates(self) -> list[tuple[Nodes, Fraction]]:
        """The bandwidths links take later on (bytes/s), each with its link."""
        return [(self.nodes(c.key), c.bandwidth) for c in self.schedule.later if c.bandwidth is not None]

    def nodes(self, key: LinkKey) -> Nodes:
        """The graph nodes the link ``key`` joins."""
        return (key[0], key[1]) if self._dimensions is None else self._dimensions.nodes(key)

    def segments(self, src: int, dst: int) -> list[list[int]]:
        """The nodes of each segment a message from NPU ``src`` to NPU ``dst`` travels now, around the links down."""
        if self._dimensions is None:
            return [self.path(src, dst)]
        try:
            return self._dimensions.segments(src, dst, self.failed)
        except NoWay as exc:
            raise self._no_way(exc) from None

    def path(self, here: int, target: int) -> list[int]:
        """The nodes from ``here`` (an NPU or a switch) to NPU ``target`` — within one dimension on a list of them —
        around the links down; a :class:`BackendError` naming them when no way is left."""
        dimensions, graph = self._dimensions, self._graph
        try:
            if dimensions is not None:
                return dimensions.path(here, target, self.failed)
            links = graph.route(here, target) if here < graph.npus else graph.detour(here, target)
        except NoWay as exc:
            raise self._no_way(exc) from None
        except TopologyError:
            if not self.schedule.failed:
                raise
            ends = (graph.name(here), graph.name(target))
            raise self.schedule.no_route(ends, list(self.schedule.failed), "no way is left") from None
        return [here, *(link.dst for link in links)]

    def apply(
        self,
        now: int,
        engine: FlitEngine,
        ports: dict[Nodes, OutputPort],
        messages: Iterable[Message],
        segment: Callable[[Sequence[int]], Route],
    ) -> None:
        """Apply every change due by ``now`` (every arbitration before it decided): new rates on their ports, and
        the packets on their way rerouted around links that failed, or by the usual ways when one came back.
        ``segment`` makes a route of a path's nodes."""
        applied = self.schedule.apply_due(now)
        failed = set()
        for change in applied:
            nodes = self.nodes(change.key)
            if change.fail:
                failed.add(nodes)
                self.failed.add(nodes)
                continue
            self.failed.discard(nodes)
            engine.set_rate(ports[nodes], self._bandwidth(change.key, nodes), now)
        restored = any(change.restore for change in applied)
        if failed or restored:
            for message in messages:
                self._reroute(message, failed, restored, engine, segment, now)

    def _reroute(
        self,
        message: Message,
        failed: set[Nodes],
        restored: bool,
        engine: FlitEngine,
        segment: Callable[[Sequence[int]], Route],
        now: int,
    ) -> None:
        """Reroute the packets of ``message`` whose head has not crossed a link of ``failed`` but would (every
        packet on its way, when a link was ``restored``), and the segments it has still to start."""
        rerouted: dict[tuple[Route, int], Route] = {}
        for packet in message.packets:
            route, hop = packet.route, packet.crossed
            if hop == route.hops or not (restored or _crosses(route.ports[hop:], failed)):
                continue
            new = rerouted.get((route, hop))
            if new is None:
                crossed = [route.ports[0].src, *(port.dst for port in route.ports[:hop])]
                rest = self.path(crossed[-1], route.ports[-1].dst)
                new = rerouted[route, hop] = segment(crossed + rest[1:])
            engine.reroute(packet, new, now)
        later = message.segments[message.segment + 1 :]
        if later and (restored or any(_crosses(route.ports, failed) for route in later)):
            ways = (segment(self.path(route.ports[0].src, route.ports[-1].dst)) for route in later)
            message.segments = (*message.segments[: message.segment + 1], *ways)

    def _bandwidth(self, key: LinkKey, nodes: Nodes) -> Fraction:
        """The link's bandwidth now (bytes/s)."""
        if self._dimensions is None:
            return self._graph.out_links(nodes[0])[nodes[1]].bandwidth
        speed = self.schedule.speeds.get(key)
        return speed[0] if speed else self.schedule.names.nominal(key, self._topology)[0]

    def _no_way(self, exc: NoWay) -> BackendError:
        """The error of a message left no way on a list of dimensions (named as the congestion-aware network
        names them)."""
        assert self._dimensions is not None
        dimensions, npus = self._dimensions, self._graph.npus
        ends = tuple(f"NPU {node}" if node < npus else self._graph.name(node) for node in (exc.here, exc.target))
        blocked = [dimensions.link_key(*hop) for hop in exc.blocked]
        return self.schedule.no_route((ends[0], ends[1]), blocked, exc.why)


def _crosses(ports: Sequence[OutputPort], links: set[Nodes]) -> bool:
    """Whether one of ``ports`` is the port of a link of ``links``."""
    return any((port.src, port.dst) in links for port in ports)
