"""What one run of a block does, measured from its start: how an executor replays a block it runs whole."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from stratasim.system_layer.result import CollectiveStats
from stratasim.system_layer.trace import BlockSpans

__all__ = ["BlockRun", "BlockTrace"]


@dataclass(frozen=True)
class BlockTrace:
    """What a block's run shows in a trace, relative to its start: its ``spans`` (a span named after a collective
    points at ``BlockRun.collectives``; a node's span is named after the block node and the node) and ``memory``
    samples as (time, bytes held above what the NPU held when it started)."""

    spans: BlockSpans
    memory: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class BlockRun:
    """A block's run on one NPU, every time relative to its start (see :mod:`stratasim.system_layer.engine.macros`).

    ``duration_ps`` until its last node is done; ``compute_ps`` of it computing; ``idle_from_ps`` when its
    compute stream last ran dry (``duration_ps`` if it computed to the end); ``exposed`` the idle time charged
    inside it by what was waited on, and ``tail`` what the idle walk charges when it comes back into the block (label, ps, where)
    from its end (from ``idle_from_ps`` to the end); ``peak`` the most memory it held above what the NPU held
    when it started, and when (None: never above), ``memory_delta`` what it holds at its end. The scheduler's
    side: ``comm_ps`` with a collective in flight, ``bytes_sent`` by dimension, ``reductions`` by size and
    ``issued`` collectives by group; ``collectives`` their statistics in issue order, ``milestones`` its
    milestone nodes' names and finish times; ``trace`` what a trace shows of it, when it was recorded for one.
    ``compute_at``, ``comm_at`` and ``exposed_at`` split its compute time, time with collectives in flight and
    exposed time (where, label, ps) by the node of the block they fall to, by position (see
    :mod:`stratasim.system_layer.engine.node_times`), when recorded for node times (empty otherwise).
    """

    duration_ps: int
    compute_ps: int
    idle_from_ps: int
    exposed: tuple[tuple[str, int], ...]
    tail: tuple[tuple[str, int, tuple[int, ...]], ...]
    peak: tuple[int, int] | None
    memory_delta: int
    comm_ps: int
    bytes_sent: tuple[tuple[int, int], ...]
    reductions: Counter[int]
    issued: tuple[tuple[tuple[int, ...], int], ...]
    collectives: tuple[CollectiveStats, ...]
    milestones: tuple[tuple[str, int], ...]
    trace: BlockTrace | None = None
    compute_at: tuple[tuple[int, int], ...] = ()
    comm_at: tuple[tuple[int, int], ...] = ()
    exposed_at: tuple[tuple[tuple[int, ...], str, int], ...] = ()
