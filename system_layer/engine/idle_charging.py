"""Idle compute time, charged to what it waited on: the part of :class:`~stratasim.system_layer.engine.executor.
NpuExecutor` that walks back from the node that ended an idle spell through the communication nodes that readied one
another."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.system_layer.engine.block_run import BlockRun
from stratasim.v1 import workload_pb2

if TYPE_CHECKING:
    from stratasim.kernel.events import EventQueue

__all__ = ["IdleCharging", "WAITED"]

WAITED = ""
"""The label :meth:`NpuExecutor.idle_charges` gives idle time a wait node caused: empty, which no communicator's
name is (a node without ``pg_name`` is labelled ``p2p``, ``collective`` or ``other``)."""


class IdleCharging:
    """Charges an NPU's idle compute stream to the communication (or wait) it waited on; mixed into the executor,
    whose state these attributes are."""

    _queue: EventQueue
    _idle_since: int
    _charging: bool
    _kinds: tuple[int, ...]
    _nodes: tuple[workload_pb2.Node, ...]
    _waits: dict[int, tuple[int, int]]
    runs: dict[int, BlockRun]
    exposed_ps: dict[str, int]
    exposed_at: dict[tuple[tuple[int, ...], str], int]
    waiting_ps: int

    def _charge_idle(self, cause: int) -> None:
        """The compute stream, idle since ``_idle_since``, has work again (or the graph is done) because
        ``cause`` finished: charge the idle time to what it waited on, walking back the chain of communication
        nodes that readied one another (a send waiting on a TP all-reduce is charged to both in turn); what a wait
        node caused is waiting, not exposed communication."""
        now = self._queue.now
        if now <= self._idle_since:  # no idle time to charge (a stream busy back to back)
            return
        for label, amount, where in self.idle_charges(cause, now, self._idle_since):
            if label == WAITED:
                self.waiting_ps += amount
            else:
                self.exposed_ps[label] = self.exposed_ps.get(label, 0) + amount
                if self._charging:
                    self.exposed_at[where, label] = self.exposed_at.get((where, label), 0) + amount

    def idle_charges(self, cause: int, end: int, idle_since: int) -> list[tuple[str, int, tuple[int, ...]]]:
        """What :meth:`_charge_idle` charges for the idle time from ``idle_since`` to ``end``, by label, in order
        (zero-length waits included: they name what was waited on); a block run whole charges as its nodes did.
        Each charge says where it falls: the position of the node charged (-1: none), or of a block node run whole
        followed by the position inside its block."""
        charges: list[tuple[str, int, tuple[int, ...]]] = []
        while end > idle_since:
            run = self.runs.get(cause) if self.runs else None
            if run is not None:
                if self._charging:
                    charges += [(label, amount, (cause, *inner)) for label, amount, inner in run.tail]
                else:  # where the block's charges fall inside it matters only to node times
                    charges += run.tail
                break
            wait = self._waits.get(cause)
            start = idle_since if wait is None else max(wait[0], idle_since)
            charges.append((self.label(cause) if wait is not None else "other", end - start, (cause,)))
            if wait is None:
                break
            end, cause = start, wait[1]
        return charges

    def label(self, index: int) -> str:
        """What a wait on node ``index`` counts as: :data:`WAITED` for a wait node, else its communicator's name,
        else ``p2p`` or ``collective``."""
        if index < 0:
            return "other"
        kind = self._kinds[index]
        if kind == workload_pb2.WAIT_NODE:
            return WAITED
        pg_name = self._nodes[index].pg_name
        if pg_name:
            return pg_name
        if kind in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
            return "p2p"
        return "collective" if kind == workload_pb2.COMM_COLL_NODE else "other"
