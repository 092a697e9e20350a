"""The congestion-aware network: links are shared resources and messages queue for them, first come first served.

Every dimension is built from directed links of its bandwidth and latency: a ring has a link to each
neighbour in each direction, a fully connected dimension one link per ordered pair, a switch an up-link and a
down-link per NPU. A message is routed dimension by dimension (dimension 0 first); in a ring it takes the
shorter way round (the positive direction on a tie), through a switch it goes up and down.

On each link it waits until the link is free, then holds it for its serialisation time. Forwarding is
cut-through by default — the head moves to the next link after one latency, and the message arrives one
serialisation after its head, so an uncontended path costs exactly what the analytical network charges — or
store-and-forward when the topology asks for it (each link costs latency + serialisation, as ASTRA-sim's
congestion-aware backend; with a delay quantum both are rounded down to it per link). A message always
waits for its whole body before entering the next dimension.

On a fabric (a torus, fat-tree, graph... see :mod:`network_layer.topologies`) a message crosses the links
of its route, all cut-through: each link is held from the message's start on it until its tail has passed —
one serialisation at that link's bandwidth after the start, but no sooner than the tail arrives from the
link before — and the head moves on one latency after the start. Uncontended, a message thus arrives after
the sum of its route's latencies plus one serialisation at the route's slowest link, exactly what the
analytical network charges. Store-and-forward, when asked for, works link by link as above. Switches are
non-blocking, output-queued crossbars: only links are contended for.

Conservative synchronisation: the engine promises that, after ``advance(until)``, no message will be sent
before ``until - lookahead + 1``; so link arbitration is only ever decided up to ``until - lookahead``,
never ahead of a send that could still come. Every delivery due by ``until`` must be decided by then, so the
lookahead is the least time from a message starting on any link to its arrival: the least link latency on
dimensions, the least latency of a link into an NPU on a fabric (less than the least route's latency when
routes cross switches).

When the topology asks (``record_link_busy``), every link also keeps the stretches of time it was transmitting,
for a trace: a crossing holds its link from its start to its end, back-to-back crossings make one stretch.
"""

from __future__ import annotations

import heapq
from fractions import Fraction

from network_layer import topologies
from network_layer.link_graph import LinkGraph
from network_layer.windows import window_result
from stratasim.errors import BackendError
from stratasim.topology import Grid, validate_topology
from stratasim.v1 import network_pb2

__all__ = ["CongestionAwareNetwork"]

_PS_PER_S = 10**12
_ROUTE_CACHE = 1 << 20
_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH

LinkKey = tuple[int, ...]
"""(dimension, from NPU, to NPU), -1 standing for the switch of a switch dimension; on a fabric (from node,
to node)."""


class _Hop:
    """One link of a route, with what crossing it costs."""

    __slots__ = ("link", "hold", "size", "onward", "store")

    def __init__(self, link: LinkKey, hold: int, size: int, onward: int, store: bool) -> None:
        self.link = link
        self.hold = hold  # how long pushing the message onto the link takes
        self.size = size
        self.onward = onward  # from starting on this link to the head being ready for the next one
        self.store = store  # the whole message must be across before it goes on (its tail then is its head)


class CongestionAwareNetwork:
    """Shared links with FIFO queues on Ring / FullyConnected / Switch dimensions or on a fabric."""

    name = "congestion_aware"

    def __init__(self) -> None:
        self._topology = network_pb2.Topology()
        self._grid = Grid(())
        self._fabric: LinkGraph | None = None
        self._lookahead = 1
        # (head's time at the hop, seq, message id, route, hop index, earliest delivery = send time + lookahead,
        #  time the tail is at the hop)
        self._events: list[tuple[int, int, int, tuple[_Hop, ...], int, int, int]] = []
        self._deliveries: list[tuple[int, int]] = []
        self._links: dict[LinkKey, list[int]] = {}  # link -> [free at, busy ps, bytes, messages]
        self._busy: dict[LinkKey, tuple[list[int], list[int]]] | None = None  # link -> (starts, ends), if recorded
        self._seq = 0
        self._horizon = -1
        self._routes: dict[tuple[int, int, int], tuple[_Hop, ...]] = {}

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        if topology.WhichOneof("fabric") is not None:
            self._fabric = topologies.build(topology)
            least = self._fabric.least_last_link_ps()
        else:
            validate_topology(topology)
            self._fabric = None
            latencies = [dim.latency_ps for dim in topology.dimensions if dim.size > 1]
            least = min(latencies, default=1)
        self._topology = topology
        self._grid = Grid.of(topology)
        self._busy = {} if topology.record_link_busy else None
        self._routes.clear()
        if topology.delay_quantum_ps > 0:
            least -= least % topology.delay_quantum_ps
        self._lookahead = max(1, least)
        return network_pb2.NetworkInfo(npus=self._grid.npus, lookahead_ps=self._lookahead, backend=self.name)

    def _floor(self, ps: int) -> int:
        quantum = self._topology.delay_quantum_ps
        return ps - ps % quantum if quantum > 0 else ps

    def _serialisation(self, dim: network_pb2.Dimension, size: int) -> int:
        bandwidth = Fraction(dim.bandwidth_bytes_per_s)
        return -(-(size * _PS_PER_S * bandwidth.denominator) // bandwidth.numerator)

    def _route(self, src: int, dst: int, size: int) -> tuple[_Hop, ...]:
        key = (src, dst, size)
        route = self._routes.get(key)
        if route is None:
            if len(self._routes) >= _ROUTE_CACHE:
                self._routes.clear()
            route = self._routes[key] = tuple(self._build_route(src, dst, size))
        return route

    def _build_route(self, src: int, dst: int, size: int) -> list[_Hop]:
        if self._fabric is not None:
            return self._fabric_route(self._fabric, src, dst, size)
        hops: list[_Hop] = []
        here = src
        store_and_forward = self._topology.store_and_forward
        for d, dim in enumerate(self._topology.dimensions):
            stride = self._grid.stride(d)
            own, goal = (here // stride) % dim.size, (dst // stride) % dim.size
            if own == goal:
                continue
            ser = self._serialisation(dim, size)
            hold = self._floor(ser) if store_and_forward else ser
            latency = self._floor(dim.latency_ps + ser) if store_and_forward else dim.latency_ps
            target = here + (goal - own) * stride
            if dim.kind == _RING:
                forward = (goal - own) % dim.size
                step = 1 if forward <= dim.size - forward else -1
                path = []
                position = own
                while position != goal:
                    following = (position + step) % dim.size
                    path.append((d, here + (position - own) * stride, here + (following - own) * stride))
                    position = following
            elif dim.kind == _SWITCH:
                path = [(d, here, -1), (d, -1, target)]
            else:
                path = [(d, here, target)]
            for i, link in enumerate(path):
                if store_and_forward:  # latency + serialisation on every link (already rounded)
                    hops.append(_Hop(link, hold, size, latency, store=True))
                elif i == len(path) - 1:  # the whole body must be across before the next dimension
                    hops.append(_Hop(link, hold, size, latency + hold, store=True))
                else:  # cut-through: the head moves on after one latency
                    hops.append(_Hop(link, hold, size, latency, store=False))
            here = target
        return hops

    def _fabric_route(self, fabric: LinkGraph, src: int, dst: int, size: int) -> list[_Hop]:
        """The hops of a fabric route: cut-through, or store-and-forward rounded per link as on dimensions."""
        hops = []
        for link in fabric.route(src, dst):
            key, ser = (link.src, link.dst), link.serialisation_ps(size)
            if self._topology.store_and_forward:
                hops.append(_Hop(key, self._floor(ser), size, self._floor(link.latency_ps + ser), store=True))
            else:
                hops.append(_Hop(key, ser, size, link.latency_ps, store=False))
        return hops

    def inject(self, sends: network_pb2.SendBatch) -> None:
        npus = self._grid.npus
        for msg_id, src, dst, size, sent in zip(sends.id, sends.src, sends.dst, sends.bytes, sends.send_time_ps):
            if src >= npus or dst >= npus or src == dst:
                raise BackendError(f"message {msg_id}: cannot send from NPU {src} to NPU {dst} on a network of {npus} NPUs")
            if sent <= self._horizon:
                raise BackendError(f"message {msg_id} sent at {sent} ps, before the network's committed time")
            self._seq += 1
            route = self._route(src, dst, size)
            heapq.heappush(self._events, (sent, self._seq, msg_id, route, 0, sent + self._lookahead, sent))

    def _settle(self, horizon: int) -> None:
        """Decide every link crossing that starts at or before ``horizon``."""
        events = self._events
        links = self._links
        busy = self._busy
        pop, push = heapq.heappop, heapq.heappush
        while events and events[0][0] <= horizon:
            time_ps, _, msg_id, route, index, earliest, tail = pop(events)
            hop = route[index]
            state = links.get(hop.link)
            if state is None:
                state = links[hop.link] = [0, 0, 0, 0]
            start = time_ps if time_ps > state[0] else state[0]
            end = start + hop.hold
            if end < tail:  # the body streams in no faster than the link before delivers it
                end = tail
            if busy is not None and end > start:
                _record(busy, hop.link, start, end)
            state[0] = end
            state[1] += end - start
            state[2] += hop.size
            state[3] += 1
            head = start + hop.onward
            tail = head if hop.store else end + hop.onward
            if index + 1 == len(route):
                arrival = head if hop.store else tail
                push(self._deliveries, (arrival if arrival > earliest else earliest, msg_id))
            else:
                self._seq += 1
                push(events, (head, self._seq, msg_id, route, index + 1, earliest, tail))
        self._horizon = max(self._horizon, horizon)

    def _next_arrival(self) -> int | None:
        candidates = []
        if self._deliveries:
            candidates.append(self._deliveries[0][0])
        if self._events:
            candidates.append(self._events[0][0] + self._lookahead)
        return min(candidates, default=None)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        if until_ps < 0:
            first = self._next_arrival()
            until_ps = first + self._lookahead - 1 if first is not None else self._horizon + self._lookahead
        self._settle(until_ps - self._lookahead)
        return window_result(self._deliveries, until_ps, self._next_arrival)

    def counters(self) -> network_pb2.LinkCounters:
        """Busy time, bytes and messages of every link that carried anything, in link order; when recorded, when
        each link was busy."""
        result = network_pb2.LinkCounters()
        for key, (_, busy, size, messages) in sorted(self._links.items()):
            result.link.append(self._link_name(key))
            result.busy_ps.append(busy)
            result.bytes.append(size)
            result.messages.append(messages)
        for key, (starts, ends) in sorted((self._busy or {}).items()):
            result.busy.add(link=self._link_name(key), start_ps=starts, end_ps=ends)
        return result

    def _link_name(self, key: LinkKey) -> str:
        if self._fabric is not None:
            return f"{self._fabric.name(key[0])}->{self._fabric.name(key[1])}"
        dim, source, target = key
        return f"dim {dim}: {'switch' if source < 0 else source}->{'switch' if target < 0 else target}"

    def close(self) -> None:
        self._events.clear()
        self._deliveries.clear()
        self._links.clear()
        self._busy = None


def _record(busy: dict[LinkKey, tuple[list[int], list[int]]], link: LinkKey, start: int, end: int) -> None:
    """Add ``[start, end)`` to ``link``'s busy stretches; it begins no earlier than the last one ended."""
    starts, ends = busy.setdefault(link, ([], []))
    if ends and ends[-1] == start:
        ends[-1] = end
    else:
        starts.append(start)
        ends.append(end)
