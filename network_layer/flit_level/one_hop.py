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
from collections.abc import Sequence
from functools import partial
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
    outbox = ivc.source
    packets = outbox.packets if outbox is not None and len(port.candidates) == 1 else []
    following = outbox.next if outbox is not None else 0  # the next packet of ``packets`` to take
    limit = horizon_ps if packets else -1  # the last slot start at which a flit goes on in this run
    owner, flow = port.owner, packet.message.flow
    back = 2 * port.latency_ps + engine.pipeline_ps  # from a slot's end to its flit's credit, ejected at the far end
    vcs = range(*packet.route.vcs[0])
    state = _Run(port, packet, port.scheduled_slot, now)
    if not index:
        _take_vc(port, ivc, packet, vc, flow)
    slot, tails = state.slot, state.tails
    while True:  # a packet's flits from ``index`` on
        bulk = 0
        if limit >= 0:
            packet, following, bulk, end = _on_credits(
                port, vc, vcs, packet, index, packets, following, slot, limit, back, chain, tails
            )
        if bulk:
            slot, index = slot + bulk, packet.flits
        else:
            slot, end, index = _one_by_one(port, vc, slot, index, packet.flits, limit, back, chain)
        if index < packet.flits:
            break
        owner[vc] = None  # its tail: the virtual channel is free, and the next packet takes one
        tails.append(end)
        if end > limit or following == len(packets) or eligible > end:
            break
        choice, credit = port.earliest_vc(vcs.start, vcs.stop)
        if choice < 0 or credit > end:
            break
        packet, index, vc = packets[following], 0, choice
        following += 1
        _take_vc(port, ivc, packet, vc, flow)
        chain.append(end)
    if outbox is not None:
        outbox.next = following
    ivc.out_vc = vc  # the last head sent took it (in bulk too)
    return state.settle(engine, position, packet, index, slot, end)


def _one_by_one(
    port: OutputPort, vc: int, slot: int, index: int, flits: int, limit: int, back: int, chain: list[int]
) -> tuple[int, int, int]:
    """Send the flits of a packet of ``flits`` flits from ``index`` on ``vc`` one after another in the slots after
    ``slot``, each as long as the one before's ended by ``limit`` and its credit is back by then (the slot starts
    after the first added to ``chain``): return the next slot, the end of the last one taken and the next flit."""
    ret, unused = port.returns[vc], port.initial[vc]
    anchor_ps, anchor_slot, num, den = port.anchor_ps, port.anchor_slot, port.num, port.den
    # this run's credits come back in the order it sends: only one coming back earlier than a credit already due
    # (one decided before the run) needs putting in its place
    late = ret and ret[-1] > anchor_ps - (-(slot + 1 - anchor_slot) * num // den) + back
    push, pop = partial(credit_back, ret) if late else ret.append, ret.popleft
    while True:
        slot += 1
        end = anchor_ps - (-(slot - anchor_slot) * num // den)  # port.slot_start, inlined
        if unused:
            unused -= 1
        else:
            pop()
        push(end + back)
        index += 1
        if index == flits or end > limit or not (unused or ret[0] <= end):
            break
        chain.append(end)
    port.initial[vc] = unused
    return slot, end, index


def _on_credits(
    port: OutputPort,
    vc: int,
    vcs: range,
    packet: Packet,
    index: int,
    packets: list[Packet],
    following: int,
    slot: int,
    limit: int,
    back: int,
    chain: list[int],
    tails: list[int],
) -> tuple[Packet, int, int, int]:
    """Send the rest of ``packet`` from flit ``index`` on ``vc``, then as many whole packets of ``packets`` from
    ``following`` on as surely go on after it without a pause, in the slots after ``slot`` that start by ``limit``:
    ``vc``'s credits (its unused ones, then those coming back, in order) are back by each flit's slot, and ``vc`` is
    the one each head takes. Slot starts go to ``chain``, the packets' tails but the last to ``tails``. Returns the
    last packet sent, the next one to take, the flits sent (0: none, nothing done) and the last one's slot end."""
    initial, owner, ret = port.initial, port.owner, port.returns[vc]
    unused, rivals = initial[vc], [2**63]  # a head keeps ``vc`` while its credit comes before every rival's
    anchor_ps, anchor_slot, num, den = port.anchor_ps, port.anchor_slot, port.num, port.den
    if ret and ret[-1] > anchor_ps - (-(slot + 1 - anchor_slot) * num // den) + back:  # credits to put in place
        return packet, following, 0, 0
    for other in vcs:
        if other != vc:
            if owner[other] is not None:
                return packet, following, 0, 0
            at = 0 if initial[other] else port.returns[other][0] if port.returns[other] else -1
            if at >= 0:
                rivals.append(at + (vc < other))  # a tie goes to the lower virtual channel
    rival, budget = min(rivals), min(unused + len(ret), port.first_slot(limit + 1) - slot)
    count, last = packet.flits - index, following
    if count > budget:
        return packet, following, 0, 0
    credit = ret[count - 1 - unused] if count > unused else 0  # of the packet's last flit, the latest it needs
    if credit > anchor_ps - (-(slot + 1 - anchor_slot) * num // den):
        return packet, following, 0, 0
    while last < len(packets) and count + packets[last].flits <= budget:
        head = ret[count - unused] if count >= unused else 0
        after = count + packets[last].flits - 1
        credit = ret[after - unused] if after >= unused else 0
        if head >= rival or credit > anchor_ps - (-(slot + count - anchor_slot) * num // den):
            break
        count += packets[last].flits
        last += 1
    for _ in range(count - unused):
        ret.popleft()
    initial[vc] = max(0, unused - count)
    ends = _slot_ends(port, slot, count)
    ret.extend(map(back.__add__, ends))
    chain.extend(ends[:-1])
    packet = _take(port, vc, packet, packet.flits - index, packets[following:last], ends, tails)
    return packet, last, count, ends[-1]


def _take(
    port: OutputPort, vc: int, packet: Packet, rest: int, taken: list[Packet], ends: Sequence[int], tails: list[int]
) -> Packet:
    """After the ``rest`` flits of ``packet``, the packets ``taken`` went on ``vc`` in the slots ending at ``ends``:
    their heads crossed (:func:`_take_vc`, inlined) and every tail but the last was sent. Returns the last packet
    sent, which holds ``vc``."""
    sent, payload = rest, 0
    for packet in taken:
        tails.append(ends[sent - 1])
        sent += packet.flits
        packet.crossed = 1
        payload += packet.payload
        if packet.message.flow:
            count_flow(port, packet)
    port.owner[vc] = packet
    port.bytes += payload
    return packet


def _slot_ends(port: OutputPort, slot: int, count: int) -> Sequence[int]:
    """The ends of ``port``'s ``count`` slots after ``slot``."""
    anchor_ps, anchor_slot, num, den = port.anchor_ps, port.anchor_slot, port.num, port.den
    if den == 1:  # slots of whole picoseconds: their ends step by ``num``
        first_end = anchor_ps + (slot + 1 - anchor_slot) * num
        return range(first_end, first_end + count * num, num)
    return [anchor_ps - (-(next_slot - anchor_slot) * num // den) for next_slot in range(slot + 1, slot + count + 1)]


class _Run:
    """What a run of flits of one network interface on one port needs to settle once it stops."""

    __slots__ = ("port", "first", "slot", "start", "tails")

    def __init__(self, port: OutputPort, first: Packet, slot: int, start: int) -> None:
        self.port = port
        self.first = first  # the front packet when the run began
        self.slot = slot
        self.start = start
        self.tails: list[int] = []  # when each packet whose tail was sent took its last slot's end

    def settle(self, engine: FlitEngine, position: int, packet: Packet, index: int, slot: int, end: int) -> int:
        """The run stopped with flit ``index`` of ``packet`` next (``index == flits`` once it is all sent), slot
        ``slot`` next, the last flit's slot ending at ``end``: count it on the port and at the destination, set the
        interface's queue, and return the start of the port's next slot if candidates remain, else -1."""
        port = self.port
        sent = slot - self.slot
        through = end + port.latency_ps + engine.pipeline_ps  # the last flit's, out of the network
        port.slot = slot
        port.flits += sent
        port.busy_ps += end - self.start
        spans = port.spans
        if spans is not None:  # back-to-back flits make one stretch
            if spans and spans[-1] == self.start:
                spans[-1] = end
            else:
                spans += (self.start, end)
        _tails(engine, packet, self.tails, through - end)
        _eject(engine, packet, sent, through)
        _requeue(port, position, self.first, packet, index, sent)
        if port.candidates:
            port.scheduled_slot = slot
            return end
        return -1


def _take_vc(port: OutputPort, ivc: InputVc, packet: Packet, vc: int, flow: int) -> None:
    """The head of ``packet`` (from network interface ``ivc``) takes ``vc`` and crosses ``port``'s link."""
    port.owner[vc] = packet
    ivc.out_vc = vc
    packet.crossed = 1
    port.bytes += packet.payload
    if packet.first:
        port.messages += 1
    if flow:
        count_flow(port, packet)


def _tails(engine: FlitEngine, packet: Packet, ends: list[int], delay: int) -> None:
    """The tails of packets of ``packet``'s message took slots ending at ``ends``: each leaves the network
    ``delay`` later, and counts its packet's latency if its message is not cancelled and on its last segment."""
    message = packet.message
    if ends and not message.cancelled and message.segment == len(message.segments) - 1:
        since = message.sent_ps - delay
        engine.latency.add_all([end - since for end in ends])


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


def _requeue(port: OutputPort, position: int, first: Packet, packet: Packet, index: int, sent: int) -> None:
    """The network interface, candidate ``position``, sent ``sent`` flits on ``port``, from its front packet
    ``first`` to flit ``index`` (not sent) of ``packet``: its queue holds what is left of ``packet`` (or the next
    packet's flits, from its source, once it is all sent), and it goes to the back of the port's candidates while it
    has flits."""
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
        eligible = queue[0][0]
        queue.clear()
        queue.extend([(eligible, packet, flit, 0) for flit in range(index, packet.flits)])
    if queue:
        port.candidates.append(ivc)
