"""Blocks run whole: a block node whose run nothing else on its NPU can touch runs as one event.

A training step's graph runs the same few passes (a layer forward, a layer backward) hundreds of times, and
each pass is dozens of operators and tensor-parallel collectives. When a pass, once started, cannot be
affected by anything else, its run is the same every time: it is simulated once, node by node, on its own
(:class:`BlockRecorder`), and every later run of it replays that record — same duration, compute time, idle
time by cause, memory peak, collective statistics — as a single event. That holds for a block node when

- the network prices each message on the spot and the same whatever else is in flight (a stateless
  :class:`~stratasim.kernel.contracts.DirectNetwork`), and its NPU's timeline is not being traced;
- its block holds compute and collective nodes only (a collective at least: runs of compute alone are
  fused anyway, :mod:`stratasim.system_layer.engine.fusion`) and some compute, and every member of each of
  its collectives' groups is simulated by this very NPU (symmetric ranks stood in for: see
  :mod:`stratasim.system_layer.symmetry.stand_ins`), so no other NPU's progress enters;
- in the graph, every compute node, every collective and every node that allocates or frees memory comes
  before the block node or after it: nothing shares the compute stream, the chunk scheduler or the memory count
  with it while it runs (a block it cannot prove alone runs node by node, inlined, with the same results).

What the engine reports is then identical to running every node; the tests compare both on many plans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stratasim.kernel.contracts import DirectNetwork, NetworkBackend
from stratasim.kernel.grid import Grid
from stratasim.system_layer.engine.block_run import BlockRun, BlockTrace
from stratasim.system_layer.engine.collective_stats import collective_stats
from stratasim.system_layer.engine.collective_table import CollectiveTable
from stratasim.system_layer.engine.coordinator import Coordinator
from stratasim.system_layer.engine.executor import NpuExecutor
from stratasim.system_layer.engine.fusion import compute_is_one_chain
from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.system_layer.engine.pricing import Pricing
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler, SchedulerContext
from stratasim.system_layer.scheduler.chunks import Collective
from stratasim.system_layer.scheduler.reduction import ReductionCost
from stratasim.system_layer.trace import BlockSpans, TraceDetail, TraceRecorder, TraceSelection
from stratasim.v1 import workload_pb2

__all__ = ["runnable_whole", "BlockRecorder"]

_BLOCK_CONTENT = frozenset({workload_pb2.COMP_NODE, workload_pb2.COMM_COLL_NODE})


def runnable_whole(plan: GraphPlan, npu: int, stands_in: Callable[[int], int], npus: int) -> frozenset[int]:
    """The positions of ``plan``'s block nodes that ``npu`` may run whole (see the module docstring);
    ``stands_in(m)`` is the NPU simulated in NPU ``m``'s place."""
    if not plan.blocks:
        return frozenset()
    alone = [_self_contained(block, npu, stands_in, npus) for block in plan.blocks]
    if not any(alone):
        return frozenset()
    kinds, block_runs = plan.kinds, plan.block_runs
    collective, compute = workload_pb2.COMM_COLL_NODE, workload_pb2.COMP_NODE
    has_collective = [collective in block.kinds for block in plan.blocks]
    has_memory = [bool(block.allocations or block.releases) for block in plan.blocks]
    # The node-wide marks start from the node kinds and take the sparse tables (block nodes, memory) on top.
    computes = [kind == compute for kind in kinds]
    for i in block_runs:
        computes[i] = True
    if not compute_is_one_chain(plan.order, computes, plan.dependencies):
        return frozenset()
    # What a block must not overlap: collectives (the scheduler) and memory changes (the count), both at once.
    touches = [kind == collective for kind in kinds]
    for i in (*plan.allocations, *plan.releases):
        touches[i] = True
    for i, b in block_runs.items():
        if has_collective[b] or has_memory[b]:
            touches[i] = True
    apart = _ordered_with_all(plan, touches)
    return frozenset(i for i, b in block_runs.items() if alone[b] and has_collective[b] and apart[i])


def _self_contained(block: GraphPlan, npu: int, stands_in: Callable[[int], int], npus: int) -> bool:
    """Whether ``block`` holds only compute and collectives, some compute, and talks only to NPUs that ``npu``
    stands in for."""
    if workload_pb2.COMP_NODE not in block.kinds:
        return False
    for node, kind in zip(block.nodes, block.kinds):
        if kind not in _BLOCK_CONTENT:
            return False
        if kind == workload_pb2.COMM_COLL_NODE:
            group = node.group or range(npus)
            if any(stands_in(member) != npu for member in group):
                return False
    return True


def _ordered_with_all(plan: GraphPlan, marked: Sequence[bool]) -> list[bool]:
    """For each marked node, whether every other marked node is its ancestor or its descendant: the marked
    nodes each node is reached from (and reaches) are kept as bit sets along the topological order. When each
    marked node is reached from the one before it in that order (a chain, as a pipeline stage's blocks are), all
    are: that is checked first, in one pass."""
    order = plan.order
    if compute_is_one_chain(order, marked, plan.dependencies):
        return [bool(m) for m in marked]
    before = _reached(order, marked, plan.dependencies)
    after = _reached(order[::-1], marked, plan.dependents)
    count = sum(map(bool, marked))
    return [bool(m) and before[i].bit_count() + after[i].bit_count() == count - 1 for i, m in enumerate(marked)]


def _reached(order: Sequence[int], marked: Sequence[bool], behind: Sequence[Sequence[int]]) -> list[int]:
    """Per node, the set (bits by rank in ``order``) of marked nodes behind it through ``behind`` (its
    dependencies, or walking backwards its dependents), itself excluded."""
    through = [0] * len(marked)  # the same, itself included
    reached = [0] * len(marked)
    rank = 0
    for index in order:
        bits = 0
        for other in behind[index]:
            bits |= through[other]
        reached[index] = bits
        if marked[index]:
            bits |= 1 << rank
            rank += 1
        through[index] = bits
    return reached


@dataclass(frozen=True)
class BlockRecorder:
    """Runs blocks on their own, once each, to record what a run of them does (:class:`BlockRun`): on the
    study's stateless ``network`` (``direct``: the same, pricing messages on the spot), with its system options,
    reduction cost, collective grid, stand-ins and, for traced NPUs, the trace's ``detail``; with ``node_times``
    each run also says which of its nodes its time falls to (``BlockRun.compute_at``, ``comm_at``, ``exposed_at``)."""

    network: NetworkBackend
    direct: DirectNetwork
    lookahead_ps: int
    options: SystemOptions
    reduction: ReductionCost
    grid: Grid
    npus: int
    stand_ins: tuple[int, ...] | None
    detail: TraceDetail | None = None
    node_times: bool = False

    def runs_of(self, npu: int, plan: GraphPlan, pricing: Pricing, traced: bool) -> dict[int, BlockRun]:
        """What each block node left in ``plan`` does when run whole on ``npu`` (and shows in the trace, if
        ``traced``), by node index: each block recorded once, its nodes' durations (and slow-downs while
        collectives run) as ``pricing`` priced them."""
        recorded: dict[int, BlockRun] = {}
        runs = {}
        for index, number in plan.block_runs.items():
            run = recorded.get(number)
            if run is None:
                block = plan.blocks[number]
                run = recorded[number] = self.record(
                    npu, block, pricing.durations[block], traced, pricing.slow.get(block)
                )
            runs[index] = run
        return runs

    def record(
        self,
        npu: int,
        block: GraphPlan,
        durations: tuple[int, ...],
        traced: bool = False,
        slow: tuple[float, ...] | None = None,
    ) -> BlockRun:
        """Simulate one run of ``block`` on ``npu`` from time 0, alone, and say what it did (and, if ``traced``,
        what the trace shows of it at the recorder's detail); ``slow``: its nodes' slow-downs while collectives
        run (None: none)."""
        coordinator = Coordinator(self.network, self.lookahead_ps, self.options.endpoint_delay, direct=self.direct)
        inside = self.detail not in (None, TraceDetail.BLOCKS)
        trace = TraceRecorder(TraceSelection(detail=self.detail), [npu]) if traced and self.detail and inside else None
        context = SchedulerContext(
            coordinator,
            self.options,
            self.reduction,
            stand_ins=self.stand_ins,
            replay_phases=True,
            trace=trace,
            node_times=self.node_times,
        )
        scheduler = context.schedulers[npu] = NpuScheduler(npu, context)
        table = CollectiveTable(self.grid, self.options, self.npus)
        executor = _Alone(npu, block, durations, scheduler, table, context, slow, queue=coordinator.queue)
        coordinator.schedule(0, executor.start)
        coordinator.run()
        end = executor.finish_ps
        run = BlockRun(
            duration_ps=end,
            compute_ps=executor.compute_ps,
            idle_from_ps=executor.idle_since,
            exposed=tuple(executor.exposed_ps.items()),
            tail=tuple(executor.idle_charges(executor.last, end, executor.idle_since)),
            peak=(executor.peak_memory, executor.peak_memory_ps) if executor.peak_memory > 0 else None,
            memory_delta=executor.memory,
            comm_ps=scheduler.comm_ps,
            bytes_sent=tuple(sorted(scheduler.bytes_sent.items())),
            reductions=scheduler.reductions,
            issued=tuple(executor.issued_by_group.items()),
            collectives=tuple(collective_stats(collective, 0) for collective in table.all),
            milestones=tuple(executor.milestones.items()),
            compute_at=tuple((index, ps) for index, ps in enumerate(executor.compute_at) if ps),
            comm_at=tuple(sorted(scheduler.comm_at.items())),
            exposed_at=tuple((where, label, ps) for (where, label), ps in executor.exposed_at.items()),
            trace=_block_trace(trace, table.all)
            if trace is not None
            else _whole_trace(end, executor.memory)
            if traced
            else None,
        )
        context.schedulers.clear()
        for collective in table.all:
            collective.release()
        return run


def _whole_trace(duration_ps: int, memory_delta: int) -> BlockTrace:
    """What a trace at block detail shows of a block's run: one compute span, named after the block node, and
    the memory it holds once it is done."""
    spans = BlockSpans(("compute",), (0,), (0,), (duration_ps,), (b"",), (-1,), ("",))
    return BlockTrace(spans, ((duration_ps, memory_delta),) if memory_delta else ())


def _block_trace(trace: TraceRecorder, collectives: list[Collective]) -> BlockTrace:
    """What ``trace`` recorded of a block's run, its collective spans pointing at the block's collectives."""
    numbered = {
        index: (collectives.index(collective), suffix)  # type: ignore[arg-type]
        for index, collective, suffix in trace.collective_spans()
    }
    rows = list(trace.spans.rows())
    tracks = tuple(dict.fromkeys(track for _, track, *_ in rows))
    spans = BlockSpans(
        tracks=tracks,
        track_of=tuple(tracks.index(track) for _, track, *_ in rows),
        starts=tuple(start for *_, start, _ in rows),
        ends=tuple(end for *_, end in rows),
        names=tuple(name.encode() for _, _, name, _, _ in rows),
        collective=tuple(numbered.get(index, (-1, ""))[0] for index in range(len(rows))),
        suffixes=tuple(numbered.get(index, (-1, ""))[1] for index in range(len(rows))),
    )
    return BlockTrace(spans, tuple((sample.time_ps, sample.value) for sample in trace.counters))


class _Alone(NpuExecutor):
    """An executor running one block alone, which leaves the idle time at its end uncharged: the run that
    replays the block charges it (``BlockRun.tail``) only if the idle walk comes back into the block."""

    last = -1  # the node whose completion ended the block

    @property
    def idle_since(self) -> int:
        return self._idle_since

    @property
    def memory(self) -> int:
        return self._memory

    @property
    def issued_by_group(self) -> dict[tuple[int, ...], int]:
        return self._issued

    def _charge_idle(self, cause: int) -> None:
        if self.done:
            self.last = cause
        else:
            super()._charge_idle(cause)
