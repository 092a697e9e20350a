"""A serving job's standalone run replayed on a shared fabric, its batching decisions frozen.

The request-level loop decides which requests batch together and when each iteration starts, pricing each
iteration on the network alone. :func:`replay_graphs` turns the iterations it ran
(:attr:`~stratasim.workload_layer.serving.pool_run.PoolRun.record`) into one execution graph per NPU of the job
(its ranks 0, 1, ...), for the engine to run beside the other jobs' graphs: each replica's TP ranks run its
iterations in order, each iteration's operators
as compute nodes (priced by the engine's operator pricer, as the loop's pricer priced them) and its TP collectives
over the replica's ranks (at the size the pricer priced them), in layer order, chained; before each iteration a wait
node (``WAIT_NODE``: neither compute nor exposed communication) as long as the replica waited for it standalone;
after it a milestone named :func:`milestone_name`. A layer's steps repeated ``times`` times run as a block.

A replica of ``pp`` pipeline stages runs its engines' iterations in the order they entered its first stage, each
stage on its own ``tp`` ranks (stage ``s`` on the replica's ranks ``s tp`` to ``s tp + tp - 1``, as the pricer
takes them): the first stage waits as long as it idled standalone, every later stage receives each pass's
activation (its ``boundary_bytes``) from the same TP rank of the stage before, and every stage but the last sends
it on beside its next iteration; the last stage's ranks carry the milestones. Disaggregated, each KV move becomes
sends between the replicas' NPUs (:mod:`~stratasim.workload_layer.serving.replay_moves`).

:func:`~stratasim.workload_layer.serving.replay_times.replayed_run` moves the run's times to the shared run's.

An iteration decoding speculatively runs its draft passes before the target's, as the pricer sums them (a draft on
fewer NPUs than the stage's TP ranks: its collectives among the first of them). A pool on a device of its own is
priced on it by the engine (its NPUs a group of ``compute.groups``, :mod:`stratasim.study.serving_replay`).

With ``preemption: swap`` or KV tiers an iteration's KV copies out of the GPU and back (its record's ``swaps``) run
on every rank of each stage before the stage's part, as the loop adds them: a ``MEM_STORE_NODE`` (out) then a
``MEM_LOAD_NODE`` (in) on the NPU's memory channel, each as long as the loop priced it over the NPU's host link
(``duration_ps``; the engine has no host-link channel of its own, and nothing else in the replay uses that one),
named after the ``host`` link so that the compute stream idle behind them counts as exposed ``host``, not compute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stratasim.kernel.serving import (
    Compute,
    ExpertAllToAll,
    ExpertWork,
    Iteration,
    IterationShape,
    IterationWork,
    TensorParallelCollective,
)
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.serving.pool_run import GroupStep, IterationRecord, PoolRun
from stratasim.workload_layer.serving.replay_moves import KvMoves, add_moves

__all__ = ["HOST_LINK", "WAITING", "ExpertGroups", "milestone_name", "replay_graphs", "replay_size"]

WAITING = "waiting for requests"
"""The name of the wait nodes between a replica's iterations."""
Works = Callable[[int, IterationShape], Iteration]
"""An iteration's typed work by pool and shape (the same objects for the same arguments)."""
Quantised = Callable[[int], int]
"""A collective's size as the pricer priced it."""
SWAP_NODES = (workload_pb2.MEM_STORE_NODE, workload_pb2.MEM_LOAD_NODE)
"""The node types of a swap's copies out to host memory and back in."""
SWAP_NAMES = ("swap out", "swap in")
HOST_LINK = "host"
"""The communicator name of the swap copies: the report counts the idle time they cause as exposed ``host``."""


def milestone_name(engine: int, iteration: int) -> str:
    """The milestone ending iteration ``iteration`` (counted from 0) of engine ``engine``."""
    return f"replica {engine} iteration {iteration}"


@dataclass(frozen=True)
class ExpertGroups:
    """What the replay of expert-parallel pools needs: ``work`` the expert part of an iteration of a group of pool
    ``pool`` (its first argument) at the group's and its busiest member's tokens, and ``members`` each replica's
    group, as the replicas in it (the replica alone outside expert parallelism)."""

    work: Callable[[int, int, int], ExpertWork]
    members: Sequence[Sequence[int]]


def replay_graphs(
    run: PoolRun,
    replicas: Sequence[Sequence[int]],
    works: Works,
    quantised: Quantised,
    experts: ExpertGroups | None = None,
) -> list[workload_pb2.ExecutionGraph]:
    """One graph per rank of the job for ``run``'s iterations (module docstring): replica i on the ranks
    ``replicas[i]``, each iteration's work from ``works`` (an expert-parallel group's expert part from
    ``experts``), its collectives at ``quantised`` sizes; ranks of a replica running the same nodes share one
    graph object (numbered after the replica's first rank)."""
    graphs = [workload_pb2.ExecutionGraph(npu=rank) for group in replicas for rank in group]
    moves = KvMoves(run, [replicas[replica] for replica in run.engine_replicas], quantised)
    for replica, group in enumerate(replicas):
        own = [record for record in run.record if run.engine_replicas[record.engine] == replica]
        width = len(group) // _stages(own, works)
        for position, rank in enumerate(group):
            stage = position // width
            first = stage * width  # the stage's first rank
            neighbours = (
                group[position - width] if first else None,
                group[position + width] if first + width < len(group) else None,
            )
            members = experts.members[replica] if experts is not None else ()
            builder = _Builder(
                graphs[rank], group[first : first + width], quantised, [replicas[m][position] for m in members]
            )
            spans = builder.replica(own, works, moves.waits, stage, neighbours, experts)
            add_moves(graphs[rank], spans, moves, position)
        _share_alike(graphs, group)
    return graphs


def _share_alike(graphs: list[workload_pb2.ExecutionGraph], group: Sequence[int]) -> None:
    """Give the ranks of ``group`` whose graphs are its first rank's but for their NPU that graph object, so the
    engine plans, prices and fuses it once (a TP-only replica's ranks all run the same nodes)."""
    first = graphs[group[0]]
    alike = first.SerializeToString(deterministic=True)
    for rank in group[1:]:
        graph = graphs[rank]
        graph.npu = first.npu
        if graph.SerializeToString(deterministic=True) == alike:
            graphs[rank] = first
        else:
            graph.npu = rank


def _stages(records: Sequence[IterationRecord], works: Works) -> int:
    """The pipeline stages of the replica that ran ``records`` (1 when it ran none of its own)."""
    busy = next((record for record in records if record.requests), None)
    passes = works(busy.pool, busy.shape).works if busy is not None else ()
    return len(passes[0][1].stages) if passes else 1


def replay_size(
    run: PoolRun, replicas: Sequence[Sequence[int]], works: Works, experts: ExpertGroups | None = None
) -> tuple[int, int]:
    """What :func:`replay_graphs` would build for ``run``, before building it: its graph nodes (a repeated layer
    counting once per run, as the block node it is) and the nodes the engine runs (blocks unrolled), over every
    rank, each iteration's waits, swaps, expert part and milestone included, and each KV move's sends and
    receives."""
    moves = KvMoves(run, [replicas[replica] for replica in run.engine_replicas])
    nodes = events = 2 * moves.slices()
    ended: dict[int, int] = {}  # each replica's last first-stage end
    counts: dict[int, int] = {}
    for record in run.record:
        replica = run.engine_replicas[record.engine]
        width = len(replicas[replica])
        for repeats, work in works(record.pool, record.shape).works if record.requests else ():
            width = len(replicas[replica]) // len(work.stages)
            inside = min(work.tp, width)  # the stage's ranks running its TP collectives (a smaller draft's: fewer)
            for stage in work.stages:
                for ranks, runs in ((inside, _runs(stage, work.tp)), (width - inside, _runs(stage, 1))):
                    nodes += ranks * repeats * sum(size if times == 1 else times for times, size in runs)
                    events += ranks * repeats * sum(times * size for times, size in runs)
            messages = 2 * width * repeats * (len(work.stages) - 1)  # activations sent and received
            nodes, events = nodes + messages, events + messages
        copies = len(replicas[replica]) * sum(1 for part in record.swaps if part) if record.requests else 0
        nodes, events = nodes + copies, events + copies  # every rank's swaps, once on each stage
        count = counts[record.engine] = counts.get(record.engine, -1) + 1
        waits = moves.waits((record.engine, count), record.start_ps, ended.get(replica, 0))
        own = width * (1 + waits)  # its milestone on the last stage, and a wait before it on the first
        nodes, events = nodes + own, events + own
        if record.experts is not None and experts is not None:
            step = record.experts
            runs = _runs(experts.work(record.pool, step.group_tokens, step.member_tokens).steps, width)
            lockstep = step.experts_start_ps > step.own_end_ps  # a wait for the group's slowest member
            nodes += width * (lockstep + sum(size if times == 1 else times for times, size in runs))
            events += width * (lockstep + sum(times * size for times, size in runs))
        ended[replica] = record.stage_ends_ps[0]
    return nodes, events


def _runs(steps: Sequence[tuple[int, object]], tp: int) -> list[tuple[int, int]]:
    """The runs of consecutive ``steps`` repeated alike, as (times, nodes of the run's steps: a TP collective
    none when ``tp`` is 1) — the blocks of :meth:`_Builder._stage`."""
    runs: list[tuple[int, int]] = []
    for times, step in steps:
        nodes = int(tp > 1 or not isinstance(step, TensorParallelCollective))
        if runs and runs[-1][0] == times:
            runs[-1] = (times, runs[-1][1] + nodes)
        else:
            runs.append((times, nodes))
    return runs


class _Builder:
    """Appends a replica's iterations to one rank's ``graph``, each node after the last one added; its collectives
    over ``group`` at ``quantised`` sizes; blocks shared by the identical layers of an iteration's shape."""

    def __init__(
        self, graph: workload_pb2.ExecutionGraph, group: Sequence[int], quantised: Quantised, experts: list[int]
    ) -> None:
        self.graph, self.group, self.quantised = graph, list(group), quantised
        self.experts = experts  # the rank's expert-parallel all-to-all group
        self.blocks: dict[tuple[int, ...], int] = {}
        self.passes = 0  # passes run so far: the tag of their activations between stages
        self.copies = (0, 0)  # the iteration's KV swaps still to copy on this rank: out, in (ps)

    def replica(
        self,
        records: Sequence[IterationRecord],
        works: Works,
        waits: Callable[[tuple[int, int], int, int], bool],
        stage: int = 0,
        neighbours: tuple[int | None, int | None] = (None, None),
        experts: ExpertGroups | None = None,
    ) -> dict[tuple[int, int], tuple[int, int]]:
        """The replica's iterations ``records`` in order (its engines' together, as they entered its first stage),
        each's work from ``works``, on a rank of pipeline stage ``stage`` whose ``neighbours`` are the same TP rank
        of the stages before and after it (None: none): on the first stage a wait as long as the stage idled
        standalone before it where ``waits`` (its engine and count, its start, the stage's previous end) says; the
        stage's steps of every pass it runs, each pass's activation received from the stage before and sent to the
        stage after; in an expert-parallel group, a wait for its slowest member's own part then the group's expert
        part (``experts``); on the last stage its milestone. For each, by its engine and count, the ids of its first
        node after the wait and of its last node."""
        ended, spans = 0, {}
        sends: list[tuple[int, dict[str, Any]]] = []
        counts: dict[int, int] = {}
        for record in records:
            count = counts[record.engine] = counts.get(record.engine, -1) + 1
            if stage == 0 and waits((record.engine, count), record.start_ps, ended):
                self._node(
                    self.graph.nodes, name=WAITING, type=workload_pb2.WAIT_NODE, duration_ps=record.start_ps - ended
                )
            first = len(self.graph.nodes)
            self.copies = record.swaps
            for repeats, work in works(record.pool, record.shape).works if record.requests else ():
                for _ in range(repeats):
                    self._pass(work, stage, neighbours, sends)
            if record.experts is not None and experts is not None:
                self._expert_part(record.pool, record.experts, experts)
            if neighbours[1] is None:
                self._node(self.graph.nodes, name=milestone_name(record.engine, count), milestone=True)
            spans[record.engine, count] = (first, len(self.graph.nodes) - 1)
            ended = record.stage_ends_ps[0]
        for after, send in sends:  # beside the stage's next iteration, not before it
            self.graph.nodes.add(id=len(self.graph.nodes), data_deps=[after], **send)
        return spans

    def _expert_part(self, pool: int, step: GroupStep, experts: ExpertGroups) -> None:
        """A member's wait until its group's slowest member's own part has ended, then the group's expert part."""
        if step.experts_start_ps > step.own_end_ps:
            self._node(
                self.graph.nodes,
                name=WAITING,
                type=workload_pb2.WAIT_NODE,
                duration_ps=step.experts_start_ps - step.own_end_ps,
            )
        self._stage(experts.work(pool, step.group_tokens, step.member_tokens).steps, len(self.group))

    def _pass(
        self,
        work: IterationWork,
        stage: int,
        neighbours: tuple[int | None, int | None],
        sends: list[tuple[int, dict[str, Any]]],
    ) -> None:
        """One pass of ``work`` on the stage: the activation received, the stage's steps, the activation's send
        (added to ``sends`` as the node it follows and its fields)."""
        before, after = neighbours
        message = {"name": "activation", "tag": self.passes, "comm_bytes": work.boundary_bytes, "pg_name": "pp"}
        if before is not None:
            self._node(self.graph.nodes, type=workload_pb2.COMM_RECV_NODE, peer=before, **message)
        self._swaps()
        self._stage(work.stages[stage], work.tp)
        if after is not None:
            sends.append((len(self.graph.nodes) - 1, {"type": workload_pb2.COMM_SEND_NODE, "peer": after, **message}))
        self.passes += 1

    def _swaps(self) -> None:
        """The iteration's KV copies to host memory then back, once, before its stage's first pass: each a copy over
        the rank's host link (a store, then a load, on the NPU's memory channel) as long as the loop priced it."""
        for kind, name, duration in zip(SWAP_NODES, SWAP_NAMES, self.copies, strict=True):
            if duration:
                self._node(self.graph.nodes, name=name, type=kind, duration_ps=duration, pg_name=HOST_LINK)
        self.copies = (0, 0)

    def _stage(self, steps: Sequence[tuple[int, object]], tp: int) -> None:
        """A stage's steps in order, runs of steps repeated ``times > 1`` times as a block run that often."""
        at = 0
        while at < len(steps):
            times = steps[at][0]
            end = at + 1
            while end < len(steps) and steps[end][0] == times:
                end += 1
            run = [step for _, step in steps[at:end]]
            if times == 1:
                for step in run:
                    self._step(self.graph.nodes, step, tp)
            else:
                block = self._block(run, tp)
                for _ in range(times):
                    self._node(
                        self.graph.nodes, name=self.graph.blocks[block].name, type=workload_pb2.BLOCK_NODE, block=block
                    )
            at = end

    def _block(self, steps: list[object], tp: int) -> int:
        """The index of the block running ``steps`` in order, added the first time they are met."""
        key = tuple(id(step) for step in steps)
        if key not in self.blocks:
            block = self.graph.blocks.add(name=f"layer {len(self.blocks)}")
            for step in steps:
                self._step(block.nodes, step, tp)
            self.blocks[key] = len(self.graph.blocks) - 1
        return self.blocks[key]

    def _step(self, nodes: Any, step: object, tp: int) -> None:
        """A step's node after the last of ``nodes``: an operator, or a TP collective over the first ``tp`` ranks of
        the group (all of them but for a draft model on fewer) when they are several and this rank is one."""
        if isinstance(step, Compute):
            self._node(nodes, name=step.name, op=step.op)
        elif isinstance(step, ExpertAllToAll):
            self._node(
                nodes,
                name=step.name,
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=workload_pb2.ALL_TO_ALL,
                comm_bytes=self.quantised(step.comm_bytes),
                group=self.experts,
                pg_name="ep",
            )
        elif isinstance(step, TensorParallelCollective) and tp > 1 and self.graph.npu in self.group[:tp]:
            size = self.quantised(step.comm_bytes)
            self._node(
                nodes,
                name=step.name,
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=step.kind,
                comm_bytes=size,
                group=self.group[:tp],
                pg_name="tp",
            )

    @staticmethod
    def _node(nodes: Any, **fields: object) -> None:
        """A node after the last of ``nodes`` (a compute node unless ``type`` says otherwise)."""
        added = nodes.add(id=len(nodes), **({"type": workload_pb2.COMP_NODE} | fields))
        if added.id:
            added.data_deps.append(added.id - 1)
