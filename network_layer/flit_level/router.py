"""The state of routers: input virtual channels, output ports with their links and credits, and routes.

Every node of the link graph is an input-buffered router. Each link ``a -> b`` is an :class:`OutputPort` of
router ``a`` together with the ``vcs`` input virtual channels it feeds at router ``b``; the port keeps, per
virtual channel, which packet holds it and the credits it has for the buffer at the other end.

A link has its own clock: slot ``n`` starts at ``ceil(n * flit_bytes / bandwidth)`` (in ps, counted from time
zero) and carries at most one flit. Anchoring slots at zero, rather than at the last flit sent, keeps a long
stream of flits at exactly the link's bandwidth, with no rounding that adds up. A link whose bandwidth changes at a
time (:meth:`OutputPort.set_rate`) keeps its slots up to then and counts the new ones from an anchor: the first slot
not used that starts at or after the change.
"""

from __future__ import annotations

import bisect
from collections import deque
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stratasim.network_layer.flit_level.packets import Packet

__all__ = ["Flit", "InputVc", "Outbox", "OutputPort", "Route", "count_flow", "credit_back"]

_PS_PER_S = 10**12

Flit = tuple[int, "Packet", int, int]
"""A flit in a buffer: (time it is through the router's pipeline, its packet, its index in the packet, the
hop of the packet's route it takes next)."""


class Outbox:
    """A network interface's packets not queued yet, handed out a packet's flits at a time (an iterator of flit
    lists), every flit through the interface's pipeline at ``eligible_ps``; ``next`` is the first packet not handed
    out (a run of one port may take packets past it directly, see :mod:`.one_hop`)."""

    __slots__ = ("packets", "next", "eligible_ps")

    def __init__(self, packets: list[Packet], eligible_ps: int) -> None:
        self.packets = packets
        self.next = 0
        self.eligible_ps = eligible_ps

    def __iter__(self) -> Outbox:
        return self

    def __next__(self) -> list[Flit]:
        if self.next == len(self.packets):
            raise StopIteration
        packet = self.packets[self.next]
        self.next += 1
        return [(self.eligible_ps, packet, index, 0) for index in range(packet.flits)]


class InputVc:
    """One virtual channel's buffer at a router input (a FIFO of flits), or a network interface's queue.

    ``upstream`` is the port whose credits count this buffer (None for a network interface, whose queue is
    the sending NPU's memory: unbounded, and filled a packet at a time from ``source``). ``out_vc`` is the
    output virtual channel the packet at the front holds (-1 while its head has not been switched).
    """

    __slots__ = ("queue", "upstream", "vc", "out_vc", "source")

    def __init__(self, upstream: OutputPort | None, vc: int, source: Outbox | None = None) -> None:
        self.queue: deque[Flit] = deque()
        self.upstream = upstream
        self.vc = vc
        self.out_vc = -1
        self.source = source


class OutputPort:
    """Router ``src``'s port onto the link to ``dst``: its slots, virtual channels, credits and counters.

    ``candidates`` are the input virtual channels of router ``src`` whose front flit goes out here, in
    round-robin order (the one served last goes to the back). ``initial[vc]`` counts credits never used yet;
    ``returns[vc]`` holds the times at which used credits come back, in order. ``spans``, when the network
    records link busy stretches, holds them flat, back-to-back slots merged.
    """

    __slots__ = (
        "src",
        "dst",
        "latency_ps",
        "flit_bytes",
        "num",
        "den",
        "anchor_ps",
        "anchor_slot",
        "down",
        "owner",
        "initial",
        "returns",
        "candidates",
        "slot",
        "scheduled",
        "scheduled_slot",
        "token",
        "flits",
        "busy_ps",
        "bytes",
        "messages",
        "spans",
        "by_flow",
    )

    def __init__(self, src: int, dst: int, bandwidth: Fraction, latency_ps: int, flit_bytes: int, vcs: int) -> None:
        self.src = src
        self.dst = dst
        self.latency_ps = latency_ps
        self.flit_bytes = flit_bytes
        flit_ps = flit_bytes * _PS_PER_S / bandwidth  # slot n starts at anchor_ps + ceil((n - anchor_slot) num / den)
        self.num = flit_ps.numerator
        self.den = flit_ps.denominator
        self.anchor_ps = 0
        self.anchor_slot = 0
        self.down = [InputVc(self, vc) for vc in range(vcs)]
        self.owner: list[Packet | None] = [None] * vcs
        self.initial = [0] * vcs
        self.returns: list[deque[int]] = [deque() for _ in range(vcs)]
        self.candidates: list[InputVc] = []
        self.slot = 0  # the first slot not used yet
        self.scheduled = -1  # time of the pending arbitration, -1 if none
        self.scheduled_slot = 0
        self.token = 0  # sequence number of the pending arbitration event
        self.flits = 0
        self.busy_ps = 0
        self.bytes = 0
        self.messages = 0
        self.spans: list[int] | None = None  # when recording: start, end, start, end... of its busy stretches
        self.by_flow: dict[int, list[int]] = {}  # flow other than 0 -> [bytes, messages, 0 (no queue measured)]

    def slot_start(self, slot: int) -> int:
        """When slot ``slot`` (from the anchor on) starts, in ps."""
        return self.anchor_ps - (-(slot - self.anchor_slot) * self.num // self.den)

    def first_slot(self, time_ps: int) -> int:
        """The first slot from the anchor on starting at or after ``time_ps``."""
        since = time_ps - self.anchor_ps
        return self.anchor_slot + ((since - 1) * self.den // self.num + 1 if since > 0 else 0)

    def set_rate(self, bandwidth: Fraction, now: int) -> None:
        """Carry ``bandwidth`` bytes/s from ``now`` on: slots that started earlier, and the one under way, keep
        their length; the new ones count from the first slot not used starting at or after ``now``."""
        anchor = max(self.slot, self.first_slot(now))
        self.anchor_ps = self.slot_start(anchor)
        self.anchor_slot = anchor
        flit_ps = self.flit_bytes * _PS_PER_S / bandwidth
        self.num = flit_ps.numerator
        self.den = flit_ps.denominator

    def choose(self, now: int) -> tuple[int, int, int]:
        """Switch and virtual-channel allocation for the slot starting at ``now``: ``(position, vc, -1)`` for the
        first candidate whose front flit is through its pipeline and holds, or can take, an output virtual channel
        with a credit by ``now``; else ``(-1, -1, soonest)``, ``soonest`` the time the first could (-1 if none has a
        credit: it is woken when a virtual channel is freed here or a credit comes back)."""
        initial, returns, owner = self.initial, self.returns, self.owner
        soonest = -1
        for position, ivc in enumerate(self.candidates):
            eligible, packet, index, hop = ivc.queue[0]
            if index:
                vc = ivc.out_vc
                credit = 0 if initial[vc] else returns[vc][0] if returns[vc] else -1
            else:  # self.earliest_vc, inlined (a port with many candidates scans them every slot)
                vc = credit = -1
                low, high = packet.route.vcs[hop]
                for free in range(low, high):
                    if owner[free] is None:
                        at = 0 if initial[free] else returns[free][0] if returns[free] else -1
                        if at >= 0 and (vc < 0 or at < credit):
                            vc, credit = free, at
            if credit < 0:
                continue
            ready = eligible if eligible > credit else credit
            if ready <= now:
                return position, vc, -1
            if soonest < 0 or ready < soonest:
                soonest = ready
        return -1, -1, soonest

    def earliest_vc(self, low: int, high: int) -> tuple[int, int]:
        """The free virtual channel of ``[low, high)`` whose next credit comes first (the lowest on a tie) and that
        credit's time (0 for one never used); ``(-1, -1)`` when no free one has a credit."""
        initial, returns, owner = self.initial, self.returns, self.owner
        vc = credit = -1
        for free in range(low, high):
            if owner[free] is None:
                at = 0 if initial[free] else returns[free][0] if returns[free] else -1
                if at >= 0 and (vc < 0 or at < credit):
                    vc, credit = free, at
        return vc, credit

    @property
    def least_flit_ps(self) -> int:
        """The shortest slot (slots differ by at most 1 ps when a flit is not a whole number of ps)."""
        return self.num // self.den

    def fill(self, depth: int) -> None:
        """Give every virtual channel ``depth`` credits: the buffers at the other end start empty."""
        self.initial = [depth] * len(self.initial)


class Route:
    """The ports a segment of a message crosses and, per hop, the virtual channels ``[low, high)`` it may use."""

    __slots__ = ("ports", "vcs", "hops")

    def __init__(self, ports: tuple[OutputPort, ...], vcs: tuple[tuple[int, int], ...]) -> None:
        self.ports = ports
        self.vcs = vcs
        self.hops = len(ports)


def credit_back(returns: deque[int], time_ps: int) -> None:
    """Add a credit coming back at ``time_ps`` to a virtual channel's returns, kept in time order.

    Credits come back in the order they are decided except that an ejected flit's is decided as it is sent
    on its last link: a flit of an earlier packet leaving the same buffer later may credit earlier.
    """
    if returns and returns[-1] > time_ps:
        bisect.insort(returns, time_ps)
    else:
        returns.append(time_ps)


def count_flow(port: OutputPort, packet: Packet) -> None:
    """Count a packet of a flow other than 0 on ``port``'s link as its head crosses it."""
    load = port.by_flow.get(packet.message.flow)
    if load is None:
        load = port.by_flow[packet.message.flow] = [0, 0, 0]
    load[0] += packet.payload
    load[1] += packet.first
