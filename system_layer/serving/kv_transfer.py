"""Disaggregated serving's KV-cache moves, priced by the network through the system layer.

Each replica runs on NPUs of its own, ``tp * pp`` of them (consecutive in a serving study, where pools sit on
consecutive, disjoint NPU ranges in the order the study lists them; wherever its job was placed in a study of several
jobs). A request's KV cache (``2 layers kv_heads head_size`` elements per cached token, from the model)
is split evenly over its prefill replica's NPUs; it moves as point-to-point sends, cut into ``max(n_src, n_dst)``
equal slices, slice ``k`` going from the source replica's NPU ``k mod n_src`` to the destination's ``k mod n_dst``
(:func:`~stratasim.kernel.serving.kv_slices`: the same TP/PP plan on both sides pairs NPU ``i`` with NPU ``i``). The moves one prefill iteration starts
(bundled per destination replica) are simulated together, so they share links — on the congestion-aware or
flit-level backends they slow each other where they cross the same ones; each move ends when the last of its
destination's NPUs has received its slices. Moves started at different instants are priced apart; the serving
simulation queues them at the replicas they share (a move starts once its source has sent and its destinations have
received the earlier ones), so they do not overlap on a replica's links. Each bundle's size is rounded up by at most
1/32 (:func:`quantised`) so prices are shared.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.kernel.serving import KvMove, kv_slices
from stratasim.system_layer.serving.graphs import add_message
from stratasim.system_layer.serving.sessions import NetworkSessions
from stratasim.v1 import workload_pb2

__all__ = ["NetworkKvTransfer", "quantised"]


def quantised(size: int) -> int:
    """``size`` rounded up to a multiple of 1/32 of the power of two at or below it (at most 3.1 % more), so
    that messages whose sizes follow every token count share a few hundred prices."""
    step = max((1 << (size.bit_length() - 1)) // 32, 1) if size > 0 else 1
    return -(-size // step) * step


class NetworkKvTransfer:
    """A :class:`~stratasim.kernel.serving.KvTransferPricer` over ``network``, replica ``i`` on NPUs ``replicas[i]``:
    the KV moves one prefill replica starts at once, simulated as point-to-point sends (module docstring), cached
    by their replicas and quantised sizes."""

    def __init__(self, network: NetworkSessions, replicas: Sequence[Sequence[int]]) -> None:
        self._network = network
        self._npus = [tuple(npus) for npus in replicas]
        self._prices: dict[tuple[int, tuple[tuple[int, int], ...]], tuple[int, ...]] = {}

    def __call__(self, source: int, moves: tuple[KvMove, ...]) -> tuple[int, ...]:
        """Picoseconds until each move from replica ``source`` has arrived."""
        sized = tuple((move.destination, quantised(move.size)) for move in moves)
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
            for sender, receiver, part in kv_slices(size, len(senders), len(receivers)):
                src, dst = senders[sender], receivers[receiver]
                add_message(graphs[src], "kv cache", workload_pb2.COMM_SEND_NODE, dst, tag, part, "kv")
                add_message(graphs[dst], "kv cache", workload_pb2.COMM_RECV_NODE, src, tag, part, "kv")
                tag += 1
        result = self._network.simulate(graphs)
        finish = {npu.npu: npu.finish_ps for npu in result.per_npu}
        return tuple(
            max(finish.get(npu, result.total_time_ps) for npu in self._npus[destination]) for destination, _ in moves
        )
