"""Runs each NPU's execution graph: a node starts once its dependencies are done.

Compute nodes share the NPU's single compute stream (one at a time, in the order they became ready);
collective nodes go to the NPU's chunk scheduler and overlap with compute. A send node's message travels
at once; the send and the peer's matching receive (same source and tag, first come first served) complete
when it arrives — a receive that becomes ready after its message arrived completes at once. The k-th
collective an NPU issues on a group is matched with the k-th one every other member issues on it, as NCCL
requires. Memory loads and stores queue on the NPU's local-memory channel; metadata nodes take no time.
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

from stratasim.kernel.collective_types import COLLECTIVE_NAMES
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import Grid
from stratasim.system_layer.collective_log import CollectiveLog
from stratasim.system_layer.collectives.chunks import Collective, Layout, layout
from stratasim.system_layer.collectives.groups import phases_of
from stratasim.system_layer.engine.block_run import BlockRun, BlockTrace
from stratasim.system_layer.engine.collective_stats import collective_stats
from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.system_layer.options import Preset, SystemOptions
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler, SchedulerContext
from stratasim.v1 import workload_pb2

__all__ = ["CollectiveTable", "NpuExecutor"]

_COMPUTE, _BLOCK, _RECEIVE = workload_pb2.COMP_NODE, workload_pb2.BLOCK_NODE, workload_pb2.COMM_RECV_NODE


class _Group(tuple[int, ...]):
    """A communicator group's sorted members that hashes in constant time: the tuple's hash, worked out once.

    Python recomputes a tuple's hash on every look-up, and on every-NPU runs each of thousands of NPUs looks its
    group up (a 16384-member group per NPU costs seconds); interned once per distinct group
    (:meth:`CollectiveTable.group`), every look-up then finds the very object and compares nothing further.
    It equals, and hashes as, the plain tuple of the same members."""

    _hash: int

    def __new__(cls, members: list[int]) -> _Group:
        group = super().__new__(cls, members)
        group._hash = tuple.__hash__(group)
        return group

    def __hash__(self) -> int:
        return self._hash


def _root(node: workload_pb2.Node, group: tuple[int, ...], npu: int) -> int:
    """The root of a broadcast or reduce: the node's, else the group's lowest NPU; it must be in the group."""
    if not node.HasField("root"):
        return group[0]
    if node.root not in group:
        raise WorkloadError(f"NPU {npu} node {node.id}: root NPU {node.root} is not in the collective's group")
    return node.root


class CollectiveTable:
    """Matches the collectives issued by different NPUs into shared :class:`Collective` instances."""

    def __init__(self, grid: Grid, options: SystemOptions, npus: int) -> None:
        self._grid = grid
        self._options = options
        self._everyone = _Group(list(range(npus)))
        self._open: dict[tuple[tuple[int, ...], int], Collective] = {}
        self._interned: dict[tuple[int, ...], _Group] = {self._everyone: self._everyone}
        self._plan_groups: dict[int, tuple[GraphPlan, list[_Group | None]]] = {}
        self._layouts: dict[tuple[str, int, tuple[int, ...]], Layout] = {}
        self.all: list[Collective] = []
        # Collectives run inside blocks run whole (:mod:`stratasim.system_layer.engine.macros`): their statistics
        # from the block's first run, with the start time, NPU and issue number of this run.
        self.replayed: list[tuple[int, int, int, BlockRun]] = []  # start, NPU, issue number of its first, the run
        self._named: dict[tuple[int, int], _Named] = {}  # replayed collectives a trace names, by NPU and issue number

    def groups_of(self, plan: GraphPlan) -> list[_Group | None]:
        """Per node of ``plan``, its group once :meth:`group` has been asked for it (None before), shared by every
        NPU running ``plan`` so that a group is sorted once per plan, not once per NPU."""
        known = self._plan_groups.get(id(plan))
        if known is None or known[0] is not plan:
            known = self._plan_groups[id(plan)] = (plan, [None] * len(plan.nodes))
        return known[1]

    def group(self, node: workload_pb2.Node) -> _Group:
        """``node``'s group, its members sorted (empty when the node names none), interned: one object per
        distinct group, hashing in constant time (:class:`_Group`)."""
        members = _Group(sorted(node.group))
        return self._interned.setdefault(members, members)

    def _layout(self, kind: str, size: int, group: tuple[int, ...]) -> Layout:
        """The layout every ``kind`` collective of ``size`` bytes over ``group`` shares, worked out once."""
        key = (kind, size, group)
        known = self._layouts.get(key)
        if known is None:
            known = self._layouts[key] = layout(kind, size, len(group), phases_of(group, self._grid), self._options)
        return known

    def preflight(self, nodes: list[workload_pb2.Node]) -> None:
        """Plan every distinct collective once before simulating, so a study whose algorithms cannot run on
        its groups (say, halving-doubling on lines of 6) fails before it starts, naming the node."""
        seen: set[tuple[int, tuple[int, ...]]] = set()
        for node in nodes:
            group = tuple(sorted(node.group)) if node.group else self._everyone
            if (node.comm_type, group) in seen:
                continue
            seen.add((node.comm_type, group))
            kind = COLLECTIVE_NAMES.get(node.comm_type)
            if kind is None:
                name = workload_pb2.CollectiveType.Name(node.comm_type)
                raise WorkloadError(f"node {node.id}: collective {name} is not supported yet")
            try:
                root = _root(node, group, -1)
                Collective(-1, kind, max(node.comm_bytes, 1), group, self._layout(kind, max(node.comm_bytes, 1), group),
                           self._options, root)
            except WorkloadError as exc:
                raise WorkloadError(f"node {node.id} ({node.name or kind}): {exc}") from None

    def join(
        self, npu: int, node: workload_pb2.Node, members: tuple[int, ...], index: int, issued: int, now: int
    ) -> Collective:
        """The collective ``node`` (whose group is ``members``, as :meth:`group` gives it) is the ``index``-th
        issued on its group, creating it on first sight; ``npu`` issues it at ``now`` after ``issued`` collectives
        of its own (which number collectives in a fixed order: see :meth:`ordered`)."""
        group = members if members else self._everyone
        kind = COLLECTIVE_NAMES.get(node.comm_type)
        if kind is None:
            name = workload_pb2.CollectiveType.Name(node.comm_type)
            raise WorkloadError(f"NPU {npu} node {node.id}: collective {name} is not supported yet")
        key = (group, index)
        collective = self._open.get(key)
        root = _root(node, group, npu)
        if collective is None:
            shape = self._layout(kind, node.comm_bytes, group)
            collective = Collective(len(self.all), kind, node.comm_bytes, group, shape, self._options, root)
            collective.first_issue = (npu, issued)
            self._open[key] = collective
            self.all.append(collective)
        elif collective.root != root:
            raise WorkloadError(
                f"NPU {npu} node {node.id}: collective #{index} on its group has root {root} here "
                f"but {collective.root} on another NPU"
            )
        elif (collective.kind, collective.bytes) != (kind, node.comm_bytes):
            raise WorkloadError(
                f"NPU {npu} node {node.id}: collective #{index} on its group is {kind} of {node.comm_bytes} B here "
                f"but {collective.kind} of {collective.bytes} B on another NPU"
            )
        elif collective.start_ps == now and (npu, issued) < collective.first_issue:
            collective.first_issue = (npu, issued)  # of the NPUs issuing it first, the lowest numbers it
        return collective

    def named(self, npu: int, issued: int, kind: str) -> _Named:
        """A name for the ``issued``-th collective ``npu`` issued, run in a block run whole, for a trace's spans:
        its number is set when the collectives are numbered."""
        name = self._named[(npu, issued)] = _Named(kind)
        return name

    def ordered(self) -> CollectiveLog:
        """Every collective's statistics, numbered in the order they started (each collective's ``number`` set
        to it, and that of each one a trace names); collectives starting together in the order of the lowest NPU
        issuing them first, then of that NPU's issues (the same order however many collectives ran inside blocks
        run whole)."""
        direct = [(collective_stats(c, 0), *c.first_issue) for c in self.all]
        runs: dict[int, list[tuple[int, int, int]]] = {}
        templates: dict[int, BlockRun] = {}
        for start, npu, first, run in self.replayed:
            if run.collectives:
                runs.setdefault(id(run), []).append((start, npu, first))
                templates[id(run)] = run
        replays = []
        for key, instances in runs.items():
            columns = np.array(instances, dtype=np.int64)
            replays.append((templates[key].collectives, columns[:, 0], columns[:, 1], columns[:, 2]))
        log = CollectiveLog(direct, replays)
        numbers = log.numbers()
        for place, collective in enumerate(self.all):
            collective.number = int(numbers[place])
        if self._named:
            for replay, instances in enumerate(runs.values()):
                for number, (_, npu, first) in enumerate(instances):
                    for which in range(len(replays[replay][0])):
                        name = self._named.get((npu, first + which))
                        if name is not None:
                            name.number = int(numbers[log.place(replay, number, which)])
        return log


class _Named:
    """A collective run in a block run whole, as the trace names it: its kind and its number once known."""

    __slots__ = ("kind", "number")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.number = -1


class NpuExecutor:
    """One NPU working through its graph; records its compute time and finish time."""

    def __init__(
        self,
        npu: int,
        plan: GraphPlan,
        durations: tuple[int, ...],
        scheduler: NpuScheduler,
        table: CollectiveTable,
        context: SchedulerContext,
    ) -> None:
        self.npu = npu
        self.plan = plan
        self._durations = durations
        self._scheduler = scheduler
        self._table = table
        self._context = context
        self._remaining = list(plan.indegree)
        self._compute_queue: deque[int] = deque()
        self._computing = False
        self._issued: dict[tuple[int, ...], int] = {}
        self._groups = table.groups_of(plan)  # each collective node's group, once any NPU of the plan asked
        self._left = len(plan.nodes)
        self.peers: dict[int, NpuExecutor] = {}  # every simulated NPU's executor, for point-to-point messages
        self._unclaimed: dict[tuple[int, int], int] = {}  # (source, tag) -> messages no receive took yet
        self._receiving: dict[tuple[int, int], deque[int]] = {}  # (source, tag) -> receive nodes waiting
        self.compute_ps = 0
        self.finish_ps = 0
        self._idle_since = 0  # when the compute stream last ran dry
        self.exposed_ps: dict[str, int] = {}  # idle compute time by what it waited on (see _charge_idle)
        self._waits: dict[int, tuple[int, int]] = {}  # communication node -> (when it became ready, its cause)
        self._memory = 0  # bytes the graph's nodes hold now, on top of its resident memory
        self.peak_memory = 0
        self.peak_memory_ps = 0
        self.milestones: dict[str, int] = {}
        self._memory_channel_free = 0  # when the local-memory channel is next free (MEM_LOAD/STORE nodes)
        self.issued = 0  # collectives issued so far
        self.runs: dict[int, BlockRun] = {}  # block nodes run whole, by position (set before starting)
        self._runs_done: list[int] = []  # the id of each block run finished, for settle_blocks

    @property
    def done(self) -> bool:
        return self._left == 0

    def start(self, _: object = None) -> None:
        """Make every node without dependencies ready (an event callback, hence the unused argument)."""
        # The roots first, then readied: a node that completes at once (metadata) must not ready one twice.
        for index in [i for i, count in enumerate(self._remaining) if count == 0]:
            self._ready(index)

    def _ready(self, index: int, cause: int = -1) -> None:
        """``index`` has no dependency left; ``cause`` is the node whose completion made it so (-1: none)."""
        node = self.plan.nodes[index]
        kind = node.type
        if kind in (_COMPUTE, _BLOCK):  # a block run whole computes
            self._compute_queue.append(index)
            if not self._computing:
                self._charge_idle(cause)
                self._next_compute()
            return
        self._waits[index] = (self._context.coordinator.now, cause)
        allocation = self.plan.allocations.get(index)
        if allocation:
            self._allocate(allocation)
        if kind == _RECEIVE:
            self._receive(index, (node.peer, node.tag))
            return
        if kind == workload_pb2.METADATA_NODE:  # a record of the trace, not work
            self._complete(index)
            return
        if kind in (workload_pb2.MEM_LOAD_NODE, workload_pb2.MEM_STORE_NODE):
            self._memory_transfer(index, node.comm_bytes)
            return
        if kind == workload_pb2.COMM_SEND_NODE:
            # ASTRA-sim charges its endpoint delay inside collective algorithms only, not to plain sends.
            endpoint_delay = self._context.options.preset is not Preset.ASTRA_COMPAT
            self._context.coordinator.send(
                self.npu, node.peer, node.comm_bytes, self._sent, (index, node.tag), endpoint_delay=endpoint_delay
            )
            return
        group = self._groups[index]
        if group is None:
            group = self._groups[index] = self._table.group(node)
        issued = self._issued.get(group, 0)
        self._issued[group] = issued + 1
        collective = self._table.join(self.npu, node, group, issued, self.issued, self._context.coordinator.now)
        self.issued += 1
        self._scheduler.issue(collective, lambda: self._complete(index))

    def _memory_transfer(self, index: int, size: int) -> None:
        """A load or store of ``size`` bytes between the NPU and its local memory: the transfers queue on one
        channel of ``local_mem_bw`` bytes/s (free when the study sets none), beside the compute stream."""
        coordinator = self._context.coordinator
        bandwidth = self._context.options.local_mem_bw
        duration = -(-size * 10**12 // bandwidth) if bandwidth else 0
        start = max(coordinator.now, self._memory_channel_free)
        self._memory_channel_free = start + duration
        coordinator.schedule(start + duration, self._complete, index)

    def _sent(self, message: tuple[int, int]) -> None:
        """A point-to-point message of this NPU arrived: its send node is done, the peer may take it."""
        index, tag = message
        node = self.plan.nodes[index]
        self._complete(index)
        self.peers[node.peer].take(self.npu, tag)

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
        else:
            self._receiving.setdefault(key, deque()).append(index)

    def _next_compute(self) -> None:
        coordinator = self._context.coordinator
        if not self._compute_queue:
            self._computing = False
            self._idle_since = coordinator.now
            return
        self._computing = True
        index = self._compute_queue.popleft()
        allocation = self.plan.allocations.get(index)
        if allocation:
            self._allocate(allocation)
        run = self.runs.get(index) if self.runs else None
        if run is not None:
            self._start_block(run)
            coordinator.schedule(coordinator.now + run.duration_ps, self._block_done, index)
            return
        duration = self._durations[index]
        self.compute_ps += duration
        trace = self._context.trace
        if trace is not None and trace.nodes:
            trace.span(self.npu, "compute", self.plan.name(index), coordinator.now, coordinator.now + duration)
        coordinator.schedule(coordinator.now + duration, self._compute_done, index)

    def _compute_done(self, index: int) -> None:
        self._complete(index)
        self._next_compute()

    def _start_block(self, run: BlockRun) -> None:
        """A block run whole starts: its compute time and its memory peak, had it run node by node (nothing
        else on this NPU computes, communicates or allocates while it runs)."""
        self.compute_ps += run.compute_ps
        if run.peak is not None and self._memory + run.peak[0] > self.peak_memory:
            self.peak_memory = self._memory + run.peak[0]
            self.peak_memory_ps = self._context.coordinator.now + run.peak[1]

    def _block_done(self, index: int) -> None:
        """A block run whole is done: leave the compute stream as its nodes left it (idle since its last
        compute, if that ended before it), and complete the block node. What only adds up (idle time, bytes,
        collectives) is accounted once the simulation is over (:meth:`settle_blocks`)."""
        run = self.runs[index]
        start = self._context.coordinator.now - run.duration_ps
        if run.trace is not None and self._context.trace is not None:
            self._trace_block(run, run.trace, start, self.plan.name(index))
        self._memory += run.memory_delta
        for group, count in run.issued:  # later collectives on these groups are matched by their number
            self._issued[group] = self._issued.get(group, 0) + count
        self._table.replayed.append((start, self.npu, self.issued, run))
        self._runs_done.append(id(run))
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
        named = [self._table.named(self.npu, self.issued + i, stats.type) for i, stats in enumerate(run.collectives)]
        trace.block_spans(self.npu, block.spans, start, scope, named)
        held = self._memory + sum(size for _, size in self.plan.resident)
        for time_ps, value in block.memory:
            trace.counter(self.npu, "memory", start + time_ps, held + value)

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

    def _complete(self, index: int) -> None:
        plan = self.plan
        released = plan.releases.get(index)
        if released:
            self._memory -= released
            self._sample_memory()
        if index in plan.milestones:
            self.milestones[plan.name(index)] = self._context.coordinator.now
        self._left -= 1
        if self._left == 0:
            self.finish_ps = self._context.coordinator.now
            if not self._computing:
                self._charge_idle(index)
        remaining = self._remaining
        for dependent in plan.dependents[index]:
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                self._ready(dependent, index)

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

    def _charge_idle(self, cause: int) -> None:
        """The compute stream, idle since ``_idle_since``, has work again (or the graph is done) because
        ``cause`` finished: charge the idle time to what it waited on, walking back the chain of communication
        nodes that readied one another (a send waiting on a TP all-reduce is charged to both in turn)."""
        for label, amount in self.idle_charges(cause, self._context.coordinator.now, self._idle_since):
            self.exposed_ps[label] = self.exposed_ps.get(label, 0) + amount

    def idle_charges(self, cause: int, end: int, idle_since: int) -> list[tuple[str, int]]:
        """What :meth:`_charge_idle` charges for the idle time from ``idle_since`` to ``end``, by label, in order
        (zero-length waits included: they name what was waited on); a block run whole charges as its nodes did."""
        charges: list[tuple[str, int]] = []
        while end > idle_since:
            run = self.runs.get(cause) if self.runs else None
            if run is not None:
                charges += run.tail
                break
            wait = self._waits.get(cause)
            start = idle_since if wait is None else max(wait[0], idle_since)
            charges.append((self._label(cause) if wait is not None else "other", end - start))
            if wait is None:
                break
            end, cause = start, wait[1]
        return charges

    def _label(self, index: int) -> str:
        """What a wait on node ``index`` counts as: its communicator's name, else ``p2p`` or ``collective``."""
        if index < 0:
            return "other"
        node = self.plan.nodes[index]
        if node.pg_name:
            return node.pg_name
        if node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
            return "p2p"
        return "collective" if node.type == workload_pb2.COMM_COLL_NODE else "other"
