"""Runs each NPU's execution graph: a node starts once its dependencies are done.

Compute nodes share the NPU's single compute stream (one at a time, in the order they became ready);
collective nodes go to the NPU's chunk scheduler and overlap with compute (given ``slow`` factors, compute runs
slower while any of the NPU's collectives is in flight: :mod:`stratasim.system_layer.engine.contention`). A send
node's message travels at once; the send and the peer's matching receive (same source and tag, first come first
served) complete when it arrives — a receive that becomes ready after its message arrived completes at once. The
k-th collective an NPU issues on a group is matched with the k-th one every other member issues on it, as NCCL
requires. Memory loads and stores queue on the NPU's memory channel (a copy over its host link, with the duration
its workload priced, too); metadata nodes take no time. A wait
node is done its ``duration_ps`` after it becomes ready and occupies nothing: the compute stream idle because of it
counts as waiting (``waiting_ps``), neither compute nor exposed communication.
"""

from __future__ import annotations

from collections import deque

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.events import EventQueue
from stratasim.kernel.graph_blocks import node_named
from stratasim.kernel.units import format_bytes
from stratasim.system_layer.engine.block_run import BlockRun, BlockTrace
from stratasim.system_layer.engine.block_settling import BlockSettling
from stratasim.system_layer.engine.collective_table import CollectiveTable
from stratasim.system_layer.engine.contention import Progress
from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.system_layer.engine.idle_charging import WAITED, IdleCharging
from stratasim.system_layer.engine.perturbation import ComputeSpeed
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler, SchedulerContext
from stratasim.system_layer.trace import WAITING_TRACK
from stratasim.v1 import workload_pb2

__all__ = ["NpuExecutor", "WAITED"]

_COMPUTE, _BLOCK, _RECEIVE = workload_pb2.COMP_NODE, workload_pb2.BLOCK_NODE, workload_pb2.COMM_RECV_NODE
_WAIT, _METADATA = workload_pb2.WAIT_NODE, workload_pb2.METADATA_NODE
_SEND, _MEM_LOAD, _MEM_STORE = workload_pb2.COMM_SEND_NODE, workload_pb2.MEM_LOAD_NODE, workload_pb2.MEM_STORE_NODE


class NpuExecutor(IdleCharging, BlockSettling):
    """One NPU working through its graph; records its compute time and finish time.

    ``slow`` (by node, like ``durations``; None: collectives never slow compute) says how many times longer each
    node takes while a collective of this NPU is in flight; ``queue`` is the coordinator's event queue, whose clock
    and ``schedule`` the hot path uses directly."""

    def __init__(
        self,
        npu: int,
        plan: GraphPlan,
        durations: tuple[int, ...],
        scheduler: NpuScheduler,
        table: CollectiveTable,
        context: SchedulerContext,
        slow: tuple[float, ...] | None = None,
        *,
        queue: EventQueue,
    ) -> None:
        self.npu = npu
        self.plan = plan
        self._durations = durations
        self._scheduler = scheduler
        self._table = table
        self._context = context
        self._queue = queue  # the coordinator's: its ``now`` and ``schedule`` read directly on the hot path
        self._kinds = plan.kinds
        self._nodes, self._dependents = plan.nodes, plan.dependents  # the plan's tables, read on the hot path
        self._allocations, self._releases, self._milestones = plan.allocations, plan.releases, plan.milestones
        self._on_sent = self._sent  # bound once: every pipeline send hands it to the coordinator
        self._coordinator = context.coordinator
        self._send_delay = context.options.semantics.endpoint_delay_on_sends
        self._indegree = plan.indegree
        self._remaining = list(plan.indegree)
        self._done_at = [-1] * len(plan.nodes)  # when each node completed (-1: not yet)
        self._compute_queue: deque[int] = deque()
        self._computing = False
        self._issued: dict[tuple[int, ...], int] = {}  # collectives issued by group (blocks': see _settle_issued)
        self._issued_upto = 0  # how many of _runs_done _issued counts
        self._run_of: dict[int, BlockRun] = {}  # the blocks run whole by id, once _settle_issued needs them
        self._groups = table.groups_of(plan)  # each collective node's group, once any NPU of the plan asked
        self._left = len(plan.nodes)
        self.peers: dict[int, NpuExecutor] = {}  # every simulated NPU's executor, for point-to-point messages
        self._p2p_sent: dict[int, int] = {}  # point-to-point bytes sent, by peer (dimensions worked out at the end)
        self._unclaimed: dict[tuple[int, int], int] = {}  # (source, tag) -> messages no receive took yet
        self._receiving: dict[tuple[int, int], deque[int]] = {}  # (source, tag) -> receive nodes waiting
        self.compute_ps = 0
        self.start_ps = 0
        self.finish_ps = 0
        self._idle_since = 0  # when the compute stream last ran dry
        self.exposed_ps: dict[str, int] = {}  # idle compute time by what it waited on (see _charge_idle)
        self.waiting_ps = 0  # idle compute time its wait nodes caused (see _charge_idle)
        self._charging = context.node_times  # whether time is charged to nodes (the four below; off: none kept)
        self.compute_at = [0] * len(plan.nodes) if self._charging else []  # compute_ps by node position
        self.exposed_at: dict[tuple[tuple[int, ...], str], int] = {}  # exposed_ps by (where, label): see idle_charges
        self.blocks_done: list[int] = []  # the position of each block node run whole that finished
        self._current = -1  # the compute node running now (not a block run whole)
        self._waits: dict[int, tuple[int, int]] = {}  # communication node -> (when it became ready, its cause)
        self._memory = 0  # bytes the graph's nodes hold now, on top of its resident memory
        self.peak_memory = 0
        self.peak_memory_ps = 0
        self.milestones: dict[str, int] = {}
        self._memory_channel_free = 0  # when the local-memory channel is next free (MEM_LOAD/STORE nodes)
        self.issued = 0  # collectives issued so far
        self.runs: dict[int, BlockRun] = {}  # block nodes run whole, by position (set before starting)
        self._runs_done: list[int] = []  # the id of each block run finished, for settle_blocks
        self.speed: ComputeSpeed | None = None  # slowed or varied compute (system.slowdown, variability)
        self.stopped = False  # stopped before its end (its job's NPU failed, or the run was stopped): does nothing
        self._compute_end = 0  # when the compute node running now ends (0 when a block run whole runs)
        self._slow = slow
        self._comms = 0  # collectives in flight, counted when ``slow`` is given
        self._progress: Progress | None = None  # the compute node running now, when ``slow`` is given
        self._plans = 0  # completion events planned so far: only the latest one of a node counts
        self._running, self._started = -1, 0  # the slowed node computing now, and when it started

    @property
    def done(self) -> bool:
        return self._left == 0 or self.stopped

    def stop(self, now: int) -> None:
        """Stop at ``now`` with work left: the node computing never finishes (its compute time counts up to
        ``now``), nothing more starts, and what still arrives is ignored; the NPU finishes at ``now``."""
        if self._computing and self._compute_end > now:
            self.compute_ps -= self._compute_end - now
            if self._charging:
                self.compute_at[self._current] -= self._compute_end - now
        self.stopped = True
        self.finish_ps = now

    def start(self, _: object = None) -> None:
        """Make every node without dependencies ready (an event callback, hence the unused argument): at time 0,
        or at its graph's ``start_ps`` (a job starting later), from when its idle time and finish count."""
        if self.stopped:  # its job stopped before it started
            return
        self.start_ps = self._idle_since = self.finish_ps = self._context.coordinator.now
        # The roots first, then readied: a node that completes at once (metadata) must not ready one twice.
        for index in [i for i, count in enumerate(self._remaining) if count == 0]:
            self._ready(index)

    def _ready(self, index: int, cause: int = -1) -> None:
        """``index`` has no dependency left; ``cause`` is the node whose completion made it so (-1: none)."""
        kind = self._kinds[index]
        if kind in (_BLOCK, _COMPUTE):  # a block run whole computes
            self._compute_queue.append(index)
            if not self._computing:
                if self._queue.now > self._idle_since:  # idle time to charge (none after a block run whole, mostly)
                    self._charge_idle(cause if cause < 0 or self._indegree[index] == 1 else self._cause(index, cause))
                self._next_compute()
            return
        node = self._nodes[index]
        if cause >= 0 and self._indegree[index] != 1:
            cause = self._cause(index, cause)
        self._waits[index] = (self._queue.now, cause)
        allocation = self._allocations.get(index)
        if allocation:
            self._allocate(allocation)
        if kind == _RECEIVE:
            self._receive(index, (node.peer, node.tag))
        elif kind == _SEND:
            peer, size = node.peer, node.comm_bytes
            self._p2p_sent[peer] = self._p2p_sent.get(peer, 0) + size
            self._coordinator.send(
                self.npu, peer, size, self._on_sent, (index, node.tag, peer), endpoint_delay=self._send_delay
            )
        elif kind == _WAIT:
            self._wait(index)
        elif kind == _METADATA:  # a record of the trace, not work
            self._complete(index)
        elif kind in (_MEM_LOAD, _MEM_STORE):
            self._memory_transfer(index, node)
        else:
            self._issue(index, node)

    def _issue(self, index: int, node: workload_pb2.Node) -> None:
        """Collective node ``index`` is ready: join its collective and hand it to the scheduler."""
        group = self._groups[index]
        if group is None:
            group = self._groups[index] = self._table.group(node)
        if len(self._runs_done) > self._issued_upto:
            self._settle_issued()
        issued = self._issued.get(group, 0)
        self._issued[group] = issued + 1
        collective = self._table.join(self.npu, node, group, issued, self.issued, self._queue.now)
        self.issued += 1
        if self._slow is None or not collective.phases:
            self._scheduler.issue(collective, lambda: self._complete(index), index)
            return
        self._comms_change(1)
        self._scheduler.issue(collective, lambda: self._collective_done(index), index)

    def _collective_done(self, index: int) -> None:
        """A collective counted as in flight is done: compute may run at full speed again."""
        self._comms_change(-1)
        self._complete(index)

    def _comms_change(self, step: int) -> None:
        """``step`` more collectives in flight (one more or one fewer): when that turns contention on or off,
        re-plan the end of the node computing now from the work it has left."""
        before = self._comms > 0
        self._comms += step
        progress = self._progress
        if before == (self._comms > 0) or progress is None or progress.factor == 1.0 or self.stopped:
            return  # no change of rate
        now = self._context.coordinator.now
        progress.advance(now, before)
        end = progress.end(not before)
        self.compute_ps += end - self._compute_end
        if self._charging:
            self.compute_at[self._running] += end - self._compute_end
        self._compute_end = end
        self._plans += 1
        self._context.coordinator.schedule(end, self._planned_done, (self._running, self._plans))

    def _wait(self, index: int) -> None:
        """Wait node ``index`` is ready: it is done its duration later, occupying nothing meanwhile."""
        coordinator = self._context.coordinator
        end = coordinator.now + self._durations[index]
        trace = self._context.trace
        if trace is not None and trace.nodes:
            trace.span(self.npu, WAITING_TRACK, self.plan.name(index), coordinator.now, end)
        coordinator.schedule(end, self._complete, index)

    def p2p_bytes_per_dim(self) -> tuple[tuple[int, int], ...]:
        """The point-to-point bytes this NPU sent, counted on every dimension a message crossed, by dimension."""
        per_dim: dict[int, int] = {}
        for peer, size in self._p2p_sent.items():
            for dim in self._table.grid.dims_between(self.npu, peer):
                per_dim[dim] = per_dim.get(dim, 0) + size
        return tuple(sorted(per_dim.items()))

    def _memory_transfer(self, index: int, node: workload_pb2.Node) -> None:
        """A load or store (node ``index``) between the NPU and a memory of its own: the transfers queue on one
        channel beside the compute stream, each taking the ``duration_ps`` it states (a copy over the NPU's host link
        its workload priced, such as a serving replica's KV swap) or else its ``comm_bytes`` at ``local_mem_bw``
        bytes/s (free when the study sets none)."""
        coordinator = self._context.coordinator
        bandwidth = self._context.options.local_mem_bw
        size = node.comm_bytes
        duration = node.duration_ps or (-(-size * 10**12 // bandwidth) if bandwidth else 0)
        start = max(coordinator.now, self._memory_channel_free)
        self._memory_channel_free = start + duration
        coordinator.schedule(start + duration, self._complete, index)

    def _sent(self, message: tuple[int, int, int]) -> None:
        """A point-to-point message of this NPU arrived (its send node, tag and peer): the send node is done, the
        peer may take it."""
        index, tag, peer = message
        self._complete(index)
        self.peers[peer].take(self.npu, tag)

    def take(self, source: int, tag: int) -> None:
        """A message from ``source`` tagged ``tag`` arrived: complete the oldest receive waiting for it."""
        waiting = self._receiving.get((source, tag))
        if waiting:
            self._complete(waiting.popleft())
        else:
            self._unclaimed[(source, tag)] = self._unclaimed.get((source, tag), 0) + 1

    def _receive(self, index: int, key: tuple[int, int]) -> None:
        if self._unclaimed.get(key):
            self._unclaimed[key] -= 1
            self._complete(index)
        elif key in self._receiving:
            self._receiving[key].append(index)
        else:
            self._receiving[key] = deque((index,))

    def _next_compute(self) -> None:
        queue = self._queue
        if not self._compute_queue:
            self._computing = False
            self._idle_since = queue.now
            return
        self._computing = True
        index = self._compute_queue.popleft()
        allocation = self._allocations.get(index)
        if allocation:
            self._allocate(allocation)
        run = self.runs.get(index) if self.runs else None
        if run is not None:  # a block run whole starts: its compute time and memory peak, as its nodes had them
            self._compute_end = 0
            self.compute_ps += run.compute_ps
            if run.peak is not None and self._memory + run.peak[0] > self.peak_memory:
                self.peak_memory = self._memory + run.peak[0]
                self.peak_memory_ps = queue.now + run.peak[1]
            queue.schedule(queue.now + run.duration_ps, self._block_done, index)
            return
        now = queue.now
        duration = self._durations[index]
        if self.speed is not None:
            duration = self.speed.duration(duration, now)
        if self._charging:
            self._current = index
        if self._slow is not None:
            self._start_slowed(index, duration)
            return
        self.compute_ps += duration
        if self._charging:
            self.compute_at[index] += duration
        trace = self._context.trace
        if trace is not None and trace.nodes:
            trace.span(self.npu, "compute", self.plan.name(index), now, now + duration)
        self._compute_end = now + duration
        queue.schedule(self._compute_end, self._compute_done, index)

    def _start_slowed(self, index: int, duration: int) -> None:
        """Start compute node ``index`` of ``duration`` ps at full speed, slowed while collectives run."""
        assert self._slow is not None
        now = self._context.coordinator.now
        self._progress = progress = Progress(duration, now, self._slow[index])
        self._running, self._started = index, now
        self._compute_end = progress.end(self._comms > 0)
        self.compute_ps += self._compute_end - now
        if self._charging:
            self.compute_at[index] += self._compute_end - now
        self._plans += 1
        self._context.coordinator.schedule(self._compute_end, self._planned_done, (index, self._plans))

    def _planned_done(self, planned: tuple[int, int]) -> None:
        """The end planned for a slowed node: the node is done unless a later plan replaced this one."""
        index, plan = planned
        if plan != self._plans or self.stopped:
            return
        self._progress = None
        trace = self._context.trace
        if trace is not None and trace.nodes:
            now = self._context.coordinator.now
            trace.span(self.npu, "compute", self.plan.name(index), self._started, now)
        self._compute_done(index)

    def _compute_done(self, index: int) -> None:
        if self.stopped:
            return
        self._complete(index)
        self._next_compute()

    def _block_done(self, index: int) -> None:
        """A block run whole is done: leave the compute stream as its nodes left it (idle since its last
        compute, if that ended before it), and complete the block node. What only adds up (idle time, bytes,
        collectives) is accounted once the simulation is over (:meth:`settle_blocks`)."""
        if self.stopped:
            return
        run = self.runs[index]
        start = self._queue.now - run.duration_ps
        if run.trace is not None and self._context.trace is not None:
            self._trace_block(run, run.trace, start, self.plan.name(index))
        self._memory += run.memory_delta
        self._table.replayed.append((start, self.npu, self.issued, run))
        self._runs_done.append(id(run))
        if self._charging:
            self.blocks_done.append(index)
        self.issued += len(run.collectives)
        if run.milestones:
            scope = self.plan.name(index)
            for name, time_ps in run.milestones:
                self.milestones[f"{scope} {name}"] = start + time_ps
        self._computing = False
        self._idle_since = start + run.idle_from_ps
        self._complete(index)

    def _trace_block(self, run: BlockRun, block: BlockTrace, start: int, scope: str) -> None:
        """Record a block run's spans and memory samples as its nodes would have, ``start`` ps in."""
        trace = self._context.trace
        assert trace is not None
        spans = block.spans
        named = (
            [self._table.named(self.npu, self.issued + i, stats.type) for i, stats in enumerate(run.collectives)]
            if spans.shows_collectives
            else []
        )
        trace.block_spans(self.npu, spans, start, scope, named)
        held = self._memory + sum(size for _, size in self.plan.resident)
        for time_ps, value in block.memory:
            trace.counter(self.npu, "memory", start + time_ps, held + value)

    def _complete(self, index: int) -> None:
        if self.stopped:
            return
        released = self._releases.get(index)
        if released:
            self._memory -= released
            # Only a trace's graph is checked: a block measured on its own (macros) counts from zero at its
            # start, so a backward block freeing what its forward block allocated rightly goes below zero.
            if self._memory < 0 and self.plan.foreign_names:
                self._freed_unallocated(index, released)
            self._sample_memory()
        now = self._queue.now
        if index in self._milestones:
            self.milestones[self.plan.name(index)] = now
        self._left -= 1
        if self._left == 0:
            self.finish_ps = now
            if not self._computing:
                self._charge_idle(index)
        self._done_at[index] = now
        remaining = self._remaining
        for dependent in self._dependents[index]:
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                self._ready(dependent, index)

    def _cause(self, index: int, last: int) -> int:
        """The dependency that readied ``index``, ``last`` done: of its dependencies done at this time, the first
        by position, so that idle time is charged alike whatever order same-time events ran in (a stand-in's run and
        every NPU's agree). Asked only where the cause is kept (a compute node's on an idle stream, a communication
        node's), not on the hot path of a compute node queued behind another."""
        if last < 0 or self._indegree[index] == 1:
            return last
        now, done = self._queue.now, self._done_at
        return min((dep for dep in self.plan.dependencies[index] if done[dep] == now), default=last)

    def _freed_unallocated(self, index: int, released: int) -> None:
        """Refuse a node freeing more than the graph's nodes hold (memory no node allocated: a trace's nonsense)."""
        node = self.plan.nodes[index]
        raise WorkloadError(
            f"NPU {self.npu} node {node.id}{node_named(node, self.plan.foreign_names)}: frees "
            f"{format_bytes(released)} (memory_bytes) when the nodes before it hold {format_bytes(self._memory + released)}: "
            "memory no node allocated"
        )

    def _allocate(self, size: int) -> None:
        self._memory += size
        if self._memory > self.peak_memory:
            self.peak_memory = self._memory
            self.peak_memory_ps = self._context.coordinator.now
        self._sample_memory()

    def _sample_memory(self) -> None:
        """Record what the NPU holds now, for the trace's memory counter."""
        trace = self._context.trace
        if trace is not None:
            held = self._memory + sum(size for _, size in self.plan.resident)
            trace.counter(self.npu, "memory", self._context.coordinator.now, held)
