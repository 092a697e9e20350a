"""The analytical, congestion-unaware network: every message takes latency plus size over bandwidth.

Links hold no state, so messages never wait for each other (unlimited concurrency, as in ASTRA-sim's
congestion-unaware backend). A message travels dimension by dimension in order (store-and-forward between
dimensions); in each dimension where source and destination differ it pays

- ring: the shortest ring distance (either direction) times the latency, plus one serialisation;
- fully connected: one latency plus one serialisation;
- switch: two latencies (up to the switch and down) plus one serialisation (cut-through).

With the topology's ``first_dimension_only`` (ASTRA-sim 2.x's rule, set by ``system.preset: astra_compat``) a message
pays only the first dimension where its ends differ, as if it travelled there alone.

Serialisation of ``b`` bytes at ``B`` bytes/s is ``ceil(b * 1e12 / B)`` ps, computed exactly; with a
``delay_quantum_ps`` in the topology each delay is then rounded down to a multiple of it. A message
takes at least 1 ps (an empty message over zero-latency links would otherwise arrive as it is sent).

On a fabric (a torus, fat-tree, graph... see :mod:`stratasim.network_layer.topologies`) a message follows its route and
pays the sum of the route's link latencies plus one serialisation at the route's slowest link (cut-through:
its head moves on after each link's latency while its body streams behind at the bottleneck's rate). Its
delays are then translation-invariant (``stateless``, letting the engine simulate equivalent NPUs once) only
on fabrics that say so, such as tori. Without a fabric, a switch or fully-connected dimension prices every pair of
its positions alike, so any permutation of them is a symmetry too (``NetworkInfo.permutable_dimensions``).

Links of their own speed (``Topology.link_changes`` from the start, see :mod:`stratasim.network_layer.link_changes`):
in a dimension that has one, a message pays the latencies of the links it crosses there plus one serialisation at
the slowest of them, as on a fabric. The network is then no longer symmetric: it says it is not ``stateless``, so
the engine simulates every NPU. Changes at a time and failures are refused: they need a network with state.

A switch of a dimension marked ``in_network_reduction`` reduces (``SendBatch.reductions``, see
:mod:`stratasim.network_layer.switch_reduction`): a member's result arrives two latencies plus the larger of its up and
down serialisations after the last member sent, the time a message through that switch takes from the last sender.

A flow's messages taken off at a time (``cancel``, a failed NPU's job) are only not delivered: with no state per
link there is no capacity to free, and no other message's time changes.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from fractions import Fraction
from itertools import repeat
from typing import ClassVar, NoReturn

import numpy as np

from stratasim.kernel.errors import BackendError
from stratasim.kernel.grid import Grid, validate_topology
from stratasim.kernel.link_changes import LinkKey
from stratasim.network_layer.link_changes import dimension_links
from stratasim.network_layer.link_graph import LinkGraph
from stratasim.network_layer.link_schedule import LinkSchedule
from stratasim.network_layer.routing import ring_step
from stratasim.network_layer.switch_reduction import Contribution, SwitchReductions, release_ps
from stratasim.v1 import network_pb2

__all__ = ["AnalyticalNetwork"]

_PS_PER_S = 10**12
_SMALL_BATCH = 64
_CACHE_LIMIT = 1 << 20
_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH


class _Dim:
    """One dimension's constants, prepared for the per-message hot path."""

    __slots__ = ("kind", "size", "stride", "latency_ps", "bw_num", "bw_den")

    def __init__(self, dim: network_pb2.Dimension, stride: int) -> None:
        bandwidth = Fraction(dim.bandwidth_bytes_per_s)
        self.kind = dim.kind
        self.size = dim.size
        self.stride = stride
        self.latency_ps = dim.latency_ps
        self.bw_num = bandwidth.numerator
        self.bw_den = bandwidth.denominator

    def serialisation_ps(self, size: int) -> int:
        return -(-(size * _PS_PER_S * self.bw_den) // self.bw_num)

    def least_delay_ps(self) -> int:
        """The delay of an empty message over the fewest hops of this dimension."""
        return (2 if self.kind == _SWITCH else 1) * self.latency_ps


class AnalyticalNetwork:
    """Congestion-unaware analytical network over Ring / FullyConnected / Switch dimensions or a fabric.

    Arrival times of a large batch are computed at once with numpy and kept as a sorted run (one per batch)
    that ``advance`` merges, so the cost per window does not grow with Python loops over messages; a small
    batch (numpy's fixed costs would dominate) is priced message by message and its arrivals kept in a heap.
    """

    name = "analytical"
    stateless: ClassVar[bool] = True
    """Its delays never depend on traffic: it holds no state per link, and NPUs equivalent by symmetry may be
    simulated once (``NetworkInfo.stateless`` says, per topology, whether a fabric's routes keep the symmetry)."""

    def __init__(self) -> None:
        self._dims: list[_Dim] = []
        self._fabric: LinkGraph | None = None
        self._grid = Grid(())
        self._kinds: tuple[int, ...] = ()
        self._speeds: dict[LinkKey, tuple[Fraction, int]] = {}  # dimension links of their own speed
        self._npus = 0
        self._lookahead = 1
        self._quantum = 0
        self._first_only = False
        self._cache: dict[tuple[int, int, int], int] = {}
        self._runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (arrivals, ids, flows), sorted
        self._few: list[tuple[int, int, int]] = []  # a heap of (arrival, id, flow) of messages from small batches
        self._now = 0
        self._reductions = SwitchReductions(self.name, ())

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        self._cache.clear()
        self._quantum = max(0, topology.delay_quantum_ps)
        self._first_only = topology.first_dimension_only
        if topology.WhichOneof("fabric") is not None:
            from stratasim.network_layer import topologies  # the fabrics' builders, only for a fabric

            self._fabric = topologies.build(topology)
            self._dims = []
            self._npus = self._fabric.npus
            least = self._fabric.least_latency_ps()
        else:
            validate_topology(topology)
            grid = Grid.of(topology)
            self._fabric = None
            self._dims = [_Dim(dim, grid.stride(i)) for i, dim in enumerate(topology.dimensions)]
            self._npus = grid.npus
            least = min((dim.least_delay_ps() for dim in self._dims if dim.size > 1), default=1)
        self._grid = Grid(tuple(dim.size for dim in topology.dimensions))
        self._kinds = tuple(dim.kind for dim in topology.dimensions)
        self._reductions = SwitchReductions(self.name, tuple(topology.dimensions) if self._fabric is None else ())
        self._own_speeds(topology)
        if self._fabric is not None and topology.link_changes:
            least = self._fabric.least_latency_ps()
        least = min([least, *(latency for _, latency in self._speeds.values())])
        if self._quantum:
            least -= least % self._quantum
        self._lookahead = max(1, least)
        stateless = (self._fabric is None and not self._speeds) or (self._fabric is not None and self._fabric.symmetric)
        # A switch or fully-connected dimension prices every pair of its positions alike (a ring does not).
        own = {key[0] for key in self._speeds}
        permutable = [i for i, dim in enumerate(self._dims) if dim.kind != _RING and i not in own]
        return network_pb2.NetworkInfo(
            npus=self._npus,
            lookahead_ps=self._lookahead,
            backend=self.name,
            stateless=stateless,
            permutable_dimensions=permutable,
        )

    def _own_speeds(self, topology: network_pb2.Topology) -> None:
        """Give the links the topology's changes name their own speed; refuse changes at a time and failures."""
        schedule = LinkSchedule(topology, self._fabric)
        schedule.refuse_later(self.name)
        self._speeds = schedule.speeds

    def _own_delay_ps(self, d: int, here: int, goal: int, size: int) -> int:
        """The delay of ``size`` bytes from NPU ``here`` to position ``goal`` of dimension ``d``, which has links of
        their own speed: the latencies of its links plus one serialisation at the slowest."""
        dim = self._dims[d]
        step = ring_step((here // dim.stride) % dim.size, goal, dim.size)
        nominal = (Fraction(dim.bw_num, dim.bw_den), dim.latency_ps)
        speeds = [
            self._speeds.get(key, nominal) for key in dimension_links(self._grid, self._kinds, d, here, goal, step)
        ]
        slowest = min(bandwidth for bandwidth, _ in speeds)
        ser = -(-(size * _PS_PER_S * slowest.denominator) // slowest.numerator)
        return sum(latency for _, latency in speeds) + ser

    def delays_ps(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Time from the start of sending ``sizes[i]`` bytes at ``src[i]`` to their arrival at ``dst[i]``."""
        if self._fabric is not None or self._speeds:  # routes differ pair by pair: price each (cached) message alone
            delays = (self.delay_ps(int(s), int(d), int(b)) for s, d, b in zip(src, dst, sizes))
            return np.fromiter(delays, dtype=np.int64, count=len(src))
        total = np.zeros(len(src), dtype=np.int64)
        unique_sizes, size_index = np.unique(sizes, return_inverse=True)
        priced = np.zeros(len(src), dtype=bool)  # messages priced already, with first_dimension_only
        for dim in self._dims:
            if dim.size == 1:
                continue
            src_coord = (src // dim.stride) % dim.size
            dst_coord = (dst // dim.stride) % dim.size
            moves = src_coord != dst_coord
            if self._first_only:
                moves &= ~priced
                priced |= moves
            if not moves.any():
                continue
            if dim.kind == _RING:
                distance = (dst_coord - src_coord) % dim.size
                hops = np.minimum(distance, dim.size - distance)
            else:
                hops = np.full(len(src), 2 if dim.kind == _SWITCH else 1, dtype=np.int64)
            serialisation = np.array([dim.serialisation_ps(int(b)) for b in unique_sizes], dtype=np.int64)
            total += np.where(moves, hops * dim.latency_ps + serialisation[size_index], 0)
        return total

    def delay_ps(self, src: int, dst: int, size: int) -> int:
        """One message's delay (the scalar twin of :meth:`delays_ps`, cached: small batches use it)."""
        key = (src, dst, size)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        total = 0
        if self._fabric is not None:
            route = self._fabric.route(src, dst)
            total = sum(link.latency_ps for link in route) + max(link.serialisation_ps(size) for link in route)
        own = {key[0] for key in self._speeds}
        here = src
        for d, dim in enumerate(self._dims):
            src_coord = (src // dim.stride) % dim.size
            dst_coord = (dst // dim.stride) % dim.size
            if src_coord == dst_coord:
                continue
            if d in own:
                total += self._own_delay_ps(d, here, dst_coord, size)
            elif dim.kind == _RING:
                distance = (dst_coord - src_coord) % dim.size
                total += min(distance, dim.size - distance) * dim.latency_ps + dim.serialisation_ps(size)
            else:
                total += (2 if dim.kind == _SWITCH else 1) * dim.latency_ps + dim.serialisation_ps(size)
            here += (dst_coord - src_coord) * dim.stride
            if self._first_only:
                break
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = total
        return total

    def inject(self, sends: network_pb2.SendBatch) -> None:
        if sends.reductions:
            sends, contributions = self._reductions.split(sends)
            for contribution in contributions:
                if contribution.sent_ps + self._lookahead <= self._now:
                    self._too_late(contribution.message, contribution.sent_ps)
                self._contribute(contribution)
        if not sends.id:
            return
        if len(sends.id) < _SMALL_BATCH:
            self._inject_few(sends)
            return
        ids = np.array(sends.id, dtype=np.int64)
        src = np.array(sends.src, dtype=np.int64)
        dst = np.array(sends.dst, dtype=np.int64)
        sent = np.array(sends.send_time_ps, dtype=np.int64)
        bad = (src >= self._npus) | (dst >= self._npus) | (src == dst)
        if bad.any():
            i = int(np.argmax(bad))
            self._reject(int(ids[i]), int(src[i]), int(dst[i]))
        late = sent + self._lookahead <= self._now
        if late.any():
            i = int(np.argmax(late))
            self._too_late(int(ids[i]), int(sent[i]))
        delays = self.delays_ps(src, dst, np.array(sends.bytes, dtype=np.int64))
        if self._quantum:
            delays -= delays % self._quantum
        arrival = sent + np.maximum(delays, self._lookahead)
        order = np.lexsort((ids, arrival))
        flows = np.array(sends.flow, dtype=np.int64) if sends.flow else np.zeros(len(ids), dtype=np.int64)
        self._runs.append((arrival[order], ids[order], flows[order]))

    def _inject_few(self, sends: network_pb2.SendBatch) -> None:
        """The scalar twin of :meth:`inject`, for a handful of messages."""
        npus, lookahead, now = self._npus, self._lookahead, self._now
        flows = sends.flow if sends.flow else repeat(0)
        for msg_id, src, dst, size, sent, flow in zip(
            sends.id, sends.src, sends.dst, sends.bytes, sends.send_time_ps, flows
        ):
            if src >= npus or dst >= npus or src == dst:
                self._reject(msg_id, src, dst)
            if sent + lookahead <= now:
                self._too_late(msg_id, sent)
            heapq.heappush(self._few, (sent + self.transit_ps(src, dst, size), msg_id, flow))

    def _contribute(self, contribution: Contribution) -> None:
        """Hold a contribution at its switch; once its reduction is complete, every member's result is on its way."""
        complete = self._reductions.add(contribution)
        if complete is not None:
            held = [(c.src, c.sent_ps, c.bytes, c.result_bytes) for c in complete]
            for member, arrival in zip(complete, self.reduction_arrivals_ps(contribution.dimension, held)):
                heapq.heappush(self._few, (arrival, member.message, 0))

    def reduction_arrivals_ps(self, dimension: int, contributions: Sequence[tuple[int, int, int, int]]) -> list[int]:
        """When each member's result of a complete reduction at the switch of ``dimension`` arrives, element i for
        ``contributions[i]`` = (its NPU, sending time, bytes up, result bytes down): the engine's direct mode asks
        this as the windowed :meth:`inject` does."""
        dim = self._dims[dimension]
        heads = [sent + dim.latency_ps for _, sent, _, _ in contributions]
        tails = [head + dim.serialisation_ps(up) for head, (_, _, up, _) in zip(heads, contributions)]
        arrivals = []
        for _, sent, _, down in contributions:
            _, tail = release_ps(heads, tails, dim.serialisation_ps(down))
            arrivals.append(max(tail + dim.latency_ps, sent + self._lookahead))
        return arrivals

    def transit_ps(self, src: int, dst: int, size: int) -> int:
        """How long a message takes from being sent to arriving: its delay, rounded down to the topology's
        quantum, and never less than the lookahead (see :class:`stratasim.kernel.contracts.DirectNetwork`)."""
        delay = self.delay_ps(src, dst, size)
        if self._quantum:
            delay -= delay % self._quantum
        return max(delay, self._lookahead)

    def transits_ps(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """:meth:`transit_ps` of many messages at once (int64 arrays, element i describing message i): how the
        engine prices a phase's messages together, and a server a remote engine's batch of sends, in one call."""
        bad = (src < 0) | (src >= self._npus) | (dst < 0) | (dst >= self._npus) | (src == dst)
        if bad.any():
            i = int(np.argmax(bad))
            self._reject(i, int(src[i]), int(dst[i]))
        if len(src) < _SMALL_BATCH:
            scalar = (self.delay_ps(int(s), int(d), int(b)) for s, d, b in zip(src, dst, sizes))
            delays = np.fromiter(scalar, dtype=np.int64, count=len(src))
        else:
            delays = self.delays_ps(src, dst, sizes)
        if self._quantum:
            delays -= delays % self._quantum
        return np.maximum(delays, self._lookahead)

    def _reject(self, msg_id: int, src: int, dst: int) -> NoReturn:
        raise BackendError(
            f"message {msg_id}: cannot send from NPU {src} to NPU {dst} on a network of {self._npus} NPUs"
        )

    def _too_late(self, msg_id: int, sent: int) -> NoReturn:
        raise BackendError(f"message {msg_id} sent at {sent} ps could arrive before the network's time {self._now} ps")

    def _next_arrival(self) -> int | None:
        first = min((int(times[0]) for times, _, _ in self._runs), default=None)
        if self._few and (first is None or self._few[0][0] < first):
            return self._few[0][0]
        return first

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        if until_ps < 0:
            first = self._next_arrival()
            until_ps = first + self._lookahead - 1 if first is not None else self._now
        due: list[tuple[int, int]] = []
        few = self._few
        while few and few[0][0] <= until_ps:
            due.append(heapq.heappop(few)[:2])
        due_times: list[np.ndarray] = []
        due_ids: list[np.ndarray] = []
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for times, ids, flows in self._runs:
            cut = int(np.searchsorted(times, until_ps, side="right"))
            if cut:
                due_times.append(times[:cut])
                due_ids.append(ids[:cut])
            if cut < len(times):
                kept.append((times[cut:], ids[cut:], flows[cut:]))
        self._runs = kept
        self._now = max(self._now, until_ps)
        result = network_pb2.AdvanceResult(window_end_ps=until_ps)
        if due_times:
            if due:
                due_times.append(np.array([time_ps for time_ps, _ in due], dtype=np.int64))
                due_ids.append(np.array([msg_id for _, msg_id in due], dtype=np.int64))
            times = np.concatenate(due_times)
            ids = np.concatenate(due_ids)
            order = np.lexsort((ids, times))
            result.deliveries.id.extend(ids[order].tolist())
            result.deliveries.time_ps.extend(times[order].tolist())
        elif due:  # popped from the heap in (time, id) order already
            result.deliveries.time_ps.extend(time_ps for time_ps, _ in due)
            result.deliveries.id.extend(msg_id for _, msg_id in due)
        following = self._next_arrival()
        if following is not None:
            result.has_next = True
            result.next_event_ps = following
        return result

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Take the messages of ``flow`` arriving after ``at_ps`` off: they are never delivered. Links hold no
        state here, so no other message's time changes (the analytical network shows no interference either way)."""
        if at_ps + self._lookahead <= self._now:
            raise BackendError(
                f"cancel at {at_ps} ps, before the network's committed time {self._now - self._lookahead} ps"
            )
        dropped: list[int] = []
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for times, ids, flows in self._runs:
            gone = (flows == flow) & (times > at_ps)
            dropped += ids[gone].tolist()
            if not gone.all():
                kept.append((times[~gone], ids[~gone], flows[~gone]))
        self._runs = kept
        dropped += [msg_id for time_ps, msg_id, of in self._few if of == flow and time_ps > at_ps]
        self._few = [arrival for arrival in self._few if not (arrival[2] == flow and arrival[0] > at_ps)]
        heapq.heapify(self._few)
        return network_pb2.CancelResult(id=sorted(dropped))

    def counters(self) -> network_pb2.LinkCounters:
        """None: this network does not model links."""
        return network_pb2.LinkCounters()

    def close(self) -> None:
        self._reductions.clear()
        self._runs.clear()
        self._few.clear()
