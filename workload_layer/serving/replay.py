"""A serving job's standalone run replayed on a shared fabric, its batching decisions frozen.

The request-level loop decides which requests batch together and when each iteration starts, pricing each
iteration on the network alone. :func:`replay_graphs` turns the iterations it ran
(:attr:`~stratasim.workload_layer.serving.simulation.PoolRun.record`) into one execution graph per NPU of the job
(its ranks 0, 1, ...), for the engine to run beside the other jobs' graphs: each replica's TP ranks run its
iterations in order, each iteration's operators as compute nodes (priced by the engine's operator pricer, as the
loop's pricer priced them) and its TP collectives over the replica's ranks (at the size the pricer priced them), in
layer order, chained; before each iteration an idle node as long as the replica waited for it standalone; after it
a milestone named :func:`milestone_name`. A layer's steps repeated ``times`` times run as a block.

:func:`replayed_run` moves the run's times to the shared run's: each iteration ends when its milestone says, starts
its standalone gap after the previous one's shared end, and each request's scheduling, first token and finish move
with the iterations that made them. Which requests batch together does not change (the decisions are frozen): a
full co-simulation would let the slowed iterations change them.

Only what a graph can replay exactly is replayed (:func:`unreplayable`): pools of role ``both``, without pipeline or
expert parallelism, speculative decoding or swap preemption, on the study's device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from stratasim.kernel.serving import Compute, Iteration, IterationShape, TensorParallelCollective
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.replay_moves import KvMoves, add_moves, move_milestone
from stratasim.workload_layer.serving.scheduler import Sequence as Served
from stratasim.workload_layer.serving.simulation import IterationRecord, PoolRun

__all__ = ["WAITING", "milestone_name", "replay_graphs", "replay_size", "replayed_run", "unreplayable"]

WAITING = "waiting for requests"
"""The name of the idle nodes between a replica's iterations."""
Works = Callable[[int, IterationShape], Iteration]
"""An iteration's typed work by pool and shape (the same objects for the same arguments)."""
Quantised = Callable[[int], int]
"""A collective's size as the pricer priced it."""
Moves = Mapping[tuple[int, int], int]
"""Instants of an engine in the standalone run, by (engine, time), and where they lie in the shared run."""


def unreplayable(config: ServingWorkloadConfig, study_device: object) -> str | None:
    """Why a serving workload's run cannot be replayed on the shared fabric, or None when it can."""
    for pool in config.pools:
        plan = pool.parallelism
        reasons = [
            (plan.pp > 1 or plan.ep > 1, f"pool {pool.name!r} is pipeline or expert parallel"),
            (pool.speculative is not None, f"pool {pool.name!r} decodes speculatively"),
            (pool.scheduler.preemption == "swap", f"pool {pool.name!r} swaps preempted KV blocks"),
            (pool.device is not None and pool.device != study_device, f"pool {pool.name!r} has its own device"),
        ]
        said = next((reason for failed, reason in reasons if failed), None)
        if said is not None:
            return said
    return None


def milestone_name(engine: int, iteration: int) -> str:
    """The milestone ending iteration ``iteration`` (counted from 0) of engine ``engine``."""
    return f"replica {engine} iteration {iteration}"


def replay_graphs(
    run: PoolRun, replicas: Sequence[Sequence[int]], works: Works, quantised: Quantised
) -> list[workload_pb2.ExecutionGraph]:
    """One graph per rank of the job for ``run``'s iterations (module docstring): engine i on the ranks
    ``replicas[i]``, each iteration's work from ``works``, its collectives at ``quantised`` sizes."""
    graphs = [workload_pb2.ExecutionGraph(npu=rank) for group in replicas for rank in group]
    moves = KvMoves(run, replicas, quantised)
    for engine, group in enumerate(replicas):
        own = [record for record in run.record if record.engine == engine]
        for position, rank in enumerate(group):
            spans = _Builder(graphs[rank], group, quantised).replica(own, works, moves.waits)
            add_moves(graphs[rank], spans, engine, moves, position)
    return graphs


def replay_size(run: PoolRun, replicas: Sequence[Sequence[int]], works: Works) -> tuple[int, int]:
    """What :func:`replay_graphs` would build for ``run``, before building it: its graph nodes (a repeated layer
    counting once per run, as the block node it is) and the nodes the engine runs (blocks unrolled), over every
    rank, each iteration's wait and milestone included, and each KV move's sends and receives."""
    moves = KvMoves(run, replicas)
    nodes = events = 2 * moves.slices()
    ended: dict[int, int] = {}
    counts: dict[int, int] = {}
    for record in run.record:
        ranks = len(replicas[record.engine])
        for repeats, work in works(record.pool, record.shape).works:
            runs = _runs(work.stages[0])
            nodes += ranks * repeats * sum(size if times == 1 else times for times, size in runs)
            events += ranks * repeats * sum(times * size for times, size in runs)
        count = counts[record.engine] = counts.get(record.engine, -1) + 1
        waits = moves.waits((record.engine, count), record.start_ps, ended.get(record.engine, 0))
        own = ranks * (1 + waits)  # its milestone, and a wait before it
        nodes, events = nodes + own, events + own
        ended[record.engine] = record.end_ps
    return nodes, events


def _runs(steps: Sequence[tuple[int, object]]) -> list[tuple[int, int]]:
    """The runs of consecutive ``steps`` repeated alike, as (times, steps in the run) — the blocks of
    :meth:`_Builder._stage`."""
    runs: list[tuple[int, int]] = []
    for times, _ in steps:
        if runs and runs[-1][0] == times:
            runs[-1] = (times, runs[-1][1] + 1)
        else:
            runs.append((times, 1))
    return runs


class _Builder:
    """Appends a replica's iterations to one rank's ``graph``, each node after the last one added; its collectives
    over ``group`` at ``quantised`` sizes; blocks shared by the identical layers of an iteration's shape."""

    def __init__(self, graph: workload_pb2.ExecutionGraph, group: Sequence[int], quantised: Quantised) -> None:
        self.graph, self.group, self.quantised = graph, list(group), quantised
        self.blocks: dict[tuple[int, ...], int] = {}

    def replica(
        self, records: Sequence[IterationRecord], works: Works, waits: Callable[[tuple[int, int], int, int], bool]
    ) -> list[tuple[int, int]]:
        """The replica's iterations ``records`` in order, each's work from ``works``: a wait as long as the
        standalone one before it where ``waits`` (its engine and count, its start, the previous end) says, its
        first stage's steps (every pass it runs), its milestone; for each, the ids of its first node after the
        wait and of its milestone."""
        ended = 0
        spans = []
        for count, record in enumerate(records):
            if waits((record.engine, count), record.start_ps, ended):
                self._node(self.graph.nodes, name=WAITING, duration_ps=record.start_ps - ended)
            first = len(self.graph.nodes)
            for repeats, work in works(record.pool, record.shape).works:
                for _ in range(repeats):
                    self._stage(work.stages[0], work.tp)
            self._node(self.graph.nodes, name=milestone_name(record.engine, count), milestone=True)
            spans.append((first, len(self.graph.nodes) - 1))
            ended = record.end_ps
        return spans

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
        """A step's node after the last of ``nodes``: an operator, or a TP collective when the group is several
        NPUs."""
        if isinstance(step, Compute):
            self._node(nodes, name=step.name, op=step.op)
        elif isinstance(step, TensorParallelCollective) and tp > 1:
            size = self.quantised(step.comm_bytes)
            self._node(
                nodes,
                name=step.name,
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=step.kind,
                comm_bytes=size,
                group=self.group,
                pg_name="tp",
            )

    @staticmethod
    def _node(nodes: Any, **fields: object) -> None:
        """A node after the last of ``nodes`` (a compute node unless ``type`` says otherwise)."""
        added = nodes.add(id=len(nodes), **({"type": workload_pb2.COMP_NODE} | fields))
        if added.id:
            added.data_deps.append(added.id - 1)


def replayed_run(run: PoolRun, ends: Mapping[str, int]) -> PoolRun:
    """``run`` with its times moved to the shared run's (module docstring): ``ends`` the milestones' times, counted
    from the job's start."""
    starts: dict[tuple[int, int], int] = {}
    stops: dict[tuple[int, int], int] = {}
    first_engine: dict[int, int] = {}
    last_engine: dict[int, int] = {}
    previous: dict[int, tuple[int, int, int]] = {}  # an engine's iterations so far, last standalone and shared ends
    moves = KvMoves(run)
    arrived = [ends[move_milestone(index)] for index in range(len(run.moves))]
    for record in run.record:
        count, alone, shared = previous.get(record.engine, (0, 0, 0))
        key = (record.engine, count)
        end = ends[milestone_name(*key)]
        waited = record.start_ps - alone if moves.waits(key, record.start_ps, alone) else 0
        starts[record.engine, record.start_ps] = max(
            [shared + waited, *(arrived[i] for i in moves.consumed.get(key, ()))]
        )
        stops[record.engine, record.end_ps] = end
        previous[record.engine] = (count + 1, record.end_ps, end)
        for request in record.requests:
            first_engine.setdefault(request, record.engine)
            last_engine[request] = record.engine
    transfers = [
        arrived[index] - stops[move.source, move.sent_ps] for index, move in enumerate(run.moves) for _ in move.requests
    ]
    for move, at in zip(run.moves, arrived):  # an engine touched as a move arrives
        stops.setdefault((move.source, move.arrival_ps), at)
        stops.setdefault((move.destination, move.arrival_ps), at)
    sequences = [
        _moved(sequence, first_engine[sequence.request.index], last_engine[sequence.request.index], starts, stops)
        for sequence in run.sequences
    ]
    samples = [replace(sample, time_ps=_at(sample.engine, sample.time_ps, starts, stops)) for sample in run.samples]
    return replace(run, sequences=sequences, samples=samples, transfers_ps=transfers)


def _moved(sequence: Served, first: int, last: int, starts: Moves, stops: Moves) -> Served:
    """A copy of ``sequence`` (scheduled by engine ``first`` and finished by ``last``: its prefill and decode
    replicas, disaggregated) with its times moved."""
    return replace(
        sequence,
        scheduled_ps=_at(first, sequence.scheduled_ps, starts, stops),
        first_token_ps=stops.get((first, sequence.first_token_ps), sequence.first_token_ps),
        finish_ps=stops.get((last, sequence.finish_ps), sequence.finish_ps),
    )


def _at(engine: int, time_ps: int, starts: Moves, stops: Moves) -> int:
    """Where a standalone instant of ``engine`` (an iteration's start, else its end) lies in the shared run."""
    return starts.get((engine, time_ps), stops.get((engine, time_ps), time_ps))
