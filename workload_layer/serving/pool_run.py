"""What a request-level run of a study's pools produced (:mod:`~stratasim.workload_layer.serving.simulation`):
its requests' sequences, samples of each engine's state, and the record of every iteration and KV move it made —
what the metrics read and what a replay of the run on a shared fabric needs
(:mod:`~stratasim.workload_layer.serving.replay`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from stratasim.kernel.serving import IterationShape
from stratasim.workload_layer.serving.prefix_cache import PrefixCounts
from stratasim.workload_layer.serving.sequences import Sequence

__all__ = ["GroupStep", "IterationRecord", "KvMoveRecord", "PoolRun", "Sample"]


@dataclass(frozen=True)
class Sample:
    """An engine's state as an iteration starts or as it falls idle: when (ps), which engine (a replica, without
    pipeline parallelism; :attr:`PoolRun.engine_replicas` says whose), sequences batched, running, queued, KV
    blocks used."""

    time_ps: int
    engine: int
    batch: int
    running: int
    queued: int
    kv_blocks_used: int


class GroupStep(NamedTuple):
    """A member's share of an iteration of its expert-parallel group: the group's and its busiest member's tokens
    (bucketed, as the group's expert part was priced at them), when the member's own part ended and when the
    group's expert part started, after its slowest member's own part (ps)."""

    group_tokens: int
    member_tokens: int
    own_end_ps: int
    experts_start_ps: int


@dataclass(frozen=True)
class IterationRecord:
    """An iteration an engine ran: its ``engine``, its ``pool``, when it started and ended (ps), its bucketed
    ``shape``, the requests it batched (their indices in arrival order), when it left each pipeline stage
    (``stage_ends_ps``, its end last), in an expert-parallel group its share of the group's iteration (``experts``;
    a member with nothing to run has no requests and an empty shape) and, with ``preemption: swap``, the picoseconds
    of its KV copies to host memory and back each stage waited for before its own part (``swaps``: out, in) — what
    a replay of the run on a shared fabric needs (:mod:`~stratasim.workload_layer.serving.replay`)."""

    engine: int
    pool: int
    start_ps: int
    end_ps: int
    shape: IterationShape
    requests: tuple[int, ...]
    stage_ends_ps: tuple[int, ...]
    experts: GroupStep | None = None
    swaps: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class KvMoveRecord:
    """A KV move the run made, from engine ``source`` to engine ``destination`` (disaggregated): handed off by the
    source's iteration ending at ``sent_ps``, started at ``start_ps`` (later when it queued behind earlier moves at
    the replicas), arrived at ``arrival_ps``; ``size`` bytes (all the replica's NPUs together, as the
    :class:`~stratasim.kernel.serving.KvMove` priced) carrying the caches of ``requests`` (their indices in arrival
    order) — what a replay of the run needs besides its iterations."""

    source: int
    destination: int
    sent_ps: int
    start_ps: int
    arrival_ps: int
    size: int
    requests: tuple[int, ...]


@dataclass
class PoolRun:
    """What a run produced: every request's sequence (in arrival order), the per-iteration samples, the
    iterations run and the distinct shapes priced, preemptions (``swap_outs`` of them swapped to host memory, for
    ``swap_ps`` of copies either way), the decode steps and tokens of speculative decoding, the first pool's KV
    blocks per replica (``kv_blocks``), each engine's blocks and peak use, each handed-off sequence's KV transfer
    time (ps), the replica of each engine, and how many iterations of each pool and shape (and expert parts of each
    pool and bucketed tokens) ran; ``record``: every iteration run, in start
    order (an expert-parallel group's for each member); ``moves``: every KV move, in the order they started;
    ``prefix``: what the prefix caches saw, summed over the engines (None when no pool caches prefixes)."""

    sequences: list[Sequence]
    samples: list[Sample] = field(default_factory=list)
    iterations: int = 0
    shapes_priced: int = 0
    preemptions: int = 0
    swap_outs: int = 0
    swap_ps: int = 0
    speculative_steps: int = 0
    speculative_tokens: int = 0
    kv_blocks: int = 0
    kv_peak_blocks: list[int] = field(default_factory=list)
    kv_replica_blocks: list[int] = field(default_factory=list)
    transfers_ps: list[int] = field(default_factory=list)
    engine_replicas: list[int] = field(default_factory=list)
    shape_runs: dict[tuple[int, IterationShape], int] = field(default_factory=dict)
    expert_runs: dict[tuple[int, int, int], int] = field(default_factory=dict)
    record: list[IterationRecord] = field(default_factory=list)
    moves: list[KvMoveRecord] = field(default_factory=list)
    prefix: PrefixCounts | None = None
