"""A disaggregated serving run's KV moves in its replay: point-to-point sends between its replicas' NPUs.

Each KV move the standalone run made (:class:`~stratasim.workload_layer.serving.simulation.KvMoveRecord`) leaves
its prefill replica as the iteration that handed its requests off ends. In the replay it is what the loop's KV
transfer pricer simulated: its size rounded up as the pricer rounded it, cut into the same slices between the same
NPUs (:func:`~stratasim.kernel.serving.kv_slices`), each slice a send on its source NPU once that iteration's
part there has ended (its milestone; on an earlier pipeline stage its part of the iteration, so that stage's slices
leave before the last stage's, where the loop sends them all as the last stage ends) and a receive on its
destination NPU. The receives carry the move's milestone
(:func:`move_milestone`): the engine records the last of them over the destination's NPUs, when the move arrived, as
the pricer's price ends. The first iteration of the destination replica that batches any of the move's requests
(its :func:`consumers`) waits on each NPU for that NPU's receives, in place of the standalone wait for requests
when the move's arrival is what ended that wait (:meth:`KvMoves.waits`).

The standalone loop starts a move later when an earlier one still occupies its source or destination replica (it
queues them); the replay starts every move as its iteration ends and lets the network share the links instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from stratasim.kernel.serving import kv_slices
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.serving.pool_run import PoolRun

__all__ = ["KvMoves", "Slice", "add_moves", "move_milestone"]

Key = tuple[int, int]
"""An iteration of a run: its engine and its count among that engine's iterations (from 0)."""


def move_milestone(move: int) -> str:
    """The milestone of the ``move``-th KV move of a run (counted from 0), on its receives."""
    return f"kv move {move}"


@dataclass(frozen=True)
class Slice:
    """One end of a slice of KV move ``move`` on one NPU: its ``peer`` (a rank of the job), ``tag`` and bytes."""

    peer: int
    tag: int
    size: int
    move: int


class KvMoves:
    """The KV moves of ``run`` between the replicas ``replicas`` (engine i on the ranks ``replicas[i]``), by the
    iterations that send and consume them (module docstring), each ``quantised`` as its pricer priced it."""

    def __init__(
        self, run: PoolRun, replicas: Sequence[Sequence[int]] = (), quantised: Callable[[int], int] = int
    ) -> None:
        self.run, self.replicas, self.quantised = run, replicas, quantised
        ended: dict[tuple[int, int], int] = {}
        first: dict[tuple[int, int], int] = {}
        counts: dict[int, int] = {}
        for record in run.record:
            count = counts.get(record.engine, 0)
            counts[record.engine] = count + 1
            ended[record.engine, record.end_ps] = count
            for request in record.requests:
                first.setdefault((record.engine, request), count)
        self.sent: dict[Key, list[int]] = {}
        self.consumed: dict[Key, list[int]] = {}
        for index, move in enumerate(run.moves):
            self.sent.setdefault((move.source, ended[move.source, move.sent_ps]), []).append(index)
            counted = [first[key] for key in ((move.destination, r) for r in move.requests) if key in first]
            if counted:
                self.consumed.setdefault((move.destination, min(counted)), []).append(index)

    @cached_property
    def tags(self) -> list[int]:
        """Each move's first slice's place among every slice of the run, then how many slices there are."""
        tags = [0]
        for move in self.run.moves:
            tags.append(tags[-1] + max(len(self.replicas[move.source]), len(self.replicas[move.destination])))
        return tags

    def waits(self, key: Key, start_ps: int, ended_ps: int) -> bool:
        """Whether iteration ``key``, starting at ``start_ps`` standalone after its engine's previous one ended at
        ``ended_ps``, needs a wait before it in the replay: it started later, and not as the last of the moves it
        consumes arrived."""
        arrived = max((self.run.moves[move].arrival_ps for move in self.consumed.get(key, ())), default=-1)
        return start_ps > ended_ps and start_ps != arrived

    def sends(self, key: Key, position: int) -> list[Slice]:
        """What the ``position``-th rank of iteration ``key``'s replica sends once the iteration has ended."""
        return self._ends(self.sent.get(key, ()), position, sending=True)

    def receives(self, key: Key, position: int) -> list[Slice]:
        """What the ``position``-th rank of iteration ``key``'s replica receives before the iteration starts."""
        return self._ends(self.consumed.get(key, ()), position, sending=False)

    def slices(self) -> int:
        """The sends (as many as the receives) of every move, over every rank."""
        return self.tags[-1]

    def _ends(self, moves: Sequence[int], position: int, *, sending: bool) -> list[Slice]:
        """The slices of ``moves`` whose sending (else receiving) end is the ``position``-th rank of its replica,
        tagged by their places among every slice of the run."""
        ends = []
        for index in moves:
            move = self.run.moves[index]
            senders, receivers = self.replicas[move.source], self.replicas[move.destination]
            tag, size = self.tags[index], self.quantised(move.size)
            for k, (sender, receiver, part) in enumerate(kv_slices(size, len(senders), len(receivers))):
                mine, peer = (sender, receivers[receiver]) if sending else (receiver, senders[sender])
                if mine == position:
                    ends.append(Slice(peer, tag + k, part, index))
        return ends


def add_moves(
    graph: workload_pb2.ExecutionGraph, spans: Mapping[Key, tuple[int, int]], moves: KvMoves, position: int
) -> None:
    """Append to ``graph``, the ``position``-th rank of its replica, the KV moves of the replica's iterations:
    ``spans`` the ids of each iteration's first node on the rank (after any wait) and of its last (on a pipeline's
    last stage its milestone), by its engine and count; the sends after the last, the receives before the first
    (module docstring)."""
    for key, (first, last) in spans.items():
        for end in moves.sends(key, position):
            _message(graph.nodes, end, workload_pb2.COMM_SEND_NODE, name="kv cache", data_deps=[last])
        for end in moves.receives(key, position):
            received = _message(graph.nodes, end, workload_pb2.COMM_RECV_NODE, name=move_milestone(end.move))
            received.milestone = True
            graph.nodes[first].data_deps.append(received.id)


def _message(nodes: Any, end: Slice, kind: int, **fields: Any) -> workload_pb2.Node:
    """One end of a slice, added to ``nodes``."""
    added: workload_pb2.Node = nodes.add(
        id=len(nodes), type=kind, peer=end.peer, tag=end.tag, comm_bytes=end.size, pg_name="kv", **fields
    )
    return added
