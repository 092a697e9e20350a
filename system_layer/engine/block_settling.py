"""What the blocks an NPU ran whole did, added up: the part of :class:`~stratasim.system_layer.engine.executor.
NpuExecutor` that counts a block run's collectives, idle time, bytes and reductions once per distinct run rather than
at every run."""

from __future__ import annotations

from collections import Counter

from stratasim.system_layer.engine.block_run import BlockRun
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler

__all__ = ["BlockSettling"]


class BlockSettling:
    """Settles the blocks run whole (by the id of each run finished, ``_runs_done``); mixed into the executor, whose
    state these attributes are."""

    _scheduler: NpuScheduler
    runs: dict[int, BlockRun]
    exposed_ps: dict[str, int]
    _runs_done: list[int]
    _issued_upto: int
    _run_of: dict[int, BlockRun]
    _issued: dict[tuple[int, ...], int]

    def _settle_issued(self) -> None:
        """Count the collectives the blocks run whole issued since the last call, by group: later collectives on
        these groups are matched by their number (:meth:`_issue`, the only reader, calls this first)."""
        if not self._run_of:
            self._run_of = {id(run): run for run in self.runs.values()}
        issued = self._issued
        for key, times in Counter(self._runs_done[self._issued_upto :]).items():
            for group, count in self._run_of[key].issued:
                issued[group] = issued.get(group, 0) + count * times
        self._issued_upto = len(self._runs_done)

    def settle_blocks(self) -> None:
        """Add what the blocks run whole did to this NPU's totals: idle time by cause, time with collectives
        in flight, bytes sent and reductions, once per run."""
        scheduler = self._scheduler
        runs = {id(run): run for run in self.runs.values()}
        for key, times in Counter(self._runs_done).items():
            run = runs[key]
            for label, amount in run.exposed:
                self.exposed_ps[label] = self.exposed_ps.get(label, 0) + amount * times
            scheduler.comm_ps += run.comm_ps * times
            for dim, size in run.bytes_sent:
                scheduler.bytes_sent[dim] = scheduler.bytes_sent.get(dim, 0) + size * times
            for size, count in run.reductions.items():
                scheduler.reductions[size] += count * times
        self._runs_done = []
        self._issued_upto = 0
