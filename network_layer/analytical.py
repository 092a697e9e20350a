"""The analytical, congestion-unaware network: every message takes latency plus size over bandwidth.

Links hold no state, so messages never wait for each other (unlimited concurrency, as in ASTRA-sim's
congestion-unaware backend). A message travels dimension by dimension in order (store-and-forward between
dimensions); in each dimension where source and destination differ it pays

- ring: the shortest ring distance (either direction) times the latency, plus one serialisation;
- fully connected: one latency plus one serialisation;
- switch: two latencies (up to the switch and down) plus one serialisation (cut-through).

Serialisation of ``b`` bytes at ``B`` bytes/s is ``ceil(b * 1e12 / B)`` ps, computed exactly; with a
``delay_quantum_ps`` in the topology each delay is then rounded down to a multiple of it. A message
takes at least 1 ps (an empty message over zero-latency links would otherwise arrive as it is sent).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from stratasim.errors import BackendError
from stratasim.topology import Grid, validate_topology
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
    """Congestion-unaware analytical network over Ring / FullyConnected / Switch dimensions.

    Arrival times are computed for a whole batch at once with numpy; pending arrivals are kept as sorted runs
    (one per injected batch) that ``advance`` merges, so the cost per window does not grow with Python loops
    over messages.
    """

    name = "analytical"

    def __init__(self) -> None:
        self._dims: list[_Dim] = []
        self._npus = 0
        self._lookahead = 1
        self._quantum = 0
        self._cache: dict[tuple[int, int, int], int] = {}
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []
        self._now = 0

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        validate_topology(topology)
        grid = Grid.of(topology)
        self._dims = [_Dim(dim, grid.stride(i)) for i, dim in enumerate(topology.dimensions)]
        self._cache.clear()
        self._npus = grid.npus
        self._quantum = max(0, topology.delay_quantum_ps)
        least = min((dim.least_delay_ps() for dim in self._dims if dim.size > 1), default=1)
        if self._quantum:
            least -= least % self._quantum
        self._lookahead = max(1, least)
        return network_pb2.NetworkInfo(
            npus=self._npus, lookahead_ps=self._lookahead, backend=self.name, stateless=True
        )

    def delays_ps(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Time from the start of sending ``sizes[i]`` bytes at ``src[i]`` to their arrival at ``dst[i]``."""
        total = np.zeros(len(src), dtype=np.int64)
        unique_sizes, size_index = np.unique(sizes, return_inverse=True)
        for dim in self._dims:
            if dim.size == 1:
                continue
            src_coord = (src // dim.stride) % dim.size
            dst_coord = (dst // dim.stride) % dim.size
            moves = src_coord != dst_coord
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
        for dim in self._dims:
            src_coord = (src // dim.stride) % dim.size
            dst_coord = (dst // dim.stride) % dim.size
            if src_coord == dst_coord:
                continue
            if dim.kind == _RING:
                distance = (dst_coord - src_coord) % dim.size
                hops = min(distance, dim.size - distance)
            else:
                hops = 2 if dim.kind == _SWITCH else 1
            total += hops * dim.latency_ps + dim.serialisation_ps(size)
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = total
        return total

    def inject(self, sends: network_pb2.SendBatch) -> None:
        if not sends.id:
            return
        ids = np.array(sends.id, dtype=np.int64)
        src = np.array(sends.src, dtype=np.int64)
        dst = np.array(sends.dst, dtype=np.int64)
        sent = np.array(sends.send_time_ps, dtype=np.int64)
        bad = (src >= self._npus) | (dst >= self._npus) | (src == dst)
        if bad.any():
            i = int(np.argmax(bad))
            raise BackendError(
                f"message {ids[i]}: cannot send from NPU {src[i]} to NPU {dst[i]} on a network of {self._npus} NPUs"
            )
        late = sent + self._lookahead <= self._now
        if late.any():
            i = int(np.argmax(late))
            raise BackendError(f"message {ids[i]} sent at {sent[i]} ps could arrive before the network's time {self._now} ps")
        if len(ids) < _SMALL_BATCH:  # numpy's fixed costs outweigh its speed on a handful of messages
            delays = np.array([self.delay_ps(*m) for m in zip(sends.src, sends.dst, sends.bytes)], dtype=np.int64)
        else:
            delays = self.delays_ps(src, dst, np.array(sends.bytes, dtype=np.int64))
        if self._quantum:
            delays -= delays % self._quantum
        arrival = sent + np.maximum(delays, self._lookahead)
        order = np.lexsort((ids, arrival))
        self._runs.append((arrival[order], ids[order]))

    def _next_arrival(self) -> int | None:
        return min((int(times[0]) for times, _ in self._runs), default=None)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        if until_ps < 0:
            first = self._next_arrival()
            until_ps = first + self._lookahead - 1 if first is not None else self._now
        due_times: list[np.ndarray] = []
        due_ids: list[np.ndarray] = []
        kept: list[tuple[np.ndarray, np.ndarray]] = []
        for times, ids in self._runs:
            cut = int(np.searchsorted(times, until_ps, side="right"))
            if cut:
                due_times.append(times[:cut])
                due_ids.append(ids[:cut])
            if cut < len(times):
                kept.append((times[cut:], ids[cut:]))
        self._runs = kept
        self._now = max(self._now, until_ps)
        result = network_pb2.AdvanceResult(window_end_ps=until_ps)
        if due_times:
            times = np.concatenate(due_times)
            ids = np.concatenate(due_ids)
            order = np.lexsort((ids, times))
            result.deliveries.id.extend(ids[order].tolist())
            result.deliveries.time_ps.extend(times[order].tolist())
        following = self._next_arrival()
        if following is not None:
            result.has_next = True
            result.next_event_ps = following
        return result

    def counters(self) -> network_pb2.LinkCounters:
        """None: this network does not model links."""
        return network_pb2.LinkCounters()

    def close(self) -> None:
        self._runs.clear()
