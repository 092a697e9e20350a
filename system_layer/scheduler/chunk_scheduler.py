"""ASTRA-sim's chunk scheduler, one per NPU: a ready queue of chunks and logical scheduling queues.

When a collective is issued its chunks join the ready queue. The dispatcher moves the chunk chosen by the
policy (LIFO: the newest collective first; FIFO: the oldest) into the queue of its first phase while that
queue holds fewer than ``active_chunks`` chunks. Each dimension has ``queues_per_dim`` logical scheduling
queues (ASTRA-sim's LSQs, one per independent ring direction): chunk i uses queue ``i mod queues_per_dim``
in every dimension, and in an odd-numbered queue its ring runs the other way round. Each queue runs at most
``active_chunks`` chunks at once; a chunk that finishes a phase joins the queue of its next phase, so chunks
pipeline across dimensions.

Under ``preset: astra_compat`` the dispatcher follows ASTRA-sim 2.x instead (astra-sim 518bd51): its scheduler
unit admits every ready chunk into its first queue at once (Sys's ``active_first_phase`` and ``max_running`` are
10^8), and ``Sys::insert_stream`` places a chunk entering a queue behind every waiting chunk of equal or higher
priority (``Sys::get_priority``: a counter that rises with each collective under LIFO and falls under FIFO). So a
chunk coming back to dimension 0 for a later phase waits behind the new chunks already queued there: dimension 0
is kept busy with new chunks first.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from stratasim.system_layer.collectives.groups import FLAT
from stratasim.system_layer.options import Scheduling, SystemOptions
from stratasim.system_layer.scheduler.chunks import ChunkRun, Collective, LineBatching
from stratasim.system_layer.scheduler.reduction import ReductionCost
from stratasim.system_layer.trace import TraceRecorder

if TYPE_CHECKING:
    from stratasim.system_layer.collectives.steps import Step
    from stratasim.system_layer.scheduler.ports import Clock

__all__ = ["NpuScheduler", "SchedulerContext", "deadlock_cause"]


class SchedulerContext:
    """What every NPU's scheduler shares: the engine, the policies, the grid and the trace being recorded."""

    def __init__(
        self,
        coordinator: Clock,
        options: SystemOptions,
        reduction: ReductionCost,
        *,
        stand_ins: tuple[int, ...] | None = None,
        replay_phases: bool = False,
        trace: TraceRecorder | None = None,
        line_batches: LineBatching | None = None,
        node_times: bool = False,
    ) -> None:
        self.coordinator = coordinator
        self.options = options
        self.reduction = reduction
        self.stand_ins = stand_ins
        self.schedulers: dict[int, NpuScheduler] = {}
        # Mirrored phases already run once, by (steps, direction, line, position, NPU): their steps, duration
        # and bytes sent; kept only when message delays do not depend on traffic (None otherwise).
        self.phase_replays: dict[tuple[object, ...], tuple[object, int, int]] | None = {} if replay_phases else None
        self.reduced_sizes: dict[int, tuple[int, ...]] = {}  # the sizes a replayed phase reduces, by id(steps)
        self.trace = trace  # None: no trace is recorded
        self.line_batches = line_batches  # None: every phase runs message by message
        self.node_times = node_times  # whether executors and schedulers charge their time to nodes (see node_times)
        # Each group's collectives in the order its first member to start one started it: the others follow it.
        self.start_orders: dict[tuple[int, ...], list[int]] = {}


class NpuScheduler:
    """Schedules the chunks of every collective issued on one NPU."""

    def __init__(self, npu: int, context: SchedulerContext) -> None:
        self.npu = npu
        self.context = context
        self.reduction = context.reduction.of(npu)  # its own device's, when NPU groups run different devices
        self._ready: deque[deque[ChunkRun]] = deque()
        self._waiting: dict[tuple[int, int], deque[ChunkRun]] = {}
        self._active: dict[tuple[int, int], int] = {}
        self._chunks_left: dict[int, int] = {}
        self._on_done: dict[int, Callable[[], None]] = {}
        self._issued_ps: dict[int, int] = {}
        self._priority: dict[int, int] = {}  # ASTRA-sim's priority of each collective in flight (astra_compat)
        self._started: set[int] = set()  # collectives with a chunk dispatched here
        self._unfinished: dict[int, Collective] = {}  # issued here and not finished, by id
        self._running: Counter[int] = Counter()  # chunks holding a slot of a queue, by collective id
        self._place: dict[tuple[int, ...], int] = {}  # how far along its group's start order this NPU is
        semantics = context.options.semantics
        self._by_priority = semantics.dispatch_by_priority
        self._phase_end_delay = context.options.endpoint_delay if semantics.phase_ends_after_endpoint_delay else 0
        self._issued = 0
        self.in_flight = 0
        self.comm_ps = 0
        self.comm_at: dict[int, int] = {}  # comm_ps by the node that issued the oldest collective in flight
        self._charging = context.node_times  # whether comm_at is kept (off: no per-collective work for it)
        self._owners: dict[int, int] = {}  # the node (position in its NPU's plan) that issued each collective
        self._comm_mark = 0  # when comm_at was last charged
        self.reductions: Counter[int] = Counter()  # priced reductions run, by size in bytes
        self.bytes_sent: dict[int, int] = {}
        self._comm_since = 0
        self._stopped = False

    @property
    def reductions_cost(self) -> bool:
        """Whether reducing received data takes any time at all (it is free unless a cost model is set)."""
        return self.reduction.costs

    def reduction_ps(self, size: int) -> int:
        """Time to reduce ``size`` received bytes into the local buffer (see :mod:`stratasim.system_layer.scheduler.reduction`)."""
        if self.reduction.priced:
            self.reductions[size] += 1
        return self.reduction(size)

    def replayed_reductions(self, steps: tuple[Step, ...]) -> None:
        """Count the priced reductions of a phase replayed without running its steps."""
        if not self.reduction.priced:
            return
        sizes = self.context.reduced_sizes.get(id(steps))
        if sizes is None:  # phase replays keep their steps alive, so the id stays theirs
            sizes = self.context.reduced_sizes[id(steps)] = tuple(s.reduced_bytes for s in steps if s.reduces)
        self.reductions.update(sizes)

    def running(self) -> list[Collective]:
        """The collectives with a chunk holding a queue's slot here."""
        return [c for i, c in self._unfinished.items() if self._running[i]]

    def has_issued(self, collective: Collective) -> bool:
        """Whether ``collective`` was issued here and has not finished."""
        return collective.id in self._unfinished

    def peer_scheduler(self, npu: int) -> NpuScheduler:
        return self.context.schedulers[npu]

    def stand_in(self, npu: int) -> int:
        """The NPU simulated in ``npu``'s place: itself, or its representative when symmetric NPUs are
        aggregated (see :mod:`stratasim.system_layer.symmetry.stand_ins`)."""
        stand_ins = self.context.stand_ins
        return npu if stand_ins is None else stand_ins[npu]

    def issue(self, collective: Collective, on_done: Callable[[], None], owner: int = -1) -> None:
        """Start ``collective`` on this NPU; ``on_done()`` runs when all its chunks have finished here. ``owner`` is
        the node that issued it (its position in the NPU's plan), to which :attr:`comm_at` charges its time when the
        context asks for node times."""
        now = self.context.coordinator.now
        if collective.start_ps is None or now < collective.start_ps:
            collective.start_ps = now
        if not collective.phases:  # a group of one NPU: nothing to communicate
            collective.end_ps = max(collective.end_ps, now)
            on_done()
            return
        if self.in_flight == 0:
            self._comm_since = now
        if self._charging:
            self._charge_comm(now)
            self._owners[collective.id] = owner
        self.in_flight += 1
        runs = collective.chunk_runs(self.npu, self)
        self._chunks_left[collective.id] = len(runs)
        self._on_done[collective.id] = on_done
        self._issued_ps[collective.id] = now
        self._unfinished[collective.id] = collective
        self._issued += 1
        self._priority[collective.id] = (
            self._issued if self.context.options.scheduling is Scheduling.LIFO else -self._issued
        )
        for run in runs:
            run.enqueued_ps = now
        self._ready.append(deque(runs))
        self._dispatch()

    def _charge_comm(self, now: int) -> None:
        """Charge the time since the last charge, if a collective was in flight, to the node that issued the oldest
        one in flight: the charges of a stretch with collectives in flight sum to its length, as ``comm_ps`` counts."""
        if self._unfinished:
            owner = self._owners[next(iter(self._unfinished))]
            self.comm_at[owner] = self.comm_at.get(owner, 0) + now - self._comm_mark
        self._comm_mark = now

    def _dispatch(self) -> None:
        limit = self.context.options.active_chunks
        lifo = self.context.options.scheduling is Scheduling.LIFO
        while self._ready:
            chunks = self._ready[-1] if lifo else self._ready[0]
            if not self._by_priority:
                agreed = self._agreed(lifo)
                if agreed is None:
                    return
                chunks = agreed
            run = chunks[0]
            queue = (run.plans[0].dim, run.lane)
            if not self._by_priority and self._active.get(queue, 0) + len(self._waiting.get(queue, ())) >= limit:
                return
            chunks.popleft()
            if not chunks:
                if chunks is self._ready[-1]:
                    self._ready.pop()
                elif chunks is self._ready[0]:
                    self._ready.popleft()
                else:
                    self._ready.remove(chunks)  # the only empty one
            self._start(run.collective)
            run.phase = 0
            self._enter(run, queue)

    def _agreed(self, lifo: bool) -> deque[ChunkRun] | None:
        """The chunks of the collective the policy picks among those this NPU may start now; None when it may
        start none of them yet.

        A collective is started in the same order on every member of its group: the policy (LIFO, FIFO) chooses
        on the first member to start one, and the others start that one next when it is ready on them, as a
        real system's ranks agree which collective runs next (Horovod's coordinator, one stream per
        communicator). Chosen alone on each NPU, a rank made slower issues in another order, each NPU fills its
        ``active_chunks`` with a collective the other has not started, and neither can finish.
        """
        orders = self.context.start_orders
        for chunks in reversed(self._ready) if lifo else self._ready:
            collective = chunks[0].collective
            if collective.id in self._started:
                return chunks
            order = orders.get(collective.group, ())
            place = self._place.get(collective.group, 0)
            if place == len(order) or order[place] == collective.id:
                return chunks
        return None

    def _start(self, collective: Collective) -> None:
        """Count ``collective`` as started here, in its group's start order (first to start it: at the end)."""
        if collective.id in self._started:
            return
        self._started.add(collective.id)
        if self._by_priority:
            return
        order = self.context.start_orders.setdefault(collective.group, [])
        place = self._place.get(collective.group, 0)
        if place == len(order):
            order.append(collective.id)
        self._place[collective.group] = place + 1

    def _enter(self, run: ChunkRun, queue: tuple[int, int]) -> None:
        waiting = self._waiting.setdefault(queue, deque())
        if self._by_priority and waiting:  # Sys::insert_stream: behind every chunk of equal or higher priority
            priority = self._priority[run.collective.id]
            ahead = self._priority
            place = next((i for i, other in enumerate(waiting) if ahead[other.collective.id] < priority), len(waiting))
            waiting.insert(place, run)
        else:
            waiting.append(run)
        self._start_waiting(queue)

    def _start_waiting(self, queue: tuple[int, int]) -> None:
        limit = self.context.options.active_chunks
        waiting = self._waiting.get(queue)
        coordinator = self.context.coordinator
        while waiting and self._active.get(queue, 0) < limit:
            run = waiting.popleft()
            self._active[queue] = self._active.get(queue, 0) + 1
            self._running[run.collective.id] += 1
            run.collective.queue_delay_sum[run.index][run.phase] += coordinator.now - run.enqueued_ps
            run.start_phase()

    def phase_done(self, run: ChunkRun) -> None:
        """``run`` finished its current phase: move it on, and let waiting chunks take its place.

        Under ASTRA-sim's semantics a phase ends one endpoint delay after its last step.
        """
        if self._phase_end_delay:
            coordinator = self.context.coordinator
            coordinator.schedule(coordinator.now + self._phase_end_delay, self._leave_phase, run)
        else:
            self._leave_phase(run)

    def stop(self, now: int) -> None:
        """Stop at ``now`` (its NPU's job stopped): no chunk moves on from then, and the time with collectives in
        flight counts up to ``now``."""
        if self.in_flight:
            self.comm_ps += now - self._comm_since
            if self._charging:
                self._charge_comm(now)
            self.in_flight = 0
        self._stopped = True

    def _leave_phase(self, run: ChunkRun) -> None:
        if self._stopped:
            return
        now = self.context.coordinator.now
        collective = run.collective
        dim = run.plans[run.phase].dim
        collective.network_delay_sum[run.index][run.phase] += now - run.started_ps
        if run.sent:
            self.bytes_sent[dim] = self.bytes_sent.get(dim, 0) + run.sent
        collective.phase_runs[run.index][run.phase] += 1
        trace = self.context.trace
        if trace is not None and trace.nodes:
            trace.collective_span(
                self.npu,
                f"comm phase {run.phase} ({'flat' if dim == FLAT else f'dim {dim}'})",
                collective,
                f" chunk {run.index}",
                run.started_ps,
                now,
            )
        queue = (dim, run.lane)
        self._active[queue] -= 1
        self._running[collective.id] -= 1
        if run.phase + 1 < len(run.plans):
            run.phase += 1
            run.enqueued_ps = now
            self._enter(run, (run.plans[run.phase].dim, run.lane))
        else:
            self._chunk_done(collective, now)
        self._start_waiting(queue)
        self._dispatch()

    def _chunk_done(self, collective: Collective, now: int) -> None:
        left = self._chunks_left[collective.id] - 1
        self._chunks_left[collective.id] = left
        if left:
            return
        del self._chunks_left[collective.id]
        del self._priority[collective.id]
        self._started.discard(collective.id)
        if self._charging:
            self._charge_comm(now)
            del self._owners[collective.id]
        del self._unfinished[collective.id]
        del self._running[collective.id]
        collective.end_ps = max(collective.end_ps, now)
        collective.members_done += 1
        if collective.members_done == len(collective.group):  # every member is done: nothing reaches its runs now
            collective.release()  # the runs go (a million TP all-reduces would hold theirs); its statistics stay
        self.in_flight -= 1
        if self.in_flight == 0:
            self.comm_ps += now - self._comm_since
        if self.context.trace is not None:
            self.context.trace.collective_span(
                self.npu, "comm", collective, "", self._issued_ps.pop(collective.id), now
            )
        else:
            del self._issued_ps[collective.id]
        self._on_done.pop(collective.id)()


def deadlock_cause(schedulers: Mapping[int, NpuScheduler]) -> str:
    """Why the collectives in flight can go no further, naming the first one stuck and its ranks: members of its
    group that have not issued it, or that issued it but hold their chunk slots (``active_chunks``) with other
    collectives."""
    for npu in sorted(schedulers):
        for collective in schedulers[npu].running():
            members = [m for m in collective.group if m in schedulers]  # aggregated NPUs: their stand-ins
            behind = [m for m in members if collective not in schedulers[m].running()]
            if not behind:
                continue
            name = f"{collective.kind} #{collective.id} ({collective.bytes} bytes)"
            running = _npus([m for m in members if m not in behind])
            never = [m for m in behind if not schedulers[m].has_issued(collective)]
            if never:
                return f"{name} runs on NPUs {running}, but NPUs {_npus(never)} of its group never issue it"
            busy = sorted({c.id for m in behind for c in schedulers[m].running()})
            return (
                f"{name} runs on NPUs {running}, but NPUs {_npus(behind)} issued it and cannot run it: their chunk "
                f"slots (active_chunks) hold {', '.join(f'#{i}' for i in busy[:4])}, which NPUs {running} do not "
                "run (the ranks took these collectives in different orders"
                + (
                    ": ASTRA-sim 2.x's ranks order them alone, as preset astra_compat does; the default preset "
                    "agrees one order per group)"
                    if schedulers[npu]._by_priority
                    else ")"
                )
            )
    return "a collective some group members never issue?"


def _npus(npus: list[int]) -> str:
    return f"{npus[:8]}{'...' if len(npus) > 8 else ''}"
