"""Collectives in flight: each is split into chunks, and each chunk runs its phases as messages.

A :class:`Collective` is one collective across its group (ASTRA-sim's "set"). On every NPU of the group it
is cut into ``splits`` chunks; a :class:`ChunkRun` is one chunk on one NPU, stepping through the phases of
its plan. Messages are addressed to the receiving NPU's ChunkRun, which keeps early arrivals (from peers that
are ahead) until it reaches the step they belong to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from stratasim.system_layer.collectives.algorithms import PhasePlan, Step
from stratasim.system_layer.collectives.groups import FLAT
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.scheduler.chunk_layout import Layout
from stratasim.system_layer.scheduler.ports import Clock

__all__ = ["Collective", "ChunkRun", "ChunkHost", "RunContext", "LineBatching"]


class LineBatching(Protocol):
    """Runs a phase for whole lines of NPUs at once, on a network that prices messages on the spot (the engine's
    :class:`~stratasim.system_layer.engine.line_batches.LineBatches`)."""

    def join(self, run: ChunkRun, plan: PhasePlan, line: tuple[int, ...], position: int, direction: int) -> bool:
        """Hand ``run``'s phase to the batch of its line; False when it must run message by message."""
        ...


class RunContext(Protocol):
    """What a chunk run reads of the schedulers' shared context
    (:class:`~stratasim.system_layer.scheduler.chunk_scheduler.SchedulerContext`)."""

    @property
    def coordinator(self) -> Clock: ...

    @property
    def options(self) -> SystemOptions: ...

    @property
    def stand_ins(self) -> tuple[int, ...] | None: ...

    @property
    def phase_replays(self) -> dict[tuple[object, ...], tuple[object, int, int]] | None: ...

    @property
    def line_batches(self) -> LineBatching | None: ...


class ChunkHost(Protocol):
    """What a chunk run asks of its NPU's scheduler
    (:class:`~stratasim.system_layer.scheduler.chunk_scheduler.NpuScheduler`): a run and its scheduler call each
    other, and this keeps their two modules from importing each other."""

    @property
    def context(self) -> RunContext: ...

    @property
    def reductions_cost(self) -> bool: ...

    def reduction_ps(self, size: int) -> int: ...

    def replayed_reductions(self, steps: tuple[Step, ...]) -> None: ...

    def phase_done(self, run: ChunkRun) -> None: ...

    def peer_scheduler(self, npu: int) -> ChunkHost: ...


class Collective:
    """One collective over a group of NPUs, with per-phase statistics summed over NPUs and chunks."""

    def __init__(
        self,
        collective_id: int,
        kind: str,
        size: int,
        group: tuple[int, ...],
        shape: Layout,
        options: SystemOptions,
        root: int = 0,
        communicator: str = "",
    ) -> None:
        self.id = collective_id
        self.root = root
        self.communicator = communicator  # the issuing node's communicator name (tp, dp...), "" when it has none
        self.kind = kind
        self.bytes = size
        self.group = group
        self.start_ps: int | None = None
        self.end_ps = 0
        self.first_issue = (
            0,
            0,
        )  # the NPU that issued it first and how many it had issued before (see CollectiveTable)
        self.number = collective_id  # its place in the result, in the order collectives started (set after the run)
        self.phases = shape.phases
        self.chunk_plans = shape.chunk_plans
        self.phase_collectives = shape.phase_collectives
        # Sums over NPUs, per chunk and phase: time waiting in the phase's queue, time running it, and count.
        chunks = len(shape.chunk_plans)
        self.queue_delay_sum = [[0] * len(self.phases) for _ in range(chunks)]
        self.network_delay_sum = [[0] * len(self.phases) for _ in range(chunks)]
        self.phase_runs = [[0] * len(self.phases) for _ in range(chunks)]
        self.runs: dict[int, list[ChunkRun]] = {}
        self.members_done = 0  # members of the group whose chunks have all finished (see NpuScheduler)
        self._offsets: dict[int, tuple[tuple[Step, ...], tuple[int, ...], int]] = {}

    def offsets(self, steps: tuple[Step, ...]) -> tuple[int, ...]:
        """Every peer offset ``steps`` send to, worked out once per plan rather than once per NPU (a ring plan
        is shared by all positions and has 2(n-1) steps)."""
        return self._summary(steps)[1]

    def sent_bytes(self, steps: tuple[Step, ...]) -> int:
        """The bytes ``steps`` send in all, worked out once per plan as :meth:`offsets` are."""
        return self._summary(steps)[2]

    def _summary(self, steps: tuple[Step, ...]) -> tuple[tuple[Step, ...], tuple[int, ...], int]:
        known = self._offsets.get(id(steps))
        if known is None or known[0] is not steps:
            offsets = tuple(sorted({o for step in steps for o in step.offsets}))
            known = self._offsets[id(steps)] = (
                steps,
                offsets,
                sum(step.bytes * (len(step.offsets) or step.at_switch) for step in steps),
            )
        return known

    def root_position(self, phase: int, npu: int) -> int | None:
        """For a broadcast or reduce: the root's position in ``npu``'s line in ``phase``, or None when the
        line sits the phase out.

        A broadcast runs its phases outermost dimension first, so in a phase only the lines that agree with
        the root in the dimensions of the later phases hold the data yet; a reduce runs innermost first, so
        only the lines that agree with the root in the dimensions of the earlier phases take part.
        """
        lines = self.phases[phase]
        if lines.dim == FLAT:
            return lines.members.index(self.root)
        others = self.phases[phase + 1 :] if self.kind == "broadcast" else self.phases[:phase]
        if any(other.coordinate(npu) != other.coordinate(self.root) for other in others):
            return None
        return lines.coords.index(lines.coordinate(self.root))

    def chunk_runs(self, npu: int, scheduler: ChunkHost) -> list[ChunkRun]:
        """The ChunkRuns of ``npu``, created on first use (a peer's message may create them early)."""
        runs = self.runs.get(npu)
        if runs is None:
            runs = [ChunkRun(self, npu, index, plans, scheduler) for index, plans in enumerate(self.chunk_plans)]
            self.runs[npu] = runs
        return runs

    def release(self) -> None:
        """Let go of the chunk runs once the simulation is over: runs and their collective refer to each other
        (and a run to itself, when it mirrors its own messages), so otherwise only Python's cyclic garbage
        collector would free them."""
        for runs in self.runs.values():
            for run in runs:
                run.release()
        self.runs.clear()


class ChunkRun:
    """One chunk of a collective on one NPU, moving through its phases step by step.

    Messages are counted per ``key = phase << 32 | tag``; ``key`` is what the current step waits for (-1
    when the run is not waiting: not started, reducing, or between phases).
    """

    __slots__ = (
        "collective",
        "npu",
        "index",
        "lane",
        "plans",
        "scheduler",
        "coordinator",
        "phase",
        "step",
        "key",
        "arrived",
        "enqueued_ps",
        "started_ps",
        "sent",
        "_costly",
        "_where",
        "_steps",
        "_only_peer",
        "_phase_key",
        "_replay_key",
        "on_message",
    )

    def __init__(
        self, collective: Collective, npu: int, index: int, plans: tuple[PhasePlan, ...], scheduler: ChunkHost
    ) -> None:
        self.collective = collective
        self.npu = npu
        self.index = index
        self.plans = plans
        self.scheduler = scheduler
        self.coordinator: Clock = scheduler.context.coordinator
        # The logical scheduling queue this chunk uses in every dimension; odd queues run rings backwards.
        self.lane = index % scheduler.context.options.queues_per_dim
        self.phase = -1
        self.step = 0
        self.key = -1
        self.arrived: dict[int, int] = {}
        self.enqueued_ps = 0
        self.started_ps = 0
        self.sent = 0  # bytes the current phase sends
        self._costly = scheduler.reductions_cost  # whether reducing received data may take time
        self._where: tuple[tuple[int, ...], int, int] = ((), 0, 1)  # the phase's line, position in it, direction
        self._steps: tuple[Step, ...] = ()
        self._only_peer: tuple[int, Callable[[int], None]] | None = None
        self._phase_key = 0
        self._replay_key: tuple[object, ...] | None = None
        # Its receive, bound once: messages keep it until they arrive, and a direct phase sends n-1 per step
        self.on_message: Callable[[int], None] = self.receive

    def release(self) -> None:
        """Drop the references to a peer (perhaps itself) kept for the phase and to itself (:attr:`on_message`);
        see :meth:`Collective.release`."""
        self._only_peer = None
        del self.on_message

    def start_phase(self) -> None:
        """Begin the current phase: send its first step, then consume any messages already waiting."""
        line, position = self.collective.phases[self.phase].line(self.npu)
        plan = self.plans[self.phase]
        if plan.rooted:
            root = self.collective.root_position(self.phase, self.npu)
            self._steps = () if root is None else plan.steps_for((position - root) % len(line))
        else:
            self._steps = plan.steps_for(position)
        direction = -1 if self.lane % 2 else 1
        self._phase_key = self.phase << 32
        self.sent = self.collective.sent_bytes(self._steps)
        self.step = -1
        self.started_ps = self.coordinator.now
        if plan.at_switch:  # a switch reduces: no line batches, no replays
            self._where, self._only_peer = (line, position, direction), None
            self._next_step()
            return
        batches = self.scheduler.context.line_batches
        if batches is not None and batches.join(self, plan, line, position, direction):
            return
        self._where = (line, position, direction)
        offsets = self.collective.offsets(self._steps)
        # Ring-like phases talk to one peer only: spare the hot path finding it step after step.
        only = self._peer(offsets[0]) if len(offsets) == 1 else None
        self._only_peer = (only[0], only[1].on_message) if only is not None else None
        replays = self.scheduler.context.phase_replays
        if replays is not None and all(self._peer(offset)[1].npu == self.npu for offset in offsets):
            key = (id(self._steps), direction, line, position, self.npu)
            known = replays.get(key)
            if known is not None and known[0] is self._steps:
                self._replay(known[1], known[2])
                return
            self._replay_key = key
        self._next_step()

    def _replay(self, duration_ps: int, sent: int) -> None:
        """Run the phase as its first identical run did: a mirrored phase on a network whose delays do not
        depend on traffic takes the same time whenever it starts (see :mod:`stratasim.system_layer.symmetry.stand_ins`)."""
        self.sent = sent
        self.step = len(self._steps)
        self.key = -1
        self.scheduler.replayed_reductions(self._steps)
        self.coordinator.schedule(self.coordinator.now + duration_ps, self._replayed)

    def _replayed(self, _: object = None) -> None:
        self.scheduler.phase_done(self)

    def batched_done(self, _: object = None) -> None:
        """The end of a phase worked out with its whole line (see :mod:`stratasim.system_layer.engine.line_batches`)."""
        self.scheduler.phase_done(self)

    def receive(self, key: int) -> None:
        """A message tagged ``key`` has arrived and passed this NPU's endpoint."""
        arrived = self.arrived
        if key != self.key:  # a peer ahead of us, or we are not waiting for it yet: keep it for later
            arrived[key] = arrived.get(key, 0) + 1
            return
        count = arrived.pop(key, 0) + 1 if arrived else 1
        step = self._steps[self.step]
        if count < step.need:
            arrived[key] = count
            return
        if count > step.need:
            arrived[key] = count - step.need
        if (step.delay_ps or (step.reduces and self._costly)) and self._wait_after(step):
            return
        self._next_step()

    def _wait_after(self, step: Step) -> bool:
        """If reducing the step's data or its own delay takes time, carry on once it is done and say so (only asked
        when the step has a delay or reductions may cost anything: ``_costly``)."""
        reduction_ps = self.scheduler.reduction_ps(step.reduced_bytes) if step.reduces and self._costly else 0
        wait_ps = reduction_ps + step.delay_ps
        if not wait_ps:
            return False
        self.key = -1
        self.coordinator.schedule(self.coordinator.now + wait_ps, self._next_step)
        return True

    def _next_step(self, _: object = None) -> None:
        """Send the next step and complete it at once if its messages are already here (or it needs none)."""
        steps = self._steps
        arrived = self.arrived
        while True:
            self.step += 1
            if self.step == len(steps):
                self.key = -1
                if self._replay_key is not None:
                    replays = self.scheduler.context.phase_replays
                    assert replays is not None
                    replays[self._replay_key] = (steps, self.coordinator.now - self.started_ps, self.sent)
                    self._replay_key = None
                self.scheduler.phase_done(self)
                return
            step = steps[self.step]
            key = self.key = self._phase_key | step.wait
            if step.offsets:
                only = self._only_peer
                if only is not None:  # the common case (rings), kept free of calls
                    self.coordinator.send(self.npu, only[0], step.bytes, only[1], self._phase_key | step.tag)
                else:
                    self._send_to_peers(step)
            elif step.at_switch:
                self._contribute(step)
            need = step.need
            count = arrived.pop(key, 0) if arrived else 0
            if count < need:
                if count:
                    arrived[key] = count
                return
            if count > need:
                arrived[key] = count - need
            if (step.delay_ps or (step.reduces and self._costly)) and self._wait_after(step):
                return

    def _contribute(self, step: Step) -> None:
        """Send this NPU's contribution to ``step``'s reduction at the switch of its line, or of ``step.switch_dim``
        over ``step.group`` of it (every member contributes; the switch sends each its result, the step's message)."""
        line, position, _ = self._where
        stride, count = step.group
        if count:
            block = stride * count
            first = position - position % block + position % stride
            line = line[first : first + block : stride]
        tag = self._phase_key | step.tag
        key = (id(self.collective), self.index, tag, line)
        dim = step.switch_dim if step.switch_dim >= 0 else self.collective.phases[self.phase].dim
        sizes = (step.bytes, step.result_bytes)
        stand_ins = self.scheduler.context.stand_ins  # members stood in for contribute through their stand-in
        members = len(line) if stand_ins is None else len({stand_ins[npu] for npu in line})
        self.coordinator.reduce(self.npu, key, members, dim, sizes, self.on_message, tag)

    def _peer(self, offset: int) -> tuple[int, ChunkRun]:
        """The NPU at ``offset`` along the phase's line and the run its messages go to (its stand-in's)."""
        line, position, direction = self._where
        peer = line[(position + direction * offset) % len(line)]
        stand_ins = self.scheduler.context.stand_ins
        stand_in = peer if stand_ins is None else stand_ins[peer]
        runs = self.collective.runs.get(stand_in)
        if runs is None:
            runs = self.collective.chunk_runs(stand_in, self.scheduler.peer_scheduler(stand_in))
        return peer, runs[self.index]

    def _send_to_peers(self, step: Step) -> None:
        """Send ``step`` to each of its peers, found as it goes (a direct phase has n-1 of them: keeping them all
        for the phase would hold a million pairs on 1024 NPUs)."""
        tag = self._phase_key | step.tag
        send = self.coordinator.send
        line, position, direction = self._where
        n = len(line)
        stand_ins = self.scheduler.context.stand_ins
        made = self.collective.runs
        for offset in step.offsets:
            peer = line[(position + direction * offset) % n]
            stand_in = peer if stand_ins is None else stand_ins[peer]
            runs = made.get(stand_in)
            if runs is None:
                runs = self.collective.chunk_runs(stand_in, self.scheduler.peer_scheduler(stand_in))
            send(self.npu, peer, step.bytes, runs[self.index].on_message, tag)
