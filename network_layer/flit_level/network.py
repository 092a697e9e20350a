"""The flit-level network backend: the contract of :class:`~stratasim.kernel.contracts.NetworkBackend` around
:class:`~stratasim.network_layer.flit_level.engine.FlitEngine`.

It runs on every topology the other backends do: a fabric's :class:`~stratasim.network_layer.link_graph.LinkGraph` and
its routes (dimension order on tori, up/down on fat-trees, minimal on the dragonfly, least latency on graphs),
or a list of dimensions built as links by :mod:`stratasim.network_layer.flit_level.dimensions`. Every node is a router.

Zero-load time. A lone message of ``F`` flits (see :mod:`stratasim.network_layer.flit_level.packets`) over a route of
``h`` links, all of flit time ``k = flit_bytes / bandwidth``, latencies ``L_i``, with a pipeline of
``P = pipeline_cycles * cycle_ps`` in each of the ``h + 1`` routers it passes (source and destination
included) takes::

    sum(L_i) + (h + 1) * P + (h - 1 + F) * k + w

where ``w`` comes from link slots starting on whole picoseconds: zero when latencies, pipeline and send time
fall on slot starts, else within one slot per link, ``-h < w < sum(ceil(k_i) + 1)`` (the head waits less than
a slot for each link to be free, a slot lasts ``k`` rounded down or up, and a body flit may slip one slot
per link; the argument is spelled out in ``tests/network_layer/test_flit_level.py``). The analytical
network charges
``sum(L_i) + size / bandwidth``; the difference is the routers' pipelines, the head flit being received
whole before it goes on at each of the ``h - 1`` routers between links (``(h - 1) * k``), the packets'
headers and last-flit padding (``F * k - size / bandwidth``) and ``w``. With links of different speeds the
slowest link's flit time takes the place of ``k`` in ``F * k`` and every other link adds its own flit time
once. On a list of dimensions each dimension is such a route of its own and the NPU between two dimensions
takes the whole message in before sending it on.

Time windows. A flit's last link is decided at least ``lookahead = least (flit time + latency) of a link
into an NPU + P`` before the message is delivered, and a message sent at ``t`` competes for no slot before
``t + P``; so ``advance(until)`` decides every slot up to ``until - lookahead`` — no later send can change
those — and knows every delivery up to ``until``.

Links of their own speed from the start (``Topology.link_changes``) are built at that speed, the routes unchanged;
changes at a time, failures and links that come back are applied at their time as
:mod:`stratasim.network_layer.flit_level.live_links` says (rerouted packets take the virtual channel classes of
their new way; a detour is not proved free of deadlock, and one that locks up ends the run saying so).

The topology's ``delay_quantum_ps`` and ``store_and_forward`` describe how coarser networks round and
forward whole messages; this one always forwards flit by flit and keeps exact picoseconds, so it ignores
both.

Counters. Besides each link's busy time, bytes and messages (a message counts on every link its first packet of a
segment crosses), ``counters()`` gives the same by flow once messages of a flow other than 0 crossed links
(:mod:`stratasim.network_layer.flow_load`; no queueing: flits wait for slots and credits, which is not measured), the
latency of every packet delivered (:mod:`stratasim.network_layer.packet_latency`) and, when the topology asks
(``record_link_busy``), when each link was transmitting: a flit holds its link for its slot, and back-to-back slots
make one stretch.

Cancelling a flow (``cancel``, a failed NPU's job): its messages' flits leave every buffer and network interface at
the cancel's time, freeing buffers, virtual channels and links at once, and none of them is delivered
(:mod:`stratasim.network_layer.flit_level.cancel`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from itertools import repeat
from typing import NoReturn

from stratasim.kernel.errors import BackendError, SimulationError
from stratasim.kernel.grid import validate_topology
from stratasim.kernel.switch_reduction import refuse_switch_reduction
from stratasim.network_layer import topologies
from stratasim.network_layer.flit_level import deadlock
from stratasim.network_layer.flit_level.cancel import drop_flits
from stratasim.network_layer.flit_level.dimensions import DimensionFabric
from stratasim.network_layer.flit_level.engine import FlitEngine
from stratasim.network_layer.flit_level.live_links import LiveLinks
from stratasim.network_layer.flit_level.packets import Message, packet_payloads
from stratasim.network_layer.flit_level.parameters import FlitParameters
from stratasim.network_layer.flit_level.router import OutputPort, Route
from stratasim.network_layer.flow_load import add_flow_rows
from stratasim.network_layer.link_graph import Link, LinkGraph
from stratasim.network_layer.packet_latency import PacketLatency
from stratasim.network_layer.windows import window_result
from stratasim.v1 import network_pb2

__all__ = ["FlitLevelNetwork"]

_ROUTE_CACHE = 1 << 16
MAX_PACKETS = 1 << 24
"""Packets a flit-level network holds at once by default: each is a few hundred bytes of Python objects while it is
in the network, so this bounds a session to some 4 GiB whatever the sizes it is sent (a study's own budget,
:mod:`stratasim.study.budget`, refuses such a run before it starts; this protects a server from its clients)."""


class FlitLevelNetwork:
    """Packets cut into flits, input-buffered virtual-channel routers, credit flow control, deadlock-free
    routing. ``parameters`` default to :class:`FlitParameters`' defaults (the registry builds it without)."""

    name = "flit_level"

    def __init__(self, parameters: FlitParameters | None = None, max_packets: int = MAX_PACKETS) -> None:
        self.parameters = parameters if parameters is not None else FlitParameters()
        self.max_packets = max_packets
        self._packets: dict[int, int] = {}  # message id → its packets, while it is in the network
        self._messages: dict[int, Message] = {}  # every message on its way, by id
        self._held = 0
        self._engine = FlitEngine(self.parameters)
        self._ports: dict[tuple[int, int], OutputPort] = {}
        self._live = LiveLinks(
            network_pb2.Topology(), LinkGraph(0, 0, [], str), DimensionFabric(network_pb2.Topology())
        )
        self._label: Callable[[int, int], str] = lambda src, dst: ""
        self._order: Callable[[int, int], tuple[int, ...]] = lambda src, dst: (src, dst)
        self._classes: deadlock.VcClasses = deadlock.OneClass()
        self._ranges: list[tuple[int, int]] = []
        self._routes: dict[tuple[int, int], tuple[Route, ...]] = {}
        self._npus = 0
        self._lookahead = 1
        self._horizon = -1
        self._in_flight = 0

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        if topology.HasField("flit"):
            self.parameters = _with_topology_parameters(self.parameters, topology.flit)
            self._engine = FlitEngine(self.parameters)
        vcs = self.parameters.vcs
        if topology.WhichOneof("fabric") is not None:
            graph = topologies.build(topology)
            self._live = LiveLinks(topology, graph, None)  # speeds from the start set on the graph's links
            self._label = lambda src, dst: f"{graph.name(src)}->{graph.name(dst)}"
            self._order = lambda src, dst: (src, dst)
            self._classes = deadlock.for_fabric(topology, graph, vcs)
        else:
            validate_topology(topology)
            dimensions = DimensionFabric(topology)
            graph = dimensions.graph
            self._live = LiveLinks(topology, graph, dimensions)
            self._label = dimensions.label
            self._order = dimensions.sort_key
            self._classes = deadlock.for_dimensions(topology)
        self._ranges = deadlock.vc_ranges(self._classes.classes, vcs)
        self._ports = self._build_ports(self._live.links, graph.name)
        if topology.record_link_busy:
            for port in self._ports.values():
                port.spans = []
        self._npus = graph.npus
        self._lookahead = self._least_delay()
        self._engine = FlitEngine(self.parameters)
        self._routes.clear()
        self._horizon = -1
        self._in_flight = 0
        self._packets.clear()
        self._messages.clear()
        self._held = 0
        return network_pb2.NetworkInfo(npus=self._npus, lookahead_ps=self._lookahead, backend=self.name)

    def _least_delay(self) -> int:
        """The lookahead: the least flit time and latency of a link into an NPU, at any speed it takes, plus a
        router's pipeline."""
        into_npus = [port.least_flit_ps + port.latency_ps for port in self._ports.values() if port.dst < self._npus]
        for nodes, bandwidth in self._live.later_rates():
            port = self._ports[nodes]
            flit_ps = port.flit_bytes * 10**12 // bandwidth
            if flit_ps < 1:
                self._too_fast(port.src, port.dst, bandwidth, self._label)
            if port.dst < self._npus:
                into_npus.append(int(flit_ps) + port.latency_ps)
        return max(1, min(into_npus, default=0) + self.parameters.pipeline_ps)

    def _too_fast(self, src: int, dst: int, bandwidth: Fraction, name: Callable[[int, int], str]) -> NoReturn:
        raise BackendError(
            f"flit_level.flit_bytes: a flit of {self.parameters.flit_bytes} bytes takes less than 1 ps on the "
            f"link {name(src, dst)} of {float(bandwidth):g} B/s"
        )

    def _build_ports(self, links: list[Link], name: Callable[[int], str]) -> dict[tuple[int, int], OutputPort]:
        """A port per link, its buffers' credits filled; a link too fast for one flit per ps is refused."""
        parameters = self.parameters
        ports = {}
        for link in links:
            port = OutputPort(
                link.src, link.dst, link.bandwidth, link.latency_ps, parameters.flit_bytes, parameters.vcs
            )
            if port.least_flit_ps < 1:
                self._too_fast(link.src, link.dst, link.bandwidth, lambda a, b: f"{name(a)}->{name(b)}")
            depth = parameters.buffer_flits
            if not depth:  # the credit round trip: two latencies, a pipeline and a few flits of slack
                depth = -(-(2 * link.latency_ps + parameters.pipeline_ps + 2) * port.den // port.num) + 3
            port.fill(depth)
            ports[link.src, link.dst] = port
        return ports

    def _route(self, src: int, dst: int) -> tuple[Route, ...]:
        key = (src, dst)
        route = self._routes.get(key)
        if route is None:
            if len(self._routes) >= _ROUTE_CACHE:
                self._routes.clear()
            route = self._routes[key] = tuple(self._segment(path) for path in self._live.segments(src, dst))
        return route

    def _segment(self, path: Sequence[int]) -> Route:
        ports = tuple(self._ports[here, there] for here, there in zip(path, path[1:]))
        return Route(ports, tuple(self._ranges[c] for c in self._classes.of(path)))

    def inject(self, sends: network_pb2.SendBatch) -> None:
        npus = self._npus
        refuse_switch_reduction(self.name, sends)
        if sends.flow and len(sends.flow) != len(sends.id):
            raise BackendError(
                f"a batch of {len(sends.id)} messages gives {len(sends.flow)} flows; expected one per message"
            )
        flows = sends.flow if sends.flow else repeat(0)
        for msg_id, src, dst, size, sent, flow in zip(
            sends.id, sends.src, sends.dst, sends.bytes, sends.send_time_ps, flows
        ):
            if src >= npus or dst >= npus or src == dst:
                raise BackendError(
                    f"message {msg_id}: cannot send from NPU {src} to NPU {dst} on a network of {npus} NPUs"
                )
            if sent <= self._horizon:
                raise BackendError(f"message {msg_id} sent at {sent} ps, before the network's committed time")
            self._hold(msg_id, size)
            message = Message(msg_id, sent, packet_payloads(size, self.parameters), self._route(src, dst), flow)
            self._engine.start(message, sent)
            self._messages[msg_id] = message
            self._in_flight += 1

    def _hold(self, msg_id: int, size: int) -> None:
        """Count the packets of a message about to enter the network, refusing one that would take the network
        past :attr:`max_packets` (checked before a single packet is made)."""
        packets = max(1, -(-size // self.parameters.payload_bytes))
        if self._held + packets > self.max_packets:
            raise BackendError(
                f"message {msg_id}: {size} bytes make {packets:,} packets of {self.parameters.payload_bytes} bytes, "
                f"and the flit-level network holds at most {self.max_packets:,} packets at once ({self._held:,} in "
                "it already); send fewer bytes, larger packets (flit_bytes, packet_flits), or use the "
                "congestion-aware network for messages this large"
            )
        self._packets[msg_id] = self._packets.get(msg_id, 0) + packets
        self._held += packets

    def _next_arrival(self) -> int | None:
        deliveries = self._engine.deliveries
        following = self._engine.next_time()
        candidates = [] if following is None else [following + self._lookahead]
        if deliveries:
            candidates.append(deliveries[0][0])
        return min(candidates, default=None)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        if until_ps < 0:
            first = self._next_arrival()
            until_ps = first + self._lookahead - 1 if first is not None else self._horizon + self._lookahead
        horizon = until_ps - self._lookahead
        while self._live.next_ps <= horizon:  # every arbitration before a change decided, then the change
            self._engine.run(self._live.next_ps - 1)
            self._live.apply(self._live.next_ps, self._engine, self._ports, self._messages.values(), self._segment)
            self._routes.clear()
        self._engine.run(horizon)
        self._horizon = max(self._horizon, horizon)
        result = window_result(self._engine.deliveries, until_ps, self._next_arrival)
        self._in_flight -= len(result.deliveries.id)
        for msg_id in result.deliveries.id:
            self._held -= self._packets.pop(msg_id, 0)
            self._messages.pop(msg_id, None)
        if not result.has_next and self._in_flight:
            raise SimulationError(
                f"flit_level: deadlock by {until_ps} ps: {self._in_flight} messages are in the network but no "
                "router can move a flit"
            )
        return result

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Take the messages of ``flow`` not arrived by ``at_ps`` off: their flits leave the buffers and network
        interfaces they are in at ``at_ps``, freeing buffers (credits go back), virtual channels and links, and none
        of them is delivered (see :mod:`stratasim.network_layer.flit_level.cancel`)."""
        if at_ps <= self._horizon:
            raise BackendError(f"cancel at {at_ps} ps, before the network's committed time {self._horizon} ps")
        self._engine.run(at_ps - 1)  # every slot before at_ps decided: no send can change it
        self._horizon = at_ps - 1
        deliveries = self._engine.deliveries
        arrived = {msg_id for time_ps, msg_id in deliveries if time_ps <= at_ps}
        gone = sorted(m.id for m in self._messages.values() if m.flow == flow and m.id not in arrived)
        for msg_id in gone:
            message = self._messages.pop(msg_id)
            message.cancelled = True
            self._engine.untangle(message)
            self._held -= self._packets.pop(msg_id, 0)
        self._in_flight -= len(gone)
        dropped = set(gone)
        self._engine.wake_all(drop_flits(self._ports.values(), dropped, at_ps), at_ps)
        deliveries[:] = [delivery for delivery in deliveries if delivery[1] not in dropped]
        heapq.heapify(deliveries)
        return network_pb2.CancelResult(id=gone)

    def counters(self) -> network_pb2.LinkCounters:
        """Per link that carried anything, in the congestion-aware network's order: busy time (its flits'
        slots), message bytes (headers and padding not included) and messages; the same by flow once flows other
        than 0 crossed links (no queueing: flits wait for slots and credits, not measured); when recorded, when each
        link was busy; and the latency of the packets delivered so far."""
        result = network_pb2.LinkCounters()
        keys = sorted((k for k, port in self._ports.items() if port.flits), key=lambda k: self._order(*k))
        ports = [self._ports[key] for key in keys]
        for key, port in zip(keys, ports):
            result.link.append(self._label(*key))
            result.busy_ps.append(port.busy_ps)
            result.bytes.append(port.bytes)
            result.messages.append(port.messages)
            if port.spans:
                result.busy.add(link=result.link[-1], start_ps=port.spans[::2], end_ps=port.spans[1::2])
        if any(port.by_flow for port in ports):
            add_flow_rows(result, [(port.bytes, port.messages, 0) for port in ports], [port.by_flow for port in ports])
        result.packet_latency.CopyFrom(self._engine.latency.to_proto())
        return result

    @property
    def flit_hops(self) -> int:
        """Flits that crossed a link so far, summed over links."""
        return sum(port.flits for port in self._ports.values())

    @property
    def packet_latency(self) -> PacketLatency:
        """Latency of every packet delivered so far (on the wire: ``counters().packet_latency``)."""
        return self._engine.latency

    def close(self) -> None:
        self._engine = FlitEngine(self.parameters)
        self._ports.clear()
        self._routes.clear()
        self._messages.clear()


def _with_topology_parameters(parameters: FlitParameters, given: network_pb2.FlitParameters) -> FlitParameters:
    """``parameters`` with every field the topology sets in its place (checked as the constructor checks)."""
    return replace(parameters, **{field.name: value for field, value in given.ListFields()})
