"""Fidelity mixed per dimension: each dimension of a multi-dimensional topology carried by the backend it names.

A message travels its dimensions in order, as on the analytical network (store-and-forward between
dimensions). Consecutive dimensions it crosses that name the same backend make one leg, handed to that backend
whole; when a leg arrives, the next leg leaves from there at once, on the next dimension's backend. So with
every dimension on one backend a message is exactly one leg and times equal that backend's own.

The backends run in lockstep under the composite's conservative windows: each advance is split into steps no
wider than the smallest lookahead of any backend, so a leg that arrives within a step can still be injected,
at its arrival time, into a backend that has only reached the step's end. Each backend is configured with the
whole topology (NPU ids stay global) and carries only the legs along its dimensions.

Every leg carries its message's flow (``SendBatch.flow``). The link counters are the backends' one after another:
their flow rows point at the merged links, and ``queue_ps`` is given only when every backend with links gives it.
A flow cancelled (``cancel``) is cancelled in every backend, each taking off the legs it carries as it can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat

from stratasim.kernel import registry
from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.kernel.switch_reduction import refuse_switch_reduction
from stratasim.network_layer.link_changes import refuse_changes
from stratasim.network_layer.packet_latency import PacketLatency
from stratasim.v1 import network_pb2

__all__ = ["MixedNetwork"]


@dataclass(frozen=True)
class _Leg:
    """One leg of message ``message`` of ``size`` bytes and flow ``flow``, ending at NPU ``stop``; ``rest`` is what
    is left of the journey, as (backend, where the leg ends)."""

    message: int
    size: int
    stop: int
    rest: tuple[tuple[str, int], ...]
    flow: int = 0


class MixedNetwork:
    """A network whose dimensions are carried by the backends they name (``Dimension.backend``; a dimension
    that names none is analytical)."""

    name = "mixed"

    def __init__(self, load: Callable[[str], NetworkBackend] | None = None) -> None:
        self._load = load or (lambda name: registry.load("network", name)())
        self._backends: dict[str, NetworkBackend] = {}
        self._dim_backend: list[str] = []
        self._grid = Grid(())
        self._lookahead = 1
        self._now = 0
        self._legs: dict[int, _Leg] = {}
        self._next_leg = 0
        self._next: dict[str, int] = {}  # per backend, its earliest pending event
        self._flows = False  # whether sends carried flows: then so do legs

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        refuse_changes(topology, self.name)
        if topology.WhichOneof("fabric") is not None:
            raise TopologyError(
                "network.topology: a fabric cannot mix fidelity per dimension; use a list of dimensions"
            )
        names = [dim.backend or "analytical" for dim in topology.dimensions]
        if "mixed" in names:
            raise TopologyError(
                f"topology.dimensions[{names.index('mixed')}].backend: a dimension cannot be mixed itself"
            )
        plain = network_pb2.Topology()
        plain.CopyFrom(topology)
        for dim in plain.dimensions:
            dim.ClearField("backend")
        infos: dict[str, network_pb2.NetworkInfo] = {}
        for name in dict.fromkeys(names):
            backend = self._backends[name] = self._load(name)
            infos[name] = backend.configure(plain)
        self._dim_backend = names
        self._grid = Grid.of(topology)
        self._lookahead = max(1, min(info.lookahead_ps for info in infos.values()))
        return network_pb2.NetworkInfo(
            npus=self._grid.npus,
            lookahead_ps=self._lookahead,
            backend=self.name,
            stateless=all(info.stateless for info in infos.values()),
            permutable_dimensions=[d for d, name in enumerate(names) if d in infos[name].permutable_dimensions],
        )

    def _route(self, src: int, dst: int) -> tuple[tuple[str, int], ...]:
        """The legs from ``src`` to ``dst``: (backend, where the leg ends), dimension by dimension in order."""
        legs: list[tuple[str, int]] = []
        at = list(self._grid.coords(src))
        target = self._grid.coords(dst)
        for dim, name in enumerate(self._dim_backend):
            if at[dim] == target[dim]:
                continue
            at[dim] = target[dim]
            stop = self._grid.npu_at(at)
            if legs and legs[-1][0] == name:
                legs[-1] = (name, stop)
            else:
                legs.append((name, stop))
        return tuple(legs)

    def inject(self, sends: network_pb2.SendBatch) -> None:
        refuse_switch_reduction(self.name, sends)
        batches: dict[str, network_pb2.SendBatch] = {}
        self._flows = self._flows or bool(sends.flow)
        flows = sends.flow if sends.flow else repeat(0)
        for msg_id, src, dst, size, sent, flow in zip(
            sends.id, sends.src, sends.dst, sends.bytes, sends.send_time_ps, flows
        ):
            legs = self._route(src, dst) if src != dst and dst < self._grid.npus else (("", dst),)
            self._add_leg(batches, _Leg(msg_id, size, dst, legs, flow), src, sent)
        self._send(batches)

    def _add_leg(self, batches: dict[str, network_pb2.SendBatch], journey: _Leg, src: int, sent: int) -> None:
        """Send the first leg of what is left of ``journey`` (its ``rest``) from ``src`` at ``sent``."""
        name, stop = journey.rest[0]
        name = name or self._dim_backend[0]  # an impossible message: let a backend reject it, naming it
        leg = self._next_leg
        self._next_leg += 1
        self._legs[leg] = _Leg(journey.message, journey.size, stop, journey.rest[1:], journey.flow)
        batch = batches.setdefault(name, network_pb2.SendBatch())
        batch.id.append(leg)
        batch.src.append(src)
        batch.dst.append(stop)
        batch.bytes.append(journey.size)
        batch.send_time_ps.append(sent)
        if self._flows:
            batch.flow.append(journey.flow)

    def _send(self, batches: dict[str, network_pb2.SendBatch]) -> None:
        for name, batch in batches.items():
            backend = self._backends[name]
            backend.inject(batch)
            first = min(batch.send_time_ps) + self._lookahead
            self._next[name] = min(first, self._next.get(name, first))

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        if until_ps < 0:
            earliest = min(self._next.values(), default=None)
            until_ps = self._now if earliest is None else max(self._now, earliest + self._lookahead - 1)
        delivered: list[tuple[int, int]] = []
        while True:
            earliest = min(self._next.values(), default=None)
            if earliest is None or earliest > until_ps:
                break
            step_end = min(until_ps, max(self._now, earliest) + self._lookahead - 1)
            self._step(step_end, delivered)
        self._now = max(self._now, until_ps)
        delivered.sort()
        result = network_pb2.AdvanceResult(window_end_ps=until_ps)
        result.deliveries.time_ps.extend(time_ps for time_ps, _ in delivered)
        result.deliveries.id.extend(message for _, message in delivered)
        earliest = min(self._next.values(), default=None)
        if earliest is not None:
            result.has_next = True
            result.next_event_ps = earliest
        return result

    def _step(self, step_end: int, delivered: list[tuple[int, int]]) -> None:
        """Advance every backend to ``step_end``; legs that arrived leave on their next leg at once."""
        batches: dict[str, network_pb2.SendBatch] = {}
        for name, backend in self._backends.items():
            result = backend.advance(step_end)
            self._next.pop(name, None)
            if result.has_next:
                self._next[name] = result.next_event_ps
            for leg_id, time_ps in zip(result.deliveries.id, result.deliveries.time_ps):
                leg = self._legs.pop(leg_id)
                if leg.rest:
                    self._add_leg(batches, leg, leg.stop, time_ps)
                else:
                    delivered.append((time_ps, leg.message))
        self._now = step_end
        self._send(batches)

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Cancel ``flow`` in every backend (each takes the legs of the flow it carries off, as it can): a message
        is taken off with its leg on its way; the next legs of the others leave as they arrive."""
        dropped: set[int] = set()
        for backend in self._backends.values():
            for leg_id in backend.cancel(flow, at_ps).id:
                dropped.add(self._legs.pop(leg_id).message)
        return network_pb2.CancelResult(id=sorted(dropped))

    def counters(self) -> network_pb2.LinkCounters:
        """Every backend's link counters, one after another (flow rows pointing at the merged links; queue times
        only when every backend with links gives them); their packet latencies added up (each leg a message of its
        own)."""
        merged = network_pb2.LinkCounters()
        latency = PacketLatency()
        queued = True
        for backend in self._backends.values():
            counters = backend.counters()
            latency.merge(counters.packet_latency)
            counters.ClearField("packet_latency")
            queued = queued and len(counters.queue_ps) == len(counters.link)
            offset = len(merged.link)
            merged.MergeFrom(counters)
            del merged.flow_link[len(merged.flow_link) - len(counters.flow_link) :]
            merged.flow_link.extend(index + offset for index in counters.flow_link)
        if not queued:
            merged.ClearField("queue_ps")
        merged.packet_latency.CopyFrom(latency.to_proto())
        return merged

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
        self._legs.clear()
