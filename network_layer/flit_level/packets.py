"""Packetisation: a message is cut into packets of at most ``packet_flits`` flits, each led by a head flit.

Every packet carries ``header_bytes`` of header at the front of its head flit, then its share of the
message; packets are filled in order, so all but the last carry ``payload_bytes`` of the message. A packet of
``p`` payload bytes is ``ceil((header_bytes + p) / flit_bytes)`` flits; an empty message is one packet of
header only. On the wire a message of ``m`` bytes in ``n`` packets therefore costs ``n * header_bytes`` bytes
of header plus the padding of each packet's last flit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.network_layer.flit_level.parameters import FlitParameters

if TYPE_CHECKING:
    from stratasim.network_layer.flit_level.router import Route

__all__ = ["Message", "Packet", "packet_payloads", "packet_flits"]


def packet_payloads(size: int, parameters: FlitParameters) -> list[int]:
    """The message bytes each packet of a ``size``-byte message carries, in order."""
    most = parameters.payload_bytes
    full, rest = divmod(size, most)
    return [most] * full + ([rest] if rest or not full else [])


def packet_flits(payload: int, parameters: FlitParameters) -> int:
    """Flits of a packet carrying ``payload`` message bytes, head flit included."""
    return -(-(parameters.header_bytes + payload) // parameters.flit_bytes) or 1


class Message:
    """One message on its way: what is left of its current segment and when its flits left the network.

    A message crosses one segment on a fabric; on a list of dimensions one per dimension it travels in, the
    NPU at the end of each segment taking in the whole message before sending it on (as the analytical and
    congestion-aware networks do between dimensions). ``flow`` is its traffic class (the sending NPU's job).
    """

    __slots__ = (
        "id",
        "sent_ps",
        "payloads",
        "segments",
        "segment",
        "remaining",
        "latest_ps",
        "flow",
        "packets",
        "cancelled",
        "tangled",
    )

    def __init__(
        self, msg_id: int, sent_ps: int, payloads: list[int], segments: tuple[Route, ...], flow: int = 0
    ) -> None:
        self.id = msg_id
        self.flow = flow  # SendBatch.flow: links count the load of flows other than 0 apart
        self.sent_ps = sent_ps
        self.payloads = payloads
        self.segments = segments
        self.segment = 0
        self.remaining = 0  # flits of the current segment not yet ejected
        self.latest_ps = sent_ps  # when the last ejected flit of the current segment left the network
        self.packets: list[Packet] = []  # the packets of the current segment
        self.cancelled = False  # taken off the network (``cancel``): never delivered
        self.tangled = False  # counted by ``FlitEngine.tangle``: crosses more than one link or segment


class Packet:
    """A worm of ``flits`` flits following ``route``; its head flit allocates a virtual channel per hop.
    ``crossed`` counts the links its head has crossed (a link failing reroutes the packets whose head has not
    crossed it)."""

    __slots__ = ("message", "route", "flits", "payload", "first", "crossed")

    def __init__(self, message: Message, route: Route, flits: int, payload: int, first: bool) -> None:
        self.message = message
        self.route = route
        self.flits = flits
        self.payload = payload
        self.first = first  # its segment's first packet: each link counts the message when its head crosses
        self.crossed = 0
