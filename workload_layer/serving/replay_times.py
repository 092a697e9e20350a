"""A serving job's standalone run with its times moved to those of its replay on the shared fabric.

:func:`replayed_run` moves the run's times to the shared run's (:mod:`~stratasim.workload_layer.serving.replay`
builds the graphs whose milestones give them): each iteration ends when its milestone says, starts its standalone
gap after the previous one's shared end (or as its KV moves arrived), and each request's scheduling, first token and
finish move with the iterations that made them; each KV move arrives when its milestone says. Which requests batch
together does not change (the decisions are frozen): a full co-simulation would let the slowed iterations change
them. Nor does when a session's later turn arrives: its predecessor's standalone finish and its think time, not
its predecessor's finish in the shared run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.replay import milestone_name
from stratasim.workload_layer.serving.replay_moves import KvMoves, move_milestone
from stratasim.workload_layer.serving.sequences import Sequence as Served

__all__ = ["replayed_run"]

Moves = Mapping[tuple[int, int], int]
"""Instants of an engine in the standalone run, by (engine, time), and where they lie in the shared run."""


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
