"""NPUs failing at a time (``system.failures``): the job holding a failed NPU stops there, the other jobs run on.

A job cannot go on without one of its NPUs: its collectives cannot complete (a real job crashes and restarts from its
last checkpoint, which the goodput model prices). So at a failure's time every NPU of the failed NPU's job (its graph's
``job``) stops: its executor and chunk scheduler do nothing more, the coordinator loses what they send and what is sent
to them, and the job's collectives in flight end there, unfinished. When that job is the study's only one, the run
itself stops there (:class:`~stratasim.kernel.events.RunStopped`), marked incomplete as an interrupted run is.

Messages the job sent before the failure and still on their way are taken off the network at the failure's time
(:meth:`~stratasim.kernel.contracts.NetworkBackend.cancel` of the job's flow): the links they held or queued for are
free from then on, so the other jobs speed up from the failure on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratasim.kernel.events import RunStopped
from stratasim.system_layer.engine.collective_table import CollectiveTable
from stratasim.system_layer.engine.coordinator import Coordinator
from stratasim.system_layer.engine.executor import NpuExecutor
from stratasim.system_layer.failures import NpuFailure
from stratasim.system_layer.result import FailureStats
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler
from stratasim.system_layer.scheduler.chunks import Collective
from stratasim.v1 import workload_pb2

__all__ = ["NpuFailures"]


class NpuFailures:
    """The study's NPU failures, scheduled on one simulation's engine; :attr:`stats` says what each did."""

    def __init__(self, failures: Sequence[NpuFailure], graphs: Sequence[workload_pb2.ExecutionGraph]) -> None:
        npus = len(graphs)
        self._failures = sorted({(entry.at, npu) for entry in failures for npu in entry.npus if npu < npus})
        self._job = [graph.job if graph.nodes else -1 for graph in graphs]  # -1: the NPU holds no work
        self._members: dict[int, list[int]] = {}
        for npu, job in enumerate(self._job):
            if job >= 0:
                self._members.setdefault(job, []).append(npu)
        self.stats: list[FailureStats] = []
        self.unfinished = 0  # collectives in flight when their job stopped
        self._coordinator: Coordinator | None = None
        self._executors: Mapping[int, NpuExecutor] = {}
        self._schedulers: Mapping[int, NpuScheduler] = {}
        self._table: CollectiveTable | None = None

    def wire(
        self,
        coordinator: Coordinator,
        executors: Mapping[int, NpuExecutor],
        schedulers: Mapping[int, NpuScheduler],
        table: CollectiveTable,
    ) -> None:
        """Schedule each failure on ``coordinator``, to stop the executors and schedulers of its job."""
        self._coordinator, self._executors, self._schedulers, self._table = coordinator, executors, schedulers, table
        coordinator.stopped = set()
        for at, npu in self._failures:
            coordinator.schedule(at, self._fail, npu)

    def _fail(self, npu: int) -> None:
        """``npu`` fails now: stop its job's NPUs that have work left (the run, when it is the only job)."""
        coordinator, table = self._coordinator, self._table
        assert coordinator is not None and table is not None
        now, job = coordinator.now, self._job[npu]
        members = self._members.get(job, [])
        left = [member for member in members if not self._executors[member].done]
        in_flight = _in_flight(table, set(members)) if left else []
        unfinished = "" if not in_flight else _described(in_flight[0])
        self.stats.append(FailureStats(npu, now, job, len(left), unfinished))
        if not left:
            return
        if len(self._members) == 1:
            said = f" (its {unfinished} could not complete)" if unfinished else ""
            raise RunStopped(f"stopped by the failure of NPU {npu}{said}")
        assert coordinator.stopped is not None
        coordinator.stopped.update(left)
        for member in left:
            self._executors[member].stop(now)
            self._schedulers[member].stop(now)
        for collective in in_flight:
            collective.end_ps = now
        self.unfinished += len(in_flight)
        coordinator.cancel(job)


def _in_flight(table: CollectiveTable, npus: set[int]) -> list[Collective]:
    """The collectives over ``npus`` started and not yet ended, in the order they were first issued."""
    return [c for c in table.all if c.start_ps is not None and not c.end_ps and c.group[0] in npus]


def _described(collective: Collective) -> str:
    """A collective as a warning names it: ``all_reduce on communicator dp`` (its kind alone without one)."""
    kind, communicator = collective.kind, collective.communicator
    return f"{kind} on communicator {communicator}" if communicator else kind
