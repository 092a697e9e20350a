"""Disaggregated serving's KV-cache moves, priced by the study's network through the system layer.

Pools sit on consecutive, disjoint NPU ranges in the order the study lists them, a replica on ``tp * pp``
consecutive NPUs. A request's KV cache (``2 layers kv_heads head_size`` elements per cached token, from the model)
is split evenly over its prefill replica's NPUs; it moves as point-to-point sends, cut into ``max(n_src, n_dst)``
equal slices, slice ``k`` going from the source replica's NPU ``k mod n_src`` to the destination's ``k mod n_dst``
(the same TP/PP plan on both sides pairs NPU ``i`` with NPU ``i``). The moves one prefill iteration starts
(bundled per destination replica) are simulated together, so they share links — on the congestion-aware or
flit-level backends they slow each other where they cross the same ones; each move ends when the last of its
destination's NPUs has received its slices. Moves started at different instants are priced apart; the serving
simulation queues them at the replicas they share (a move starts once its source has sent and its destinations have
received the earlier ones), so they do not overlap on a replica's links. Each bundle's size is rounded up by at most
1/32 (:func:`quantised`) so prices are shared.
"""

from __future__ import annotations

from stratasim.study.network_sessions import NetworkSessions
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

__all__ = ["NetworkKvTransfer", "replica_npus", "quantised"]


def quantised(size: int) -> int:
    """``size`` rounded up to a multiple of 1/32 of the power of two at or below it (at most 3.1 % more), so
    that messages whose sizes follow every token count share a few hundred prices."""
    step = max((1 << (size.bit_length() - 1)) // 32, 1) if size > 0 else 1
    return -(-size // step) * step


def replica_npus(workload: ServingRequestsWorkload) -> list[range]:
    """The NPUs of every replica, numbered across the pools in order (module docstring)."""
    ranges = []
    for first, pool in zip(workload.first_npus(), workload.config.pools, strict=True):
        size = pool.parallelism.tp * pool.parallelism.pp
        ranges += [range(first + replica * size, first + (replica + 1) * size) for replica in range(pool.replicas)]
    return ranges


class NetworkKvTransfer:
    """A :class:`~stratasim.workload_layer.serving.simulation.KvTransferPricer` over the study's network: the KV
    moves one prefill replica starts at once, simulated as point-to-point sends (module docstring), cached by
    their replicas and quantised sizes."""

    def __init__(self, workload: ServingRequestsWorkload, network: NetworkSessions) -> None:
        self._network = network
        self._npus = replica_npus(workload)
        self._per_token = workload.kv_bytes_per_token()
        self._prices: dict[tuple[int, tuple[tuple[int, int], ...]], tuple[int, ...]] = {}

    def __call__(self, source: int, moves: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
        """Picoseconds until each ``(destination replica, tokens)`` move from replica ``source`` has arrived."""
        sized = tuple((destination, quantised(tokens * self._per_token)) for destination, tokens in moves)
        key = (source, sized)
        if key not in self._prices:
            self._prices[key] = self._simulate(source, sized)
        return self._prices[key]

    @property
    def distinct(self) -> int:
        """Distinct sets of moves simulated so far."""
        return len(self._prices)

    def _simulate(self, source: int, moves: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
        """Every slice of ``moves`` (destination, bytes) as a send and its receive, all at time 0."""
        top = max(max(self._npus[source]), *(max(self._npus[destination]) for destination, _ in moves))
        graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(top + 1)]
        senders, tag = self._npus[source], 0
        for destination, size in moves:
            receivers = self._npus[destination]
            slices = max(len(senders), len(receivers))
            for k in range(slices):
                part = size // slices + (k < size % slices)
                src, dst = senders[k % len(senders)], receivers[k % len(receivers)]
                graphs[src].nodes.add(
                    id=len(graphs[src].nodes),
                    name="kv cache",
                    type=workload_pb2.COMM_SEND_NODE,
                    peer=dst,
                    tag=tag,
                    comm_bytes=part,
                    pg_name="kv",
                )
                graphs[dst].nodes.add(
                    id=len(graphs[dst].nodes),
                    name="kv cache",
                    type=workload_pb2.COMM_RECV_NODE,
                    peer=src,
                    tag=tag,
                    comm_bytes=part,
                    pg_name="kv",
                )
                tag += 1
        result = self._network.simulate(graphs)
        finish = {npu.npu: npu.finish_ps for npu in result.per_npu}
        return tuple(
            max(finish.get(npu, result.total_time_ps) for npu in self._npus[destination]) for destination, _ in moves
        )
