"""The flit-level event loop: switch allocation at output ports, credit flow control, ejection.

Only ports with work have events. A port is woken (given an arbitration event at its first free slot at or
after a time) when a flit becomes the front of an input virtual channel routed to it, when a credit comes
back to it, or at its next slot while candidates remain; an idle port costs nothing, and time jumps straight
to the next port with work.

One arbitration at a port's slot is switch and virtual-channel allocation together: candidates are
considered round-robin (the one served last goes to the back); the first whose front flit is through its
router's pipeline and holds, or can take, an output virtual channel with a credit wins the slot. A head flit
takes the free virtual channel of its class whose next credit comes first (the lowest on a tie); the tail
flit frees it again at once (BookSim's ``wait_for_tail_credit = 0``: a packet may follow another into the
same buffer). Ports arbitrate independently: an input may feed several outputs in one slot.

A flit that leaves a router frees its buffer entry: the credit reaches the port upstream one link latency
later. A flit that reaches its destination NPU leaves the network through that router's pipeline into the
network interface, which takes every flit at once (ejection is never blocked, so a flit bound for its NPU
never waits behind another in a buffer); its credit goes back as it leaves.
"""

from __future__ import annotations

import heapq
from fractions import Fraction

from stratasim.network_layer.flit_level.one_hop import run_apart
from stratasim.network_layer.flit_level.packets import Message, Packet, packet_flits
from stratasim.network_layer.flit_level.parameters import FlitParameters
from stratasim.network_layer.flit_level.router import InputVc, Outbox, OutputPort, Route, count_flow, credit_back
from stratasim.network_layer.packet_latency import PacketLatency

__all__ = ["FlitEngine"]


class FlitEngine:
    """Routers and links in motion: ``start`` messages, ``run`` up to a time, collect ``deliveries``.

    While every message in the network crosses a single link (``tangled`` counts those that do not: more than one
    link or segment, or rerouted), no port's arbitrations touch another's, and ``run`` moves each port on by itself
    (:mod:`.one_hop`) with the same results.
    """

    def __init__(self, parameters: FlitParameters) -> None:
        self._parameters = parameters
        self.pipeline_ps = parameters.pipeline_ps
        self.events: list[tuple[int, int, OutputPort]] = []  # (time, seq, port): arbitrations
        self._seq = 0
        self._flits: dict[int, int] = {}  # a packet's payload bytes -> its flits
        self.tangled = 0
        self.deliveries: list[tuple[int, int]] = []  # a heap of (time, message id)
        self.latency = PacketLatency()

    def start(self, message: Message, at_ps: int) -> None:
        """Hand the current segment of ``message`` to its first router's network interface at ``at_ps``."""
        route = message.segments[message.segment]
        if not message.segment and (route.hops > 1 or len(message.segments) > 1):
            self.tangle(message)
        flits = self._flits
        for payload in set(message.payloads).difference(flits):
            flits[payload] = packet_flits(payload, self._parameters)
        packets = [Packet(message, route, flits[payload], payload, False) for payload in message.payloads]
        packets[0].first = True
        message.remaining = sum(map(flits.__getitem__, message.payloads))
        message.packets = packets
        source = Outbox(packets, at_ps + self.pipeline_ps)
        interface = InputVc(None, 0, source)
        interface.queue.extend(next(source))
        port = route.ports[0]
        port.candidates.append(interface)
        self._wake(port, at_ps + self.pipeline_ps)

    def tangle(self, message: Message) -> None:
        """Count ``message`` among those that do not cross a single link (once)."""
        if not message.tangled:
            message.tangled = True
            self.tangled += 1

    def untangle(self, message: Message) -> None:
        """``message`` left the network (delivered or cancelled): no longer counted by :meth:`tangle`."""
        if message.tangled:
            message.tangled = False
            self.tangled -= 1

    def run(self, horizon_ps: int) -> None:
        """Process every arbitration at or before ``horizon_ps``."""
        if not self.tangled:
            run_apart(self, horizon_ps)
            return
        events = self.events
        pop, arbitrate = heapq.heappop, self._arbitrate
        while events and events[0][0] <= horizon_ps:
            time_ps, seq, port = pop(events)
            if port.token != seq:
                continue
            port.scheduled = -1
            following = arbitrate(port, time_ps)
            # A port streaming flits goes on to its next slot directly while that comes strictly before every
            # other event: the same order as through the heap, without the heap.
            while following >= 0 and following <= horizon_ps and (not events or events[0][0] > following):
                following = arbitrate(port, following)
            if following >= 0:
                self.schedule(port, following)

    def schedule(self, port: OutputPort, time_ps: int) -> None:
        """Queue ``port``'s next arbitration at ``time_ps`` (its ``scheduled_slot`` set), after every one queued."""
        self._seq += 1
        port.scheduled = time_ps
        port.token = self._seq
        heapq.heappush(self.events, (time_ps, self._seq, port))

    def next_time(self) -> int | None:
        """When the next arbitration is, if any (stale events dropped first)."""
        events = self.events
        while events and events[0][2].token != events[0][1]:
            heapq.heappop(events)
        return events[0][0] if events else None

    def set_rate(self, port: OutputPort, bandwidth: Fraction, now: int) -> None:
        """Give ``port``'s link ``bandwidth`` bytes/s from ``now`` on (every event before ``now`` processed); its
        pending arbitration, timed by the old slots, is made anew."""
        port.set_rate(bandwidth, now)
        if port.scheduled >= 0:
            port.scheduled = -1
            self._wake(port, now)

    def reroute(self, packet: Packet, route: Route, now: int) -> None:
        """Send ``packet`` on by ``route`` (the links its head crossed kept) from ``now``: its head, if at the
        front of its buffer, is offered to the new route's next port instead of the old one's."""
        self.tangle(packet.message)
        hop = packet.crossed
        old, new = packet.route.ports[hop], route.ports[hop]
        packet.route = route
        if old is new:
            return
        for position, ivc in enumerate(old.candidates):
            eligible, front, index, _ = ivc.queue[0]
            if front is packet and not index:
                del old.candidates[position]
                new.candidates.append(ivc)
                self._wake(new, eligible if eligible > now else now)
                return

    def _wake(self, port: OutputPort, time_ps: int) -> None:
        """Make sure ``port`` arbitrates at its first free slot at or after ``time_ps``."""
        slot = port.first_slot(time_ps)
        if slot < port.slot:
            slot = port.slot
        start = port.slot_start(slot)
        if port.scheduled < 0 or start < port.scheduled:  # self.schedule, inlined
            self._seq += 1
            port.scheduled = start
            port.scheduled_slot = slot
            port.token = self._seq
            heapq.heappush(self.events, (start, self._seq, port))

    def _arbitrate(self, port: OutputPort, now: int) -> int:
        """Give the slot starting at ``now`` to the first candidate that can use it, else sleep until one can.

        Returns the start of the port's next slot if it must arbitrate again then (the caller schedules it;
        ``scheduled_slot`` is set), else -1.
        """
        position, vc, soonest = port.choose(now)
        if position >= 0:
            return self._send(port, position, vc, now)
        if soonest >= 0:
            self._wake(port, soonest)
        return -1

    def _send(self, port: OutputPort, position: int, vc: int, now: int) -> int:
        """Put the front flit of candidate ``position`` on the link in the slot starting at ``now``; returns the
        start of the next slot if candidates remain, else -1."""
        candidates = port.candidates
        ivc = candidates[position]
        _, packet, index, hop = ivc.queue.popleft()
        slot = port.scheduled_slot + 1
        port.slot = slot
        end = port.anchor_ps - (-(slot - port.anchor_slot) * port.num // port.den)  # port.slot_start, inlined
        if port.initial[vc]:
            port.initial[vc] -= 1
        else:
            port.returns[vc].popleft()
        if not index:
            port.owner[vc] = packet
            ivc.out_vc = vc
            packet.crossed = hop + 1
            port.bytes += packet.payload
            if packet.first:
                port.messages += 1
            if packet.message.flow:
                count_flow(port, packet)
        if index == packet.flits - 1:
            port.owner[vc] = None
        port.flits += 1
        port.busy_ps += end - now
        spans = port.spans
        if spans is not None:  # back-to-back flits make one stretch
            if spans and spans[-1] == now:
                spans[-1] = end
            else:
                spans += (now, end)

        upstream = ivc.upstream
        if upstream is not None:  # this flit's buffer entry is free: credit back
            back = now + upstream.latency_ps
            credit_back(upstream.returns[ivc.vc], back)
            if upstream.candidates and (upstream.scheduled < 0 or upstream.scheduled > back):
                self._wake(upstream, back)

        through = end + port.latency_ps + self.pipeline_ps  # at the next router, through its pipeline
        route = packet.route
        if hop + 1 == route.hops:  # ejected as it is through: its credit is known now
            credit_back(port.returns[vc], through + port.latency_ps)
            self._eject(packet, index, through)
        else:
            down = port.down[vc]
            down.queue.append((through, packet, index, hop + 1))
            if len(down.queue) == 1:
                onward = route.ports[hop + 1]
                onward.candidates.append(down)
                self._wake(onward, through)

        del candidates[position]
        self._offer_front(ivc, port, now)
        if candidates:  # nothing else woke this port: it is free from the next slot, which starts at ``end``
            port.scheduled_slot = slot
            return end
        return -1

    def _offer_front(self, ivc: InputVc, port: OutputPort, now: int) -> None:
        """After ``ivc`` sent a flit on ``port`` at ``now``: refill its queue from its source when it ran dry, and
        offer its new front flit to the port it leaves by (woken, unless it is ``port``, sending already)."""
        queue = ivc.queue
        if not queue and ivc.source is not None:
            following = next(ivc.source, None)
            if following is None:
                ivc.source = None
            else:
                queue.extend(following)
        if queue:
            eligible, after, _, at_hop = queue[0]
            onward = after.route.ports[at_hop]
            onward.candidates.append(ivc)
            if onward is not port:
                self._wake(onward, eligible if eligible > now else now + 1)

    def wake_all(self, ports: list[OutputPort], time_ps: int) -> None:
        """Make every port of ``ports`` arbitrate again at its first free slot at or after ``time_ps``."""
        for port in ports:
            port.scheduled = -1
            self._wake(port, time_ps)

    def _eject(self, packet: Packet, index: int, time_ps: int) -> None:
        """A flit reached its destination's network interface at ``time_ps``."""
        message = packet.message
        if message.cancelled:  # its flits still in flight on its last link leave the network, and that is all
            return
        if time_ps > message.latest_ps:
            message.latest_ps = time_ps
        if index == packet.flits - 1 and message.segment == len(message.segments) - 1:
            self.latency.add(time_ps - message.sent_ps)
        message.remaining -= 1
        if not message.remaining:
            self.finish(message)

    def finish(self, message: Message) -> None:
        """Every flit of ``message``'s current segment left the network: start its next segment, or deliver it."""
        message.segment += 1
        if message.segment < len(message.segments):
            self.start(message, message.latest_ps)
        else:
            heapq.heappush(self.deliveries, (message.latest_ps, message.id))
            self.untangle(message)
