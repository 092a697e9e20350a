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

On a fabric (a torus, fat-tree, graph... see :mod:`stratasim.network_layer.topologies`) a message crosses the links
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

Counters. Every link counts its busy time, bytes and messages, and the time messages waited for it: from the head
reaching the link to the link being free (``queue_ps``; zero for a message that found it free). When sends carry a
flow (``SendBatch.flow``, the sending NPU's job), each link also counts its load by flow; only messages of a flow
other than 0 are followed (by id, while in flight), flow 0's share being the rest of the link's, so a single-flow
run pays nothing for it.

Links of their own speed and links that change at a time (``Topology.link_changes``, see
:mod:`stratasim.network_layer.link_changes`): a change at ``at`` applies to every crossing decided from ``at`` on
(a message whose head reached the link earlier crosses it at the old rate, even if it waits past ``at``). Then
routes are planned anew: every message on its way whose remaining route crosses a changed link is re-planned from
where its head is; around a failed link, a ring goes the other way round and a fabric takes the least-latency way
left. Where none is left, the run fails naming the failed link, its time and the message's ends.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from fractions import Fraction
from itertools import repeat
from typing import cast

from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.kernel.grid import Grid, validate_topology
from stratasim.network_layer import topologies
from stratasim.network_layer.flow_load import add_flow_rows
from stratasim.network_layer.link_changes import LinkKey, dimension_links
from stratasim.network_layer.link_graph import Link, LinkGraph
from stratasim.network_layer.link_schedule import LinkSchedule
from stratasim.network_layer.routing import ring_step
from stratasim.network_layer.windows import due_arrivals, window_result
from stratasim.v1 import network_pb2

__all__ = ["CongestionAwareNetwork"]

_PS_PER_S = 10**12
_ROUTE_CACHE = 1 << 16
_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH
_NO_DETOUR: dict[int, str] = {
    _RING: "the ring is cut both ways round",
    _SWITCH: "a switch dimension has one way up and one way down per NPU",
    network_pb2.Dimension.FULLY_CONNECTED: "a fully connected dimension sends over the direct link only",
}


_Hop = tuple[list[int], int, int, int, bool, LinkKey, bool]
"""One link of a route, with what crossing it costs: (the link's state — [free at, busy ps, bytes, messages, queue
ps] —,
how long pushing the message onto it takes, the message's size, the time from starting on it to the head being
ready for the next link, whether the whole message must be across before it goes on — its tail then is its
head —, the link, whether it is the route's last). A tuple, not an object: the event loop unpacks it once per
crossing."""

_HopSpec = tuple[LinkKey, int, int, int, bool]
"""A hop as a route is planned: its link and what crossing it costs (the fields of :data:`_Hop` after the state)."""

_Event = tuple[int, tuple[_Hop, ...], int, int, int]
"""A crossing to decide: (message id, route, hop index, earliest delivery = send time + lookahead, time the tail
is at the hop)."""


class CongestionAwareNetwork:
    """Shared links with FIFO queues on Ring / FullyConnected / Switch dimensions or on a fabric."""

    name = "congestion_aware"

    def __init__(self) -> None:
        self._topology = network_pb2.Topology()
        self._grid = Grid(())
        # Per dimension: (kind, size, bandwidth in bytes/s, latency in ps, stride of NPU ids), read once
        self._dims: list[tuple[int, int, Fraction, int, int]] = []
        self._kinds: tuple[int, ...] = ()
        self._fabric: LinkGraph | None = None
        self._lookahead = 1
        # Crossings to decide, by the time the head reaches the hop: a heap of those times, and per time the
        # crossings in the order they were created (which is the order they are decided in, ties included).
        self._times: list[int] = []
        self._events: dict[int, list[_Event]] = {}
        self._deliveries: list[tuple[int, int]] = []
        self._links: dict[LinkKey, list[int]] = {}  # link -> [free at, busy ps, bytes, messages, queue ps]
        self._flows: dict[int, int] = {}  # message id -> its flow, while in flight, for flows other than 0
        self._flow_load: dict[tuple[LinkKey, int], list[int]] = {}  # (link, flow) -> [bytes, messages, queue ps]
        self._busy: dict[LinkKey, tuple[list[int], list[int]]] | None = None  # link -> (starts, ends), if recorded
        self._horizon = -1
        self._routes: dict[tuple[int, int, int], tuple[_Hop, ...]] = {}
        self._hops: dict[tuple[_HopSpec, bool], _Hop] = {}  # shared by the routes
        self._tables: dict[tuple[int, int], _DimensionHops] = {}  # the hops of (dimension, size), by link
        self._schedule = LinkSchedule(self._topology, None)  # links of their own speed, failed, to change
        self._next_change = self._schedule.next_ps

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
        self._dims = [
            (dim.kind, dim.size, Fraction(dim.bandwidth_bytes_per_s), dim.latency_ps, self._grid.stride(d))
            for d, dim in enumerate(topology.dimensions)
        ]
        self._kinds = tuple(dim.kind for dim in topology.dimensions)
        self._busy = {} if topology.record_link_busy else None
        self._routes.clear()
        self._hops.clear()
        self._tables.clear()
        self._schedule = LinkSchedule(topology, self._fabric)
        self._next_change = self._schedule.next_ps
        if self._fabric is not None:
            least = self._fabric.least_last_link_ps()
        least = min([least, *(latency for _, latency in self._schedule.speeds.values())])
        if topology.delay_quantum_ps > 0:
            least -= least % topology.delay_quantum_ps
        self._lookahead = max(1, least)
        return network_pb2.NetworkInfo(npus=self._grid.npus, lookahead_ps=self._lookahead, backend=self.name)

    def _apply_changes(self, now: int) -> None:
        """Apply every change due by ``now`` and re-plan the rest of each route on its way that crosses a
        changed link (from the link its head has reached; routes planned earlier are forgotten)."""
        changed = self._schedule.apply_due(now)
        self._next_change = self._schedule.next_ps
        self._routes.clear()
        self._hops.clear()
        self._tables.clear()
        for crossings in self._events.values():
            for i, (msg_id, route, index, earliest, tail) in enumerate(crossings):
                keys = [hop[5] for hop in route[index:]]
                if not changed.isdisjoint(keys):
                    crossings[i] = (msg_id, self._rest(route, index, keys), 0, earliest, tail)

    def _rest(self, route: tuple[_Hop, ...], index: int, keys: list[LinkKey]) -> tuple[_Hop, ...]:
        """The rest of ``route`` from its hop ``index`` (crossing the links ``keys``), planned anew."""
        size, dst, fabric = route[index][2], keys[-1][-1], self._fabric
        if fabric is None:  # from the NPU the head is at (before the switch, when it is at one)
            here = keys[0][1] if keys[0][1] >= 0 else route[index - 1][5][1]
            rest = self._route_unkept((here, dst, size))
            return rest if keys[0][1] >= 0 else rest[1:]
        if self._schedule.failed.keys().isdisjoint(keys):  # the same way, at the links' speeds now
            return self._hops_of(self._fabric_hops([fabric.out_links(a)[b] for a, b in keys], size))
        return self._hops_of(self._fabric_hops(self._fabric_links(fabric, keys[0][0], dst), size))

    def _fabric_links(self, fabric: LinkGraph, node: int, dst: int) -> tuple[Link, ...]:
        """The links from ``node`` to NPU ``dst`` (the router's way, else around failed links); a
        :class:`BackendError` naming the failed links when none is left."""
        try:
            return fabric.route(node, dst) if node < fabric.npus else fabric.detour(node, dst)
        except TopologyError:
            if not self._schedule.failed:
                raise
            failed = list(self._schedule.failed)
            raise self._schedule.no_route((fabric.name(node), fabric.name(dst)), failed, "no way is left") from None

    def _floor(self, ps: int) -> int:
        quantum = self._topology.delay_quantum_ps
        return ps - ps % quantum if quantum > 0 else ps

    def _grid_route(self, src: int, dst: int, size: int) -> tuple[_Hop, ...]:
        """The hops of a message from ``src`` to ``dst`` on the dimensions, dimension 0 first."""
        hops: list[_Hop] = []
        here = src
        tables = self._tables
        table = None
        for d, (_, dim_size, _, _, stride) in enumerate(self._dims):
            own, goal = (here // stride) % dim_size, (dst // stride) % dim_size
            if own == goal:
                continue
            table = tables.get((d, size))
            if table is None:
                table = tables[(d, size)] = self._dimension_hops(d, size)
            step = ring_step(own, goal, dim_size)
            links = dimension_links(self._grid, self._kinds, d, here, goal, step)
            if self._schedule.failed:
                links = self._around(d, here, goal, step, links, dst)
            hops += map(table.middle, links[:-1])
            hops.append(table.end(links[-1]))
            here = links[-1][2]
        assert table is not None  # source and destination differ
        hops[-1] = table.last(hops[-1][5])
        return tuple(hops)

    def _around(self, d: int, here: int, goal: int, step: int, links: list[LinkKey], dst: int) -> list[LinkKey]:
        """``links`` (of dimension ``d``, from NPU ``here`` to position ``goal``, ``step`` round a ring) when none
        failed, else the other way round a ring; a :class:`BackendError` when that is cut too, or the dimension has
        no other way."""
        failed = self._schedule.failed
        blocked = [link for link in links if link in failed]
        if not blocked:
            return links
        kind, size = self._dims[d][0], self._dims[d][1]
        if kind == _RING and size > 2:
            other = dimension_links(self._grid, self._kinds, d, here, goal, -step)
            cut = [link for link in other if link in failed]
            if not cut:
                return other
            blocked += cut
        why = "a ring of 2 NPUs has one link each way" if kind == _RING and size == 2 else _NO_DETOUR[kind]
        raise self._schedule.no_route((f"NPU {here}", f"NPU {dst}"), blocked, f"{why} (dimension {d})")

    def _dimension_hops(self, d: int, size: int) -> _DimensionHops:
        """The hops of dimension ``d`` for messages of ``size`` bytes, links of their own speed included."""
        speeds = self._schedule.speeds.items()
        own = {key: self._crossing_costs(d, size, speed) for key, speed in speeds if key[0] == d}
        return _DimensionHops(self._links, *self._crossing_costs(d, size), own)

    def _crossing_costs(
        self, d: int, size: int, speed: tuple[Fraction, int] | None = None
    ) -> tuple[tuple[int, int, int, bool], tuple[int, int, int, bool]]:
        """What crossing a link of dimension ``d`` (of ``speed``, if its own) costs a message of ``size`` bytes, as
        the fields of a :data:`_HopSpec` after the link: inside the dimension, and on its last link (the whole body
        must be across before the next dimension)."""
        bandwidth, dim_latency = speed or self._dims[d][2:4]
        ser = -(-(size * _PS_PER_S * bandwidth.denominator) // bandwidth.numerator)
        if self._topology.store_and_forward:  # latency + serialisation on every link (already rounded)
            sf = (self._floor(ser), size, self._floor(dim_latency + ser), True)
            return sf, sf
        return (ser, size, dim_latency, False), (ser, size, dim_latency + ser, True)

    def _fabric_hops(self, links: Sequence[Link], size: int) -> list[_HopSpec]:
        """The hops of a fabric route: cut-through, or store-and-forward rounded per link as on dimensions."""
        hops: list[_HopSpec] = []
        for link in links:
            key, ser = (link.src, link.dst), link.serialisation_ps(size)
            if self._topology.store_and_forward:
                hops.append((key, self._floor(ser), size, self._floor(link.latency_ps + ser), True))
            else:
                hops.append((key, ser, size, link.latency_ps, False))
        return hops

    def _hop(self, spec: _HopSpec, last: bool) -> _Hop:
        """The hop ``spec`` describes, holding its link's state so that crossing it needs no look-up; one object
        for every route that crosses the link alike (all-to-all builds a route per pair, and routes share links)."""
        link, hold, size, onward, store = spec
        state = self._links.get(link)
        if state is None:
            state = self._links[link] = [0, 0, 0, 0, 0]
        hop = self._hops[(spec, last)] = (state, hold, size, onward, store, link, last)
        return hop

    def inject(self, sends: network_pb2.SendBatch) -> None:
        # Slices, the quickest way to lists of the columns
        self.inject_columns(
            sends.id[:], sends.src[:], sends.dst[:], sends.bytes[:], sends.send_time_ps[:], sends.flow[:]
        )

    def inject_columns(
        self,
        ids: Sequence[int],
        srcs: Sequence[int],
        dsts: Sequence[int],
        sizes: Sequence[int],
        times: Sequence[int],
        flows: Sequence[int] = (),
    ) -> None:
        """:meth:`inject` of the messages the columns describe (see :class:`~stratasim.kernel.contracts.ColumnarNetwork`)."""
        if not ids:
            return
        if flows:
            self._follow(ids, flows)
        first, last = min(times), max(times)
        if first <= self._horizon:
            self._refuse(ids, srcs, dsts, times)
        keys = list(zip(srcs, dsts, sizes))
        cached = list(map(self._routes.get, keys))
        if all(cached):  # every route seen before, so every message valid: the common case, checked in one pass
            routes = cast("list[tuple[_Hop, ...]]", cached)
        else:
            npus = self._grid.npus
            if max(srcs) >= npus or max(dsts) >= npus or any(map(int.__eq__, srcs, dsts)):
                self._refuse(ids, srcs, dsts, times)
            routes = self._routes_of(keys, cached)
        del keys, cached  # before the crossings are made (an all-to-all's batch holds a million)
        if first == last:  # all sent at once (a collective's step): one list
            _at(self._events, self._times, first).extend(
                zip(ids, routes, repeat(0), repeat(first + self._lookahead), times)
            )
        else:
            earliest = [sent + self._lookahead for sent in times]
            for crossing in zip(ids, routes, repeat(0), earliest, times):
                _at(self._events, self._times, crossing[4]).append(crossing)

    def _follow(self, ids: Sequence[int], flows: Sequence[int]) -> None:
        """Follow the messages of a flow other than 0 through the network, counting their load per link."""
        if len(flows) != len(ids):
            raise BackendError(f"a batch of {len(ids)} messages gives {len(flows)} flows; expected one per message")
        self._flows.update((msg_id, flow) for msg_id, flow in zip(ids, flows) if flow)

    def _routes_of(
        self, keys: list[tuple[int, int, int]], cached: list[tuple[_Hop, ...] | None]
    ) -> list[tuple[_Hop, ...]]:
        """The route of each (source, destination, size), ``cached`` or built (the cache stays bounded: a batch
        that would overflow it empties it first, routes already found staying valid, their links' state being kept;
        a batch with more new routes than the cache holds builds them without keeping them — an all-to-all sends
        each pair's route once)."""
        routes = self._routes
        missing = cached.count(None)
        if len(routes) + missing > _ROUTE_CACHE:
            routes.clear()
            self._hops.clear()
        route = self._route if missing <= _ROUTE_CACHE else self._route_unkept
        return [found if found is not None else route(key) for found, key in zip(cached, keys)]

    def _route(self, key: tuple[int, int, int]) -> tuple[_Hop, ...]:
        """The route of one (source, destination, size), built and cached (a batch building it twice builds
        the same hops: they are shared by every route crossing a link alike)."""
        route = self._routes[key] = self._route_unkept(key)
        return route

    def _route_unkept(self, key: tuple[int, int, int]) -> tuple[_Hop, ...]:
        """The route of one (source, destination, size), built and not cached."""
        if self._fabric is None:
            return self._grid_route(*key)
        src, dst, size = key
        return self._hops_of(self._fabric_hops(self._fabric_links(self._fabric, src, dst), size))

    def _hops_of(self, specs: list[_HopSpec]) -> tuple[_Hop, ...]:
        """The hops ``specs`` describe, shared with every route that crosses a link alike."""
        known = self._hops
        last = len(specs) - 1
        hops = []
        for i, spec in enumerate(specs):
            hop = known.get((spec, i == last))
            hops.append(hop if hop is not None else self._hop(spec, i == last))
        return tuple(hops)

    def _refuse(self, ids: Sequence[int], srcs: Sequence[int], dsts: Sequence[int], times: Sequence[int]) -> None:
        """Raise the error of the first message of a batch that cannot be sent."""
        npus = self._grid.npus
        for msg_id, src, dst, sent in zip(ids, srcs, dsts, times):
            if src >= npus or dst >= npus or src == dst:
                raise BackendError(
                    f"message {msg_id}: cannot send from NPU {src} to NPU {dst} on a network of {npus} NPUs"
                )
            if sent <= self._horizon:
                raise BackendError(f"message {msg_id} sent at {sent} ps, before the network's committed time")

    def _settle(self, horizon: int) -> None:
        """Decide every link crossing that starts at or before ``horizon``, in the order the heads get there."""
        times, events = self._times, self._events
        busy, flows, flow_load = self._busy, self._flows, self._flow_load
        arrivals: list[tuple[int, int]] = []
        while times and times[0] <= horizon:
            time_ps = times[0]
            if time_ps >= self._next_change:
                self._apply_changes(time_ps)
            crossings = events[time_ps]
            for msg_id, route, index, earliest, tail in crossings:  # may grow as it goes: heads moving on at once
                state, hold, size, onward, store, link, last = route[index]
                start = state[0]
                if time_ps > start:
                    start = time_ps
                else:  # the link is busy (or just free): the message waits for it
                    state[4] += start - time_ps
                if flows and msg_id in flows:
                    _count_flow(flow_load, (link, flows.pop(msg_id) if last else flows[msg_id]), size, start - time_ps)
                end = start + hold
                if end < tail:  # the body streams in no faster than the link before delivers it
                    end = tail
                if busy is not None and end > start:
                    _record(busy, link, start, end)
                state[0] = end
                state[1] += end - start
                state[2] += size
                state[3] += 1
                head = start + onward
                tail = head if store else end + onward
                if last:  # the message has arrived when its tail has
                    arrivals.append((tail if tail > earliest else earliest, msg_id))
                else:
                    following = events.get(head)
                    if following is None:
                        following = events[head] = []
                        heapq.heappush(times, head)
                    following.append((msg_id, route, index + 1, earliest, tail))
            heapq.heappop(times)
            del events[time_ps]
        _into_heap(self._deliveries, arrivals)
        self._horizon = max(self._horizon, horizon)

    def _next_arrival(self) -> int | None:
        candidates = []
        if self._deliveries:
            candidates.append(self._deliveries[0][0])
        if self._times:
            candidates.append(self._times[0] + self._lookahead)
        return min(candidates, default=None)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        return window_result(self._deliveries, self._advance_to(until_ps), self._next_arrival)

    def advance_columns(self, until_ps: int) -> tuple[list[tuple[int, int]], int, int | None]:
        """:meth:`advance`, its deliveries as (time, id) (see :class:`~stratasim.kernel.contracts.ColumnarNetwork`)."""
        until_ps = self._advance_to(until_ps)
        return due_arrivals(self._deliveries, until_ps), until_ps, self._next_arrival()

    def _advance_to(self, until_ps: int) -> int:
        """Settle every crossing the window up to ``until_ps`` decides (the next event's window when negative);
        the window's end."""
        if until_ps < 0:
            first = self._next_arrival()
            until_ps = first + self._lookahead - 1 if first is not None else self._horizon + self._lookahead
        self._settle(until_ps - self._lookahead)
        return until_ps

    def counters(self) -> network_pb2.LinkCounters:
        """Busy time, bytes and messages of every link that carried anything, in link order; when recorded, when
        each link was busy."""
        result = network_pb2.LinkCounters()
        crossed = [(key, state) for key, state in sorted(self._links.items()) if state[3]]  # not only routed
        for key, (_, busy, size, messages, queue) in crossed:
            result.link.append(self._link_name(key))
            result.busy_ps.append(busy)
            result.bytes.append(size)
            result.messages.append(messages)
            result.queue_ps.append(queue)
        for key, (starts, ends) in sorted((self._busy or {}).items()):
            result.busy.add(link=self._link_name(key), start_ps=starts, end_ps=ends)
        if self._flow_load:
            followed: dict[LinkKey, dict[int, list[int]]] = {key: {} for key, _ in crossed}
            for (key, flow), load in self._flow_load.items():
                followed[key][flow] = load
            add_flow_rows(result, [(state[2], state[3], state[4]) for _, state in crossed], list(followed.values()))
        return result

    def _link_name(self, key: LinkKey) -> str:
        return self._schedule.names.name(key)

    def close(self) -> None:
        self._times.clear()
        self._events.clear()
        self._deliveries.clear()
        self._links.clear()
        self._flows.clear()
        self._flow_load.clear()
        self._routes.clear()
        self._hops.clear()
        self._tables.clear()
        self._busy = None


class _DimensionHops:
    """The hops of one dimension for one message size, by link, made on first use and shared by every route:
    inside the dimension, on its last link, and on its last link when that ends the route."""

    __slots__ = ("_links", "_middle", "_end", "_own", "_by_role")

    def __init__(
        self,
        links: dict[LinkKey, list[int]],
        middle: tuple[int, int, int, bool],
        end: tuple[int, int, int, bool],
        own: dict[LinkKey, tuple[tuple[int, int, int, bool], tuple[int, int, int, bool]]],
    ) -> None:
        self._links = links
        self._middle = middle
        self._end = end
        self._own = own  # (middle, end) of the links of their own speed
        self._by_role: tuple[dict[LinkKey, _Hop], dict[LinkKey, _Hop], dict[LinkKey, _Hop]] = ({}, {}, {})

    def middle(self, link: LinkKey) -> _Hop:
        hop = self._by_role[0].get(link)
        return hop if hop is not None else self._make(0, link)

    def end(self, link: LinkKey) -> _Hop:
        hop = self._by_role[1].get(link)
        return hop if hop is not None else self._make(1, link)

    def last(self, link: LinkKey) -> _Hop:
        hop = self._by_role[2].get(link)
        return hop if hop is not None else self._make(2, link)

    def _make(self, role: int, link: LinkKey) -> _Hop:
        state = self._links.get(link)
        if state is None:
            state = self._links[link] = [0, 0, 0, 0, 0]
        middle, end = self._own.get(link, (self._middle, self._end))
        hold, size, onward, store = middle if role == 0 else end
        hop = self._by_role[role][link] = (state, hold, size, onward, store, link, role == 2)
        return hop


def _count_flow(
    flow_load: dict[tuple[LinkKey, int], list[int]], key: tuple[LinkKey, int], size: int, waited: int
) -> None:
    """Count one crossing of a message of a flow other than 0: ``key`` is (link, flow)."""
    load = flow_load.get(key)
    if load is None:
        load = flow_load[key] = [0, 0, 0]
    load[0] += size
    load[1] += 1
    load[2] += waited


def _record(busy: dict[LinkKey, tuple[list[int], list[int]]], link: LinkKey, start: int, end: int) -> None:
    """Add ``[start, end)`` to ``link``'s busy stretches; it begins no earlier than the last one ended."""
    starts, ends = busy.setdefault(link, ([], []))
    if ends and ends[-1] == start:
        ends[-1] = end
    else:
        starts.append(start)
        ends.append(end)


def _at(events: dict[int, list[_Event]], times: list[int], time_ps: int) -> list[_Event]:
    """The crossings to decide at ``time_ps``, a new list (its time pushed on the heap ``times``) if none yet."""
    crossings = events.get(time_ps)
    if crossings is None:
        crossings = events[time_ps] = []
        heapq.heappush(times, time_ps)
    return crossings


def _into_heap(heap: list[tuple[int, int]], items: list[tuple[int, int]]) -> None:
    """Add ``items`` to ``heap``: pushed one by one when few, else appended and the whole heapified (cheaper); to
    an empty heap, sorted (a sorted list is a heap, and a collective step's arrivals come nearly in order)."""
    if not heap:
        items.sort()
        heap += items
    elif len(items) < len(heap):
        for item in items:
            heapq.heappush(heap, item)
    else:
        heap += items
        heapq.heapify(heap)
