"""Collectives in flight: each is split into chunks, and each chunk runs its phases as messages.

A :class:`Collective` is one collective across its group (ASTRA-sim's "set"). On every NPU of the group it
is cut into ``splits`` chunks; a :class:`ChunkRun` is one chunk on one NPU, stepping through the phases of
its plan. Messages are addressed to the receiving NPU's ChunkRun, which keeps early arrivals (from peers that
are ahead) until it reaches the step they belong to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from system_layer.algorithms import PhasePlan, Step, phase_data_bytes, plan_phase
from system_layer.options import SystemOptions

if TYPE_CHECKING:
    from system_layer.coordinator import Coordinator
    from system_layer.scheduler import NpuScheduler

__all__ = ["Collective", "ChunkRun", "split_bytes"]


def split_bytes(total: int, splits: int) -> list[int]:
    """Cut ``total`` bytes into ``splits`` chunks whose sizes differ by at most one byte."""
    base, extra = divmod(total, splits)
    return [base + (1 if i < extra else 0) for i in range(splits)]


class Collective:
    """One collective over a group of NPUs, with per-phase statistics summed over NPUs and chunks."""

    def __init__(
        self,
        collective_id: int,
        kind: str,
        size: int,
        group: tuple[int, ...],
        dims: list[tuple[int, int]],
        options: SystemOptions,
    ) -> None:
        self.id = collective_id
        self.kind = kind
        self.bytes = size
        self.group = group
        self.start_ps: int | None = None
        self.end_ps = 0
        self.chunk_plans = [self._plan(chunk, dims, options) for chunk in split_bytes(size, options.splits)]
        phases = len(dims)
        self.queue_delay_sum = [0] * phases
        self.network_delay_sum = [0] * phases
        self.phase_runs = [0] * phases
        self.runs: dict[int, list[ChunkRun]] = {}

    def _plan(self, chunk: int, dims: list[tuple[int, int]], options: SystemOptions) -> tuple[PhasePlan, ...]:
        sizes = [size for _, size in dims]
        return tuple(
            plan_phase(
                self.kind, options.algorithm_for(self.kind, dim), dim, size, phase_data_bytes(self.kind, chunk, sizes, p)
            )
            for p, (dim, size) in enumerate(dims)
        )

    def chunk_runs(self, npu: int, scheduler: NpuScheduler) -> list[ChunkRun]:
        """The ChunkRuns of ``npu``, created on first use (a peer's message may create them early)."""
        runs = self.runs.get(npu)
        if runs is None:
            runs = [ChunkRun(self, npu, index, plans, scheduler) for index, plans in enumerate(self.chunk_plans)]
            self.runs[npu] = runs
        return runs


class ChunkRun:
    """One chunk of a collective on one NPU, moving through its phases step by step.

    Messages are counted per ``key = phase << 32 | step``; ``key`` is the step this run is waiting for.
    """

    __slots__ = ("collective", "npu", "index", "plans", "scheduler", "coordinator", "phase", "step", "key",
                 "arrived", "running", "enqueued_ps", "started_ps", "_peers", "_steps", "_only_peer")

    def __init__(
        self, collective: Collective, npu: int, index: int, plans: tuple[PhasePlan, ...], scheduler: NpuScheduler
    ) -> None:
        self.collective = collective
        self.npu = npu
        self.index = index
        self.plans = plans
        self.scheduler = scheduler
        self.coordinator: Coordinator = scheduler.context.coordinator
        self.phase = -1
        self.step = 0
        self.key = -1
        self.running = False
        self.arrived: dict[int, int] = {}
        self.enqueued_ps = 0
        self.started_ps = 0
        self._peers: dict[int, tuple[int, ChunkRun]] = {}
        self._steps: tuple[Step, ...] = ()
        self._only_peer: tuple[int, Callable[[int], None]] | None = None

    def start_phase(self) -> None:
        """Begin the current phase: send its first step, then consume any messages already waiting."""
        plan = self.plans[self.phase]
        stride = self.scheduler.stride(plan.dim)
        position = (self.npu // stride) % plan.size
        self._peers = {}
        for offset in {offset for step in plan.steps for offset in step.offsets}:
            peer = self.npu + ((position + offset) % plan.size - position) * stride
            runs = self.collective.chunk_runs(peer, self.scheduler.peer_scheduler(peer))
            self._peers[offset] = (peer, runs[self.index])
        # Ring-like phases talk to one peer only: spare the hot path its dictionary look-up.
        only = next(iter(self._peers.values())) if len(self._peers) == 1 else None
        self._only_peer = (only[0], only[1].receive) if only is not None else None
        self._steps = plan.steps
        self.running = True
        self.step = 0
        self.key = self.phase << 32
        self.started_ps = self.coordinator.now
        self._send_step()
        self.progress()

    def _send_step(self) -> None:
        step = self._steps[self.step]
        if self._only_peer is not None:
            peer, receive = self._only_peer
            self.coordinator.send(self.npu, peer, step.bytes, receive, self.key)
            return
        key = self.key
        send = self.coordinator.send
        peers = self._peers
        for offset in step.offsets:
            peer, target = peers[offset]
            send(self.npu, peer, step.bytes, target.receive, key)

    def receive(self, key: int) -> None:
        """A message of step ``key`` has arrived and passed this NPU's endpoint."""
        arrived = self.arrived
        if key != self.key:  # a peer ahead of us (or we are not running this phase yet): keep it for later
            arrived[key] = arrived.get(key, 0) + 1
            return
        count = arrived.pop(key, 0) + 1 if arrived else 1
        self._consume(count)

    def progress(self) -> None:
        """Complete the current step if its messages have all arrived already (then the next ones, and so on)."""
        arrived = self.arrived
        if arrived and self.key in arrived:
            self._consume(arrived.pop(self.key))

    def _consume(self, count: int) -> None:
        """``count`` messages of the current step are here (none of them left in ``arrived``)."""
        arrived = self.arrived
        steps = self._steps
        while True:
            need = steps[self.step].need
            if count < need:
                arrived[self.key] = count
                return
            if count > need:
                arrived[self.key] = count - need
            self.step += 1
            if self.step == len(steps):
                self.running = False
                self.key = -1
                self.scheduler.phase_done(self)
                return
            self.key += 1
            self._send_step()
            count = arrived.pop(self.key, 0) if arrived else 0
            if not count:
                return
