"""The congestion-aware network: links are shared resources and messages queue for them, first come first served.

This module holds the network and its event loop; the routes it sends messages along — which links, at what cost,
around failed links — are planned in :mod:`stratasim.network_layer.congestion_aware_routes`, and what the links
carried is counted in :mod:`stratasim.network_layer.congestion_aware_counters`.

Every dimension is built from directed links of its bandwidth and latency: a ring has a link to each neighbour in
each direction, a fully connected dimension one link per ordered pair, a switch an up-link and a down-link per NPU;
a fabric (a torus, fat-tree, graph... see :mod:`stratasim.network_layer.topologies`) has its own links. Switches are
non-blocking, output-queued crossbars: only links are contended for.

On each link a message waits until the link is free, then holds it for its serialisation time. Forwarding is
cut-through by default: the head moves to the next link one latency after starting on a link, and the link is held
until the message's tail has passed — one serialisation after the start, but no sooner than the tail arrives from
the link before. Uncontended, a message thus arrives after the sum of its route's latencies plus one serialisation
at the route's slowest link, exactly what the analytical network charges. On dimensions a message waits for its
whole body before entering the next dimension. Store-and-forward, when the topology asks for it, costs latency +
serialisation per link (as ASTRA-sim's congestion-aware backend; with a delay quantum both rounded down to it).

Conservative synchronisation: the engine promises that, after ``advance(until)``, no message will be sent
before ``until - lookahead + 1``; so link arbitration is only ever decided up to ``until - lookahead``,
never ahead of a send that could still come. Every delivery due by ``until`` must be decided by then, so the
lookahead is the least time from a message starting on any link to its arrival: the least link latency on
dimensions, the least latency of a link into an NPU on a fabric (less than the least route's latency when
routes cross switches).

Links of their own speed and links that change at a time (``Topology.link_changes``, see
:mod:`stratasim.network_layer.link_changes`): a change at ``at`` applies to every crossing decided from ``at`` on
(a message whose head reached the link earlier crosses it at the old rate, even if it waits past ``at``). Then
routes are planned anew: every message on its way whose remaining route crosses a changed link is re-planned from
where its head is; around a failed link, a ring goes the other way round and a fabric takes the least-latency way
left. Where none is left, the run fails naming the failed link, its time and the message's ends. When a failed link
comes back (``restore``), every message on its way is re-planned from where its head is, by the usual routes.

A switch of a dimension marked ``in_network_reduction`` reduces (``SendBatch.reductions``): contributions queue on
their up-links, results on the members' down-links (see :mod:`stratasim.network_layer.congestion_aware_switch`).

A flow's messages taken off at a time (``cancel``, a failed NPU's job): crossings under way are cut there, those
queued dropped, and the other flows' crossings queued behind them decided again on the capacity freed (see
:mod:`stratasim.network_layer.congestion_aware_cancel`; its log of decided crossings is kept from the first batch
that carries flows when the topology is ``cancellable``, so a run that cannot cancel pays nothing for it).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from itertools import repeat
from typing import cast

from stratasim.kernel.contracts import LineConflict
from stratasim.kernel.errors import BackendError
from stratasim.kernel.grid import Grid, validate_topology
from stratasim.kernel.link_changes import LinkKey
from stratasim.network_layer import topologies
from stratasim.network_layer.congestion_aware_cancel import Crossing, by_link, cancel_on_links, forget
from stratasim.network_layer.congestion_aware_counters import (
    BusyStretches,
    FlowLoad,
    count_flow,
    link_counters,
    record_busy,
)
from stratasim.network_layer.congestion_aware_crossings import Event, at_time, cross
from stratasim.network_layer.congestion_aware_lines import Claims, LineSession
from stratasim.network_layer.congestion_aware_routes import Hop, RoutePlanner
from stratasim.network_layer.congestion_aware_switch import ReducingSwitches
from stratasim.network_layer.link_schedule import LinkSchedule
from stratasim.network_layer.windows import Landings
from stratasim.v1 import network_pb2

__all__ = ["CongestionAwareNetwork"]

_ROUTE_CACHE = 1 << 16


class CongestionAwareNetwork:
    """Shared links with FIFO queues on Ring / FullyConnected / Switch dimensions or on a fabric."""

    name = "congestion_aware"

    def __init__(self) -> None:
        self._grid = Grid(())
        self._lookahead = 1
        # Crossings to decide, by the time the head reaches the hop: a heap of those times, and per time the
        # crossings in the order they were created (which is the order they are decided in, ties included).
        self._times: list[int] = []
        self._events: dict[int, list[Event]] = {}
        self._deliveries = Landings()
        self._links: dict[LinkKey, list[int]] = {}  # link -> [free at, busy ps, bytes, messages, queue ps]
        self._flows: dict[int, int] = {}  # message id -> its flow, while crossing links, for flows other than 0
        self._landing: dict[int, int] = {}  # the same once its last crossing is decided (purged now and then)
        # The crossings each window decided that end after the committed time, with the latest end, for cancel; kept
        # from the first batch that carries flows (a run of one flow has nobody to give a cancelled flow's links to)
        self._log: deque[tuple[int, list[Crossing]]] | None = None
        self._cancellable = False  # whether a cancel may come (Topology.cancellable): the log above is kept then
        self._flow_load: FlowLoad = {}
        self._busy: BusyStretches | None = None  # if recorded
        self._horizon = -1
        self._routes: dict[tuple[int, int, int], tuple[Hop, ...]] = {}
        self._claims: Claims = {}  # links lock-step lines decided ahead, until when (see congestion_aware_lines)
        topology = self._topology = network_pb2.Topology()
        self._schedule = LinkSchedule(topology, None)  # links of their own speed, failed, to change
        self._next_change = self._schedule.next_ps
        self._planner = RoutePlanner(topology, self._grid, None, self._schedule, self._links)
        self._switches = ReducingSwitches(self.name, topology, self._grid)

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        fabric = None
        if topology.WhichOneof("fabric") is not None:
            fabric = topologies.build(topology)
        else:
            validate_topology(topology)
        self._topology = topology
        self._grid = Grid.of(topology)
        self._horizon = -1
        self._busy = {} if topology.record_link_busy else None
        self._cancellable = topology.cancellable
        self._routes.clear()
        self._schedule = LinkSchedule(topology, fabric)
        self._next_change = self._schedule.next_ps
        self._planner = RoutePlanner(topology, self._grid, fabric, self._schedule, self._links)
        self._switches = ReducingSwitches(self.name, topology, self._grid)
        if fabric is not None:
            least = fabric.least_last_link_ps()
        else:
            least = min((dim.latency_ps for dim in topology.dimensions if dim.size > 1), default=1)
        least = min([least, *(latency for _, latency in self._schedule.speeds.values())])
        if topology.delay_quantum_ps > 0:
            least -= least % topology.delay_quantum_ps
        self._lookahead = max(1, least)
        return network_pb2.NetworkInfo(npus=self._grid.npus, lookahead_ps=self._lookahead, backend=self.name)

    def _apply_changes(self, now: int) -> None:
        """Apply every change due by ``now`` and re-plan the rest of each route on its way that crosses a
        changed link — every route on its way, when a link came back — from the link its head has reached
        (routes planned earlier are forgotten)."""
        applied = self._planner.apply_changes(now)
        changed = {change.key for change in applied}
        restored = any(change.restore for change in applied)
        self._next_change = self._schedule.next_ps
        self._routes.clear()
        for crossings in self._events.values():
            for i, (msg_id, route, index, earliest, tail) in enumerate(crossings):
                keys = [hop[5] for hop in route[index:]]
                if restored or not changed.isdisjoint(keys):
                    crossings[i] = (msg_id, self._planner.rest(route, index, keys, restored), 0, earliest, tail)

    def inject(self, sends: network_pb2.SendBatch) -> None:
        if sends.reductions:
            sends, climbs = self._switches.climbs(sends, self._lookahead, self._route_of)
            for climb in climbs:
                if climb[4] <= self._horizon:
                    raise BackendError(f"message {climb[0]} sent at {climb[4]} ps, before the network's committed time")
                at_time(self._events, self._times, climb[4]).append(climb)
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
            if self._log is None and self._cancellable:
                self._log = deque()
        first, last = min(times), max(times)
        if first <= self._horizon:
            self._refuse(ids, srcs, dsts, times)
        keys = list(zip(srcs, dsts, sizes))
        cached = list(map(self._routes.get, keys))
        if all(cached):  # every route seen before, so every message valid: the common case, checked in one pass
            routes = cast("list[tuple[Hop, ...]]", cached)
        else:
            npus = self._grid.npus
            if max(srcs) >= npus or max(dsts) >= npus or any(map(int.__eq__, srcs, dsts)):
                self._refuse(ids, srcs, dsts, times)
            routes = self._routes_of(keys, cached)
        del keys, cached  # before the crossings are made (an all-to-all's batch holds a million)
        if first == last:  # all sent at once (a collective's step): one list
            at_time(self._events, self._times, first).extend(
                zip(ids, routes, repeat(0), repeat(first + self._lookahead), times)
            )
        else:
            earliest = [sent + self._lookahead for sent in times]
            for crossing in zip(ids, routes, repeat(0), earliest, times):
                at_time(self._events, self._times, crossing[4]).append(crossing)

    def _follow(self, ids: Sequence[int], flows: Sequence[int]) -> None:
        """Follow the messages of a flow other than 0 through the network, counting their load per link."""
        if len(flows) != len(ids):
            raise BackendError(f"a batch of {len(ids)} messages gives {len(flows)} flows; expected one per message")
        self._flows.update((msg_id, flow) for msg_id, flow in zip(ids, flows) if flow)

    def _routes_of(
        self, keys: list[tuple[int, int, int]], cached: list[tuple[Hop, ...] | None]
    ) -> list[tuple[Hop, ...]]:
        """The route of each (source, destination, size), ``cached`` or built (the cache stays bounded: a batch
        that would overflow it empties it first, routes already found staying valid, their links' state being kept;
        a batch with more new routes than the cache holds builds them without keeping them — an all-to-all sends
        each pair's route once)."""
        routes = self._routes
        missing = cached.count(None)
        if len(routes) + missing > _ROUTE_CACHE:
            routes.clear()
            self._planner.forget_fabric_hops()
        if missing > _ROUTE_CACHE:  # those cached too, built again alike (the same hops)
            return self._planner.routes(keys)
        return [found if found is not None else self._route(key) for found, key in zip(cached, keys)]

    def _route(self, key: tuple[int, int, int]) -> tuple[Hop, ...]:
        """The route of one (source, destination, size), built and cached (a batch building it twice builds
        the same hops: they are shared by every route crossing a link alike)."""
        route = self._routes[key] = self._planner.route(key)
        return route

    def _route_of(self, key: tuple[int, int, int]) -> tuple[Hop, ...]:
        """The route of a (source, destination, size), cached."""
        return self._routes.get(key) or self._route(key)

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
        log = self._log
        logged: list[Crossing] | None = None
        if log is not None:
            while log and log[0][0] <= horizon:  # no cancel can reach a window's crossings once they all ended
                log.popleft()
            logged = []
        latest = horizon
        while times and times[0] <= horizon:
            time_ps = times[0]
            if time_ps >= self._next_change:
                self._apply_changes(time_ps)
            if (
                logged is None
                and self._busy is None
                and not self._flows
                and not self._claims
                and not self._switches.climbing
            ):
                cross(time_ps, events[time_ps], events, times, self._deliveries)
            else:
                latest = self._cross_followed(time_ps, events[time_ps], horizon, logged, latest)
            heapq.heappop(times)
            del events[time_ps]
        self._horizon = max(self._horizon, horizon)
        if logged:
            assert log is not None
            log.append((latest, logged))

    def _cross_followed(
        self, time_ps: int, crossings: list[Event], horizon: int, logged: list[Crossing] | None, latest: int
    ) -> int:
        """:func:`~stratasim.network_layer.congestion_aware_crossings.cross`, also counting the flows followed, logging the crossings a cancel may reach (``logged``,
        their latest end returned), recording busy stretches and checking lines' claims on the links."""
        times, events, arriving, arrival_times = (
            self._times,
            self._events,
            self._deliveries.by_time,
            self._deliveries.times,
        )
        busy, flows, flow_load, landing, claims = self._busy, self._flows, self._flow_load, self._landing, self._claims
        for msg_id, route, index, earliest, tail in crossings:  # may grow as it goes: heads moving on at once
            state, hold, size, onward, store, link, last = route[index]
            if claims and claims.get(link, -1) >= time_ps:
                raise LineConflict(f"a message reached link {link} at {time_ps} ps, before a line decided on it")
            start = state[0]
            if time_ps > start:
                start = time_ps
            else:  # the link is busy (or just free): the message waits for it
                state[4] += start - time_ps
            if flows and msg_id in flows:
                if last:
                    of = landing[msg_id] = flows.pop(msg_id)
                else:
                    of = flows[msg_id]
                count_flow(flow_load, (link, of), size, start - time_ps)
            end = start + hold
            if end < tail:  # the body streams in no faster than the link before delivers it
                end = tail
            if logged is not None and end > horizon:  # a cancel may yet cut it, or undo it
                logged.append((end, start, time_ps, tail, msg_id, route, index, earliest))
                latest = max(latest, end)
            if busy is not None and end > start:
                record_busy(busy, link, start, end)
            state[0] = end
            state[1] += end - start
            state[2] += size
            state[3] += 1
            head = start + onward
            tail = head if store else end + onward
            if (
                msg_id in self._switches.climbing
            ):  # a contribution at its switch: held there, or its reduction's results go down
                for at, result in self._switches.arrived(msg_id, head, tail, self._route_of):
                    at_time(events, times, at).append(result)
            elif last:  # the message has arrived when its tail has
                landed = max(tail, earliest)
                arrived = arriving.setdefault(landed, [])
                if not arrived:
                    heapq.heappush(arrival_times, landed)
                arrived.append(msg_id)
            else:
                at_time(events, times, head).append((msg_id, route, index + 1, earliest, tail))
        return latest

    def _next_arrival(self) -> int | None:
        candidates = []
        if self._deliveries.times:
            candidates.append(self._deliveries.times[0])
        if self._times:
            candidates.append(self._times[0] + self._lookahead)
        return min(candidates, default=None)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        return self._deliveries.result(self._advance_to(until_ps), self._next_arrival)

    def advance_columns(self, until_ps: int) -> tuple[list[tuple[int, int]], int, int | None]:
        """:meth:`advance`, its deliveries as (time, id) (see :class:`~stratasim.kernel.contracts.ColumnarNetwork`)."""
        until_ps = self._advance_to(until_ps)
        return self._deliveries.due(until_ps), until_ps, self._next_arrival()

    def line_session(self) -> LineSession | None:
        """A session deciding lock-step lines' crossings (see :mod:`stratasim.network_layer.congestion_aware_lines`),
        or None when links change, cancels may come, flows are followed or busy stretches recorded."""
        if self._schedule.later or self._cancellable or self._flows or self._busy is not None:
            return None
        return LineSession(self._line_route, self._claims, self._lookahead)

    def _line_route(self, key: tuple[int, int, int]) -> tuple[Hop, ...]:
        """The route of one (source, destination, size), cached like an injected message's."""
        route = self._routes.get(key)
        return route if route is not None else self._routes_of([key], [None])[0]

    def line_reset(self) -> None:
        """Forget every message and crossing since ``configure``, to start the simulation over."""
        self.close()
        self.configure(self._topology)

    def _flow_of(self, msg_id: int) -> int:
        """The flow of a message on its way (0 unless followed)."""
        return self._flows.get(msg_id) or self._landing.get(msg_id, 0)

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Take every message of ``flow`` not arrived by ``at_ps`` off the links and queues (see
        :mod:`stratasim.network_layer.congestion_aware_cancel`): their links are free from ``at_ps``, and the crossings
        of other flows queued behind them are decided again on the capacity freed."""
        if not self._cancellable:
            raise BackendError(
                "congestion_aware: cancel needs a topology configured as cancellable (Topology.cancellable), so that "
                "the network records the link crossings it decides"
            )
        if at_ps <= self._horizon:
            raise BackendError(f"cancel at {at_ps} ps, before the network's committed time {self._horizon} ps")
        self._settle(at_ps - 1)  # every crossing whose head arrives before at_ps is decided: no send can change it
        flow_of, flows, landing = self._flow_of, self._flows, self._landing
        logs = by_link(self._log or ())
        dropped, undone = cancel_on_links(logs, flow_of, flow, at_ps, self._flow_load, self._busy)
        kept = [crossing for crossings in logs.values() for crossing in crossings]
        self._log = None if self._log is None else deque([(max(c[0] for c in kept), kept)] if kept else [])
        dropped.update(c[0] for crossings in self._events.values() for c in crossings if flow_of(c[0]) == flow)
        dropped.update(m for t, m in self._deliveries.items() if t > at_ps and flow_of(m) == flow)
        forget(self._events, self._times, self._deliveries, dropped | {crossing[2] for crossing in undone})
        for head, _, msg_id, route, index, earliest, tail in undone:
            if msg_id in landing:  # its last crossing is to be decided again
                flows[msg_id] = landing.pop(msg_id)
            at_time(self._events, self._times, head).append((msg_id, route, index, earliest, tail))
        for msg_id in dropped:
            flows.pop(msg_id, None)
            landing.pop(msg_id, None)
        self._settle(at_ps - 1)
        return network_pb2.CancelResult(id=sorted(dropped))

    def _advance_to(self, until_ps: int) -> int:
        """Settle every crossing the window up to ``until_ps`` decides (the next event's window when negative);
        the window's end."""
        if until_ps < 0:
            first = self._next_arrival()
            until_ps = first + self._lookahead - 1 if first is not None else self._horizon + self._lookahead
        self._settle(until_ps - self._lookahead)
        landing = self._landing
        if len(landing) > 4096 and len(landing) > 2 * self._deliveries.count() + 4096:  # forget those delivered
            self._landing = {msg_id: landing[msg_id] for _, msg_id in self._deliveries.items() if msg_id in landing}
        return until_ps

    def counters(self) -> network_pb2.LinkCounters:
        """Busy time, bytes, messages and queueing of every link that carried anything, in link order; its load by
        flow, when flows other than 0 crossed it; when recorded, when each link was busy."""
        return link_counters(self._links, self._busy, self._flow_load, self._schedule.names)

    def close(self) -> None:
        self._switches.clear()
        self._times.clear()
        self._events.clear()
        self._deliveries.clear()
        self._links.clear()
        self._flows.clear()
        self._landing.clear()
        self._log = None
        self._flow_load.clear()
        self._routes.clear()
        self._claims.clear()
        self._planner.forget()
        self._busy = None
