"""The congestion-aware network's routes: the hops a message crosses, each holding its link's state, planned anew
when links change.

A route is a tuple of hops (:data:`Hop`). Each hop holds its link's state — the list [free at, busy ps, bytes,
messages, queue ps] the event loop updates — and what crossing the link costs, so that deciding a crossing needs no
look-up. A hop is shared by every route that crosses its link alike (an all-to-all builds a route per pair, and
routes share links): on dimensions through one table per (dimension, message size), on a fabric through a table of
the hops described so far.

On dimensions a message goes dimension by dimension (dimension 0 first): in a ring the shorter way round (the
positive direction on a tie), through a switch up and down, in a fully connected dimension over the direct link.
On a fabric (see :mod:`stratasim.network_layer.topologies`) it takes the fabric router's way.

What a crossing costs: cut-through by default — the head moves to the next link one latency after starting on a
link, and the body follows one serialisation behind, so that a message waits for its whole body only before
entering the next dimension — or store-and-forward when the topology asks for it (each link costs latency +
serialisation, both rounded down to the delay quantum per link, as ASTRA-sim's congestion-aware backend).

Failed links (see :mod:`stratasim.network_layer.link_schedule`): around one, a ring goes the other way round and a
fabric takes the least-latency way left; where none is left, planning fails naming the failed links, their time
and the message's ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from itertools import groupby
from operator import itemgetter

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.kernel.link_changes import LinkChange, LinkKey, no_detour
from stratasim.network_layer.link_changes import dimension_links
from stratasim.network_layer.link_graph import Link, LinkGraph
from stratasim.network_layer.link_schedule import LinkSchedule
from stratasim.network_layer.routing import ring_step
from stratasim.v1 import network_pb2

__all__ = ["Hop", "HopSpec", "RoutePlanner"]

_PS_PER_S = 10**12
_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH

Hop = tuple[list[int], int, int, int, bool, LinkKey, bool]
"""One link of a route, with what crossing it costs: (the link's state — [free at, busy ps, bytes, messages, queue
ps] —, how long pushing the message onto it takes, the message's size, the time from starting on it to the head
being ready for the next link, whether the whole message must be across before it goes on — its tail then is its
head —, the link, whether it is the route's last). A tuple, not an object: the event loop unpacks it once per
crossing."""

HopSpec = tuple[LinkKey, int, int, int, bool]
"""A hop as a route is planned: its link and what crossing it costs (the fields of :data:`Hop` after the state)."""

_Costs = tuple[int, int, int, bool]
"""What crossing a link costs: the fields of a :data:`HopSpec` after the link."""


class RoutePlanner:
    """The routes of ``topology`` (laid out as ``grid``, on ``fabric`` when it has one) at the link speeds
    ``schedule`` gives now, as hops holding the link states of ``links`` (made there on first use)."""

    def __init__(
        self,
        topology: network_pb2.Topology,
        grid: Grid,
        fabric: LinkGraph | None,
        schedule: LinkSchedule,
        links: dict[LinkKey, list[int]],
    ) -> None:
        self._topology = topology
        self._grid = grid
        self._fabric = fabric
        self._schedule = schedule
        self._links = links
        # Per dimension: (kind, size, bandwidth in bytes/s, latency in ps, stride of NPU ids), read once
        self._dims: list[tuple[int, int, Fraction, int, int]] = [
            (dim.kind, dim.size, Fraction(dim.bandwidth_bytes_per_s), dim.latency_ps, grid.stride(d))
            for d, dim in enumerate(topology.dimensions)
        ]
        self._kinds = tuple(dim.kind for dim in topology.dimensions)
        self._hops: dict[tuple[HopSpec, bool], Hop] = {}  # shared by the routes
        self._tables: dict[tuple[int, int], _DimensionHops] = {}  # the hops of (dimension, size), by link

    def route(self, key: tuple[int, int, int]) -> tuple[Hop, ...]:
        """The route of one (source, destination, size)."""
        if self._fabric is None:
            return self._grid_route(*key)
        src, dst, size = key
        return self._hops_of(self._fabric_hops(self._fabric_links(self._fabric, src, dst), size))

    def routes(self, keys: Sequence[tuple[int, int, int]]) -> list[tuple[Hop, ...]]:
        """The route of each (source, destination, size), as :meth:`route` gives it; through a lone switch (one
        dimension of more than one NPU, a switch, no failed link) found by NPU: up from the source, down to the
        destination, not planned one by one (an all-to-all has a million)."""
        lone = [d for d, dim in enumerate(self._dims) if dim[1] > 1]
        if self._fabric is not None or self._schedule.failed or len(lone) != 1 or self._kinds[lone[0]] != _SWITCH:
            return list(map(self.route, keys))
        d = lone[0]
        routes: list[tuple[Hop, ...]] = []
        for size, group in groupby(keys, key=itemgetter(2)):  # one size, a batch at a time
            table = self._tables.get((d, size))
            if table is None:
                table = self._tables[(d, size)] = self._dimension_hops(d, size)
            ups = [table.hop((d, npu, -1), 0) for npu in range(self._grid.npus)]
            downs = [table.hop((d, -1, npu), 2) for npu in range(self._grid.npus)]
            routes += [(ups[src], downs[dst]) for src, dst, _ in group]
        return routes

    def rest(self, route: tuple[Hop, ...], index: int, keys: list[LinkKey], reroute: bool) -> tuple[Hop, ...]:
        """The rest of ``route`` from its hop ``index`` (crossing the links ``keys``), planned anew: the router's
        way when ``reroute`` (a link came back) or a link of it failed, else the same way at the links' speeds now."""
        size, dst, fabric = route[index][2], keys[-1][-1], self._fabric
        if fabric is None:  # from the NPU the head is at (before the switch, when it is at one)
            here = keys[0][1] if keys[0][1] >= 0 else route[index - 1][5][1]
            rest = self.route((here, dst, size))
            return rest if keys[0][1] >= 0 else rest[1:]
        if not reroute and self._schedule.failed.keys().isdisjoint(keys):
            return self._hops_of(self._fabric_hops([fabric.out_links(a)[b] for a, b in keys], size))
        return self._hops_of(self._fabric_hops(self._fabric_links(fabric, keys[0][0], dst), size))

    def apply_changes(self, now: int) -> list[LinkChange]:
        """Apply every link change due by ``now`` and forget the hops planned before; the changes applied."""
        applied = self._schedule.apply_due(now)
        self.forget()
        return applied

    def forget_fabric_hops(self) -> None:
        """Forget the fabric hops shared so far (routes holding them stay valid: they hold the links' state)."""
        self._hops.clear()

    def forget(self) -> None:
        """Forget every hop planned so far."""
        self._hops.clear()
        self._tables.clear()

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

    def _grid_route(self, src: int, dst: int, size: int) -> tuple[Hop, ...]:
        """The hops of a message from ``src`` to ``dst`` on the dimensions, dimension 0 first."""
        segments = self._segments(src, dst)
        tables = self._tables
        hops: list[Hop] = []
        final = len(segments) - 1
        for i, (d, links) in enumerate(segments):
            table = tables.get((d, size))
            if table is None:
                table = tables[(d, size)] = self._dimension_hops(d, size)
            table.add(hops, links, i == final)
        return tuple(hops)

    def _segments(self, src: int, dst: int) -> list[tuple[int, Sequence[LinkKey]]]:
        """The links a message from ``src`` to ``dst`` crosses in each dimension it moves along, dimension 0 first:
        through a switch up and down, over a fully connected dimension's direct link, the shorter way round a ring
        (the other way round a failed link)."""
        segments: list[tuple[int, Sequence[LinkKey]]] = []
        here = src
        failed = self._schedule.failed
        for d, (kind, dim_size, _, _, stride) in enumerate(self._dims):
            own, goal = (here // stride) % dim_size, (dst // stride) % dim_size
            if own == goal:
                continue
            target = here + (goal - own) * stride
            links: Sequence[LinkKey]
            if kind == _SWITCH and not failed:
                links = ((d, here, -1), (d, -1, target))
            elif kind != _RING and not failed:
                links = ((d, here, target),)
            else:
                step = ring_step(own, goal, dim_size)
                ring = dimension_links(self._grid, self._kinds, d, here, goal, step)
                links = self._around(d, here, goal, step, ring, dst) if failed else ring
            segments.append((d, links))
            here = target
        return segments

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
        raise self._schedule.no_route(
            (f"NPU {here}", f"NPU {dst}"), blocked, f"{no_detour(kind, size)} (dimension {d})"
        )

    def _dimension_hops(self, d: int, size: int) -> _DimensionHops:
        """The hops of dimension ``d`` for messages of ``size`` bytes, links of their own speed included."""
        speeds = self._schedule.speeds.items()
        own = {key: self._crossing_costs(d, size, speed) for key, speed in speeds if key[0] == d}
        return _DimensionHops(self._links, *self._crossing_costs(d, size), own)

    def _crossing_costs(self, d: int, size: int, speed: tuple[Fraction, int] | None = None) -> tuple[_Costs, _Costs]:
        """What crossing a link of dimension ``d`` (of ``speed``, if its own) costs a message of ``size`` bytes:
        inside the dimension, and on its last link (the whole body must be across before the next dimension)."""
        bandwidth, dim_latency = speed or self._dims[d][2:4]
        ser = -(-(size * _PS_PER_S * bandwidth.denominator) // bandwidth.numerator)
        if self._topology.store_and_forward:  # latency + serialisation on every link (already rounded)
            sf = (self._floor(ser), size, self._floor(dim_latency + ser), True)
            return sf, sf
        return (ser, size, dim_latency, False), (ser, size, dim_latency + ser, True)

    def _fabric_hops(self, links: Sequence[Link], size: int) -> list[HopSpec]:
        """The hops of a fabric route: cut-through, or store-and-forward rounded per link as on dimensions."""
        hops: list[HopSpec] = []
        for link in links:
            key, ser = (link.src, link.dst), link.serialisation_ps(size)
            if self._topology.store_and_forward:
                hops.append((key, self._floor(ser), size, self._floor(link.latency_ps + ser), True))
            else:
                hops.append((key, ser, size, link.latency_ps, False))
        return hops

    def _hops_of(self, specs: list[HopSpec]) -> tuple[Hop, ...]:
        """The hops ``specs`` describe, shared with every route that crosses a link alike."""
        known = self._hops
        last = len(specs) - 1
        hops = []
        for i, spec in enumerate(specs):
            hop = known.get((spec, i == last))
            hops.append(hop if hop is not None else self._hop(spec, i == last))
        return tuple(hops)

    def _hop(self, spec: HopSpec, last: bool) -> Hop:
        """The hop ``spec`` describes, holding its link's state so that crossing it needs no look-up; one object
        for every route that crosses the link alike."""
        link, hold, size, onward, store = spec
        hop = self._hops[(spec, last)] = (_state(self._links, link), hold, size, onward, store, link, last)
        return hop


class _DimensionHops:
    """The hops of one dimension for one message size, by link, made on first use and shared by every route:
    inside the dimension, on its last link, and on its last link when that ends the route."""

    __slots__ = ("_links", "_middle", "_end", "_own", "_by_role")

    def __init__(
        self,
        links: dict[LinkKey, list[int]],
        middle: _Costs,
        end: _Costs,
        own: dict[LinkKey, tuple[_Costs, _Costs]],
    ) -> None:
        self._links = links
        self._middle = middle
        self._end = end
        self._own = own  # (middle, end) of the links of their own speed
        self._by_role: tuple[dict[LinkKey, Hop], dict[LinkKey, Hop], dict[LinkKey, Hop]] = ({}, {}, {})

    def add(self, hops: list[Hop], links: Sequence[LinkKey], final: bool) -> None:
        """Add to ``hops`` those of ``links``, the dimension's way: inside it, then on its last link (the route's
        last, when ``final``)."""
        middle = self._by_role[0]
        for link in links[:-1]:
            hop = middle.get(link)
            hops.append(hop if hop is not None else self._make(0, link))
        hops.append(self.hop(links[-1], 2 if final else 1))

    def hop(self, link: LinkKey, role: int) -> Hop:
        """The hop of ``link`` in ``role``: 0 inside the dimension, 1 its last link, 2 the route's last."""
        hop = self._by_role[role].get(link)
        return hop if hop is not None else self._make(role, link)

    def _make(self, role: int, link: LinkKey) -> Hop:
        middle, end = self._own.get(link, (self._middle, self._end))
        hold, size, onward, store = middle if role == 0 else end
        hop = self._by_role[role][link] = (_state(self._links, link), hold, size, onward, store, link, role == 2)
        return hop


def _state(links: dict[LinkKey, list[int]], link: LinkKey) -> list[int]:
    """``link``'s state in ``links`` — [free at, busy ps, bytes, messages, queue ps] —, made idle on first use."""
    state = links.get(link)
    if state is None:
        state = links[link] = [0, 0, 0, 0, 0]
    return state
