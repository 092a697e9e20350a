"""What the flit-level network is built from beyond the topology: flits, packets, virtual channels, routers.

The topology says how fast each link is; these parameters say how the routers at its ends work. Every field
has a default, so a study names only ``backend: flit_level`` and gets a network comparable to the coarser
backends (deep enough buffers that credits never slow a lone message down).
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.kernel.errors import BackendError

__all__ = ["FlitParameters"]


@dataclass(frozen=True, slots=True)
class FlitParameters:
    """The micro-architecture of every router and network interface.

    - ``flit_bytes``: width of a flit, the unit a link carries in one slot and a buffer holds in one entry.
      A link of ``B`` bytes/s carries one flit every ``flit_bytes / B`` seconds (its own clock: no rounding
      of its bandwidth to the router clock).
    - ``packet_flits``: most flits in a packet, head flit included.
    - ``header_bytes``: the header every packet carries at the front of its head flit (route, virtual
      channel, sequence; Garnet's ``control_msg_size`` of 8 bytes by default). A packet of ``p`` payload bytes
      is ``ceil((header_bytes + p) / flit_bytes)`` flits, so it carries at most
      ``packet_flits * flit_bytes - header_bytes`` bytes of the message.
    - ``vcs``: virtual channels per input port. Tori and rings split them into two dateline classes, the
      dragonfly into two (before and after the global link), graphs into one class per hop of a route: see
      :mod:`stratasim.network_layer.flit_level.deadlock`.
    - ``buffer_flits``: depth of each virtual channel's buffer, in flits. Zero (the default) sizes every
      buffer to its link's credit round trip (two latencies, one router pipeline and a few flits' slack) so
      that flow control never throttles a lone stream, as a real long-haul link's buffers are sized.
    - ``pipeline_cycles`` of ``cycle_ps`` each: what every router adds to every flit it forwards (route
      computation, VC allocation, switch allocation, switch traversal: BookSim's default delays of one cycle
      each make four). The network interface at each end is one such router stage.
    """

    flit_bytes: int = 64
    packet_flits: int = 5
    header_bytes: int = 8
    vcs: int = 4
    buffer_flits: int = 0
    pipeline_cycles: int = 4
    cycle_ps: int = 1000

    def __post_init__(self) -> None:
        least = {
            "flit_bytes": 1,
            "packet_flits": 1,
            "header_bytes": 0,
            "vcs": 1,
            "buffer_flits": 0,
            "pipeline_cycles": 0,
            "cycle_ps": 1,
        }
        for key, low in least.items():
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise BackendError(f"flit_level.{key}: must be an integer of at least {low}, got {value!r}")
        if self.payload_bytes < 1:
            raise BackendError(
                f"flit_level.header_bytes: a header of {self.header_bytes} bytes leaves no room for payload in a "
                f"packet of {self.packet_flits} flits of {self.flit_bytes} bytes"
            )

    @property
    def pipeline_ps(self) -> int:
        """Picoseconds a flit spends in one router's pipeline."""
        return self.pipeline_cycles * self.cycle_ps

    @property
    def payload_bytes(self) -> int:
        """Most message bytes one packet carries."""
        return self.packet_flits * self.flit_bytes - self.header_bytes
