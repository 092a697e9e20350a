"""Running the flit-level network while every message in it crosses a single link: each port by itself.

A flit of a one-link message goes from its network interface onto the port of that link and out of the network at
the other end; its credit comes back to the same port. So while no message crosses more than one link (or is
rerouted, or has a segment after this one), no port's arbitration touches another port: no buffer inside the
network holds a flit, and nothing wakes a port but the port itself. :func:`run_apart` then moves each port that
has arbitrations by ``horizon`` through all of them at once, and while a port has one candidate it sends that
message's flits slot after slot in one loop, without an event per flit. A port's results are the same as in the
event loop of :class:`~stratasim.network_layer.flit_level.engine.FlitEngine`, and so are the ports' next
arbitrations: they are queued in the order the event loop would have queued them (see :func:`run_apart`), which
decides ties at equal times once messages that cross several links come back.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from stratasim.network_layer.flit_level.router import InputVc, OutputPort, count_flow, credit_back

if TYPE_CHECKING:
    from stratasim.network_layer.flit_level.engine import FlitEngine
    from stratasim.network_layer.flit_level.packets import Packet

__all__ = ["run_apart"]


def run_apart(engine: FlitEngine, horizon_ps: int) -> None:
    """Process every arbitration at or before ``horizon_ps``, port by port (every message crossing one link).

    The event loop queues an arbitration with a sequence number when it processes the one before (or when it was
    asked for from outside the loop, before this run): so of two ports' next arbitrations after the run, the first
    queued is the one whose previous arbitration came first, by time and then by when it was queued, and so back
    to the arbitrations queued before the run, whose sequence numbers say. Each port's chain of arbitration times,
    latest first, then -1 and its first arbitration's sequence number, compares as that order does.
    """
    events = engine.events
    due = []
    while events and events[0][0] <= horizon_ps:
        entry = heapq.heappop(events)
        if entry[2].token == entry[1]:
            due.append(entry)
    following = []
    for time_ps, seq, port in due:
        port.scheduled = -1
        chain = [seq, -1]
        next_ps = _stream(engine, port, time_ps, horizon_ps, chain)
        if next_ps >= 0:
            chain.reverse()
            following.append((chain, next_ps, port))
    following.sort(key=lambda item: item[0])
    for _, next_ps, port in following:
        engine.schedule(port, next_ps)


def _stream(engine: FlitEngine, port: OutputPort, now: int, horizon_ps: int, chain: list[int]) -> int:
    """Arbitrate at ``port`` from ``now`` on up to ``horizon_ps``, each arbitration's time added to ``chain``; return
    the time of its next arbitration after that (``scheduled_slot`` set), or -1 if it has none."""
    while True:
        chain.append(now)
        position, vc, soonest = port.choose(now)
        if position >= 0:
            now = _send_run(engine, port, position, vc, now, horizon_ps, chain)
        elif soonest >= 0:
            slot = port.first_slot(soonest)
            if slot < port.slot:
                slot = port.slot
            port.scheduled_slot = slot
            now = port.slot_start(slot)
        else:
            return -1
        if now < 0 or now > horizon_ps:
            return now


def _send_run(
    engine: FlitEngine, port: OutputPort, position: int, vc: int, now: int, horizon_ps: int, chain: list[int]
) -> int:
    """Send the front flit of candidate ``position`` on ``vc`` in the slot starting at ``now`` and, while it is the
    port's only candidate, its message's flits after it in the slots after, as long as each one's credit is back by
    its slot and the slot starts by ``horizon_ps`` (each such slot's start added to ``chain``); return the start of
    the port's next slot if candidates remain (``scheduled_slot`` set), else -1."""
    ivc = port.candidates[position]
    eligible, packet, index, _ = ivc.queue[0]
    first, outbox, alone = packet, ivc.source, len(port.candidates) == 1
    initial, returns = port.initial, port.returns
    back = 2 * port.latency_ps + engine.pipeline_ps  # from a slot's end to its flit's credit, ejected at the far end
    anchor_ps, anchor_slot, num, den = port.anchor_ps, port.anchor_slot, port.num, port.den
    slot, start, sent = port.scheduled_slot, now, 0
    if not index:
        _take_vc(port, ivc, packet, vc)
    while True:
        slot += 1
        end = anchor_ps - (-(slot - anchor_slot) * num // den)  # port.slot_start, inlined
        sent += 1
        if initial[vc]:
            initial[vc] -= 1
        else:
            returns[vc].popleft()
        credit_back(returns[vc], end + back)
        index += 1
        if index < packet.flits:
            if not alone or end > horizon_ps or (0 if initial[vc] else returns[vc][0]) > end:
                break
        else:  # its tail: the virtual channel is free, and the next packet takes one
            port.owner[vc] = None
            _tail(engine, packet, end + back - port.latency_ps)
            if not alone or end > horizon_ps or outbox is None or outbox.next == len(outbox.packets):
                break
            following = outbox.packets[outbox.next]
            vc, credit = port.earliest_vc(*following.route.vcs[0])
            if credit < 0 or credit > end or eligible > end:
                break
            outbox.next += 1
            packet, index = following, 0
            _take_vc(port, ivc, packet, vc)
        chain.append(end)
    port.slot = slot
    port.flits += sent
    port.busy_ps += end - start
    _eject(engine, packet, sent, end + back - port.latency_ps)
    _requeue(port, position, first, packet, index, sent, eligible)
    spans = port.spans
    if spans is not None:  # back-to-back flits make one stretch
        if spans and spans[-1] == start:
            spans[-1] = end
        else:
            spans += (start, end)
    if port.candidates:
        port.scheduled_slot = slot
        return end
    return -1


def _take_vc(port: OutputPort, ivc: InputVc, packet: Packet, vc: int) -> None:
    """The head of ``packet`` (from network interface ``ivc``) takes ``vc`` and crosses ``port``'s link."""
    port.owner[vc] = packet
    ivc.out_vc = vc
    packet.crossed = 1
    port.bytes += packet.payload
    if packet.first:
        port.messages += 1
    if packet.message.flow:
        count_flow(port, packet)


def _tail(engine: FlitEngine, packet: Packet, through_ps: int) -> None:
    """The tail of ``packet`` leaves the network at ``through_ps``: the packet's latency, if its message is not
    cancelled and this is its last segment."""
    message = packet.message
    if not message.cancelled and message.segment == len(message.segments) - 1:
        engine.latency.add(through_ps - message.sent_ps)


def _eject(engine: FlitEngine, packet: Packet, flits: int, through_ps: int) -> None:
    """``flits`` flits of ``packet``'s message, the last at ``through_ps``, left the network (nothing, if it is
    cancelled): when they were its last, the message goes on to its next segment or is delivered."""
    message = packet.message
    if message.cancelled:
        return
    if through_ps > message.latest_ps:
        message.latest_ps = through_ps
    message.remaining -= flits
    if not message.remaining:
        engine.finish(message)


def _requeue(
    port: OutputPort, position: int, first: Packet, packet: Packet, index: int, sent: int, eligible: int
) -> None:
    """The network interface, candidate ``position``, sent ``sent`` flits on ``port``, from its front packet ``first`` to flit ``index``
    (not sent) of ``packet``: its queue holds what is left of ``packet`` (or the next packet's flits, from its
    source, once it is all sent), and it goes to the back of the port's candidates while it has flits."""
    ivc = port.candidates.pop(position)
    queue = ivc.queue
    if index == packet.flits:
        queue.clear()
        if ivc.source is not None:
            following = next(ivc.source, None)
            if following is None:
                ivc.source = None
            else:
                queue.extend(following)
    elif packet is first:
        for _ in range(sent):
            queue.popleft()
    else:
        queue.clear()
        queue.extend([(eligible, packet, flit, 0) for flit in range(index, packet.flits)])
    if queue:
        port.candidates.append(ivc)
