"""A topology's link changes as a network applies them: the links' own speeds now, the failed links, what is to come.

Every network that models links of their own speed holds one :class:`LinkSchedule`: the analytical network reads the
speeds it sets from the start (:meth:`LinkSchedule.refuse_later` refuses the rest); the congestion-aware and
flit-level ones also apply each later change when its time comes. On a fabric the schedule changes the fabric's links
themselves (:meth:`LinkGraph.set_speed`, :meth:`LinkGraph.fail`, :meth:`LinkGraph.restore`); on a list of dimensions
it keeps the speeds of the links that differ from their dimension's.
"""

from __future__ import annotations

from fractions import Fraction

from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.kernel.link_changes import LinkChange, LinkKey, resolve
from stratasim.kernel.units import format_time_ps
from stratasim.network_layer.link_changes import link_names
from stratasim.network_layer.link_graph import LinkGraph
from stratasim.v1 import network_pb2

__all__ = ["LinkSchedule"]

_NEVER = 1 << 62


class LinkSchedule:
    """The link changes of ``topology`` (on ``fabric``, when it has one), those from the start applied."""

    def __init__(self, topology: network_pb2.Topology, fabric: LinkGraph | None) -> None:
        self.names = link_names(topology, fabric)
        self.speeds: dict[LinkKey, tuple[Fraction, int]] = {}
        """Dimension links whose speed differs from their dimension's: (bandwidth in bytes/s, latency in ps)."""
        self.failed: dict[LinkKey, LinkChange] = {}
        """The links down now, and the change that failed each."""
        self._down_speeds: dict[LinkKey, tuple[Fraction, int]] = {}  # a fabric's links down: their speed then
        self._topology = topology
        self._fabric = fabric
        changes = resolve(topology, self.names) if topology.link_changes else []
        self._pending = [change for change in reversed(changes) if change.at_ps > 0]  # the next last
        for change in changes:
            if change.at_ps == 0:
                self._apply(change)

    @property
    def later(self) -> list[LinkChange]:
        """The changes still to come, the next first."""
        return self._pending[::-1]

    @property
    def next_ps(self) -> int:
        """When the next change comes (a time beyond any run when none does)."""
        return self._pending[-1].at_ps if self._pending else _NEVER

    def apply_due(self, now: int) -> list[LinkChange]:
        """Apply every change due by ``now``, in order; the changes applied."""
        applied = []
        while self._pending and self._pending[-1].at_ps <= now:
            change = self._pending.pop()
            self._apply(change)
            applied.append(change)
        return applied

    def _apply(self, change: LinkChange) -> None:
        """Give a link its new speed, fail it or bring it back."""
        key, fabric = change.key, self._fabric
        if change.fail:
            self.failed[key] = change
            if fabric is not None:
                link = fabric.out_links(key[0])[key[1]]
                self._down_speeds[key] = (link.bandwidth, link.latency_ps)
                fabric.fail(key[0], key[1])
            return
        if change.restore:
            del self.failed[key]
        if fabric is not None:
            up = fabric.out_links(key[0]).get(key[1])  # None while down
            bandwidth, latency = (up.bandwidth, up.latency_ps) if up else self._down_speeds.pop(key)
        else:
            dim = self._topology.dimensions[key[0]]
            bandwidth, latency = self.speeds.get(key) or (Fraction(dim.bandwidth_bytes_per_s), dim.latency_ps)
        bandwidth = bandwidth if change.bandwidth is None else change.bandwidth
        latency = latency if change.latency_ps is None else change.latency_ps
        if fabric is not None and change.restore:
            fabric.restore(key[0], key[1], bandwidth, latency)
        elif fabric is not None:
            fabric.set_speed(key[0], key[1], bandwidth, latency)
        else:
            self.speeds[key] = (bandwidth, latency)

    def refuse_later(self, backend: str) -> None:
        """Raise :class:`TopologyError` naming the first change at a time or failure: ``backend``'s network takes
        links' own speeds from the start only."""
        late = self.later or list(self.failed.values())
        if late:
            when = "fails" if late[0].fail else f"changes at {format_time_ps(late[0].at_ps)}"
            raise TopologyError(
                f"link_changes: link {late[0].name} {when}: the {backend} network prices links as they are from "
                "the start; failures and changes at a time need backend congestion_aware or flit_level"
            )

    def no_route(self, ends: tuple[str, str], blocked: list[LinkKey], why: str) -> BackendError:
        """The error of a message between ``ends`` (their names) left no way by the failed ``blocked`` links."""
        failed = "; ".join(
            f"link {self.names.name(key)} failed at {format_time_ps(self.failed[key].at_ps)}"
            for key in dict.fromkeys(blocked)
        )
        return BackendError(f"{failed}; {ends[0]} cannot reach {ends[1]}: {why}")
