"""Every collective's statistics in the order they started, numbered so; built as they are read.

A whole model's iteration issues hundreds of thousands of collectives, nearly all inside blocks run whole
(:mod:`stratasim.system_layer.engine.macros`): each is its block's first run shifted in time. The log keeps
those first runs, each run's start, and the order of all collectives (one numpy sort on start, NPU and issue
number), and makes a :class:`~stratasim.system_layer.result.CollectiveStats` only when one is read — a report
printing twenty of them makes twenty.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, overload

import numpy as np

from stratasim.system_layer.result import CollectiveStats

__all__ = ["CollectiveColumns", "CollectiveLog", "Replays", "columns"]

Replays = tuple[tuple[CollectiveStats, ...], np.ndarray, np.ndarray, np.ndarray]
"""A block's collectives (first run, from its start) and, per run of it, its start, NPU and first issue number."""


class CollectiveColumns(NamedTuple):
    """Every collective by number as the statistics it shares with others (``templates[kind[i]]``: all but its
    number and times, which are those of the template's first run) and its own ``start_ps`` and ``end_ps``: how a
    writer goes through hundreds of thousands of collectives without a :class:`CollectiveStats` each."""

    templates: list[CollectiveStats]
    kind: np.ndarray
    start_ps: np.ndarray
    end_ps: np.ndarray


def columns(collectives: Sequence[CollectiveStats]) -> CollectiveColumns:
    """``collectives`` (numbered 0, 1, ... in order) as :class:`CollectiveColumns`; a log's without making each."""
    if isinstance(collectives, CollectiveLog):
        return collectives.columns()
    return CollectiveColumns(
        list(collectives),
        np.arange(len(collectives), dtype=np.int64),
        np.array([stats.start_ps for stats in collectives], dtype=np.int64),
        np.array([stats.end_ps for stats in collectives], dtype=np.int64),
    )


class CollectiveLog(Sequence[CollectiveStats]):
    """The collectives of a run in the order they started: ``direct`` (statistics of collectives run node by
    node, each with its start, first issuing NPU and issue number) and ``replays`` (per block run whole, see
    :data:`Replays`). Ties in start time go to the lowest NPU issuing first, then its issue order."""

    def __init__(self, direct: Sequence[tuple[CollectiveStats, int, int]], replays: Sequence[Replays]) -> None:
        self._direct = [stats for stats, _, _ in direct]
        self._replays = list(replays)  # each with collectives and runs
        starts = [np.array([stats.start_ps for stats in self._direct], dtype=np.int64)]
        npus = [np.array([npu for _, npu, _ in direct], dtype=np.int64)]
        issues = [np.array([issue for _, _, issue in direct], dtype=np.int64)]
        bases = [len(self._direct)]
        for collectives, run_starts, run_npus, run_issues in self._replays:
            count = len(collectives)
            offsets = np.array([stats.start_ps for stats in collectives], dtype=np.int64)
            starts.append((run_starts[:, None] + offsets[None, :]).ravel())
            npus.append(np.repeat(run_npus, count))
            issues.append((run_issues[:, None] + np.arange(count, dtype=np.int64)[None, :]).ravel())
            bases.append(bases[-1] + len(run_starts) * count)
        self._bases = np.array(bases, dtype=np.int64)  # where each part's collectives start in the flat order
        self._order = np.lexsort((np.concatenate(issues), np.concatenate(npus), np.concatenate(starts)))

    def numbers(self) -> np.ndarray:
        """Each collective's number, by its place in the parts: ``direct`` first, then each replay's runs in
        turn, each run's collectives in order (see :meth:`place`)."""
        numbers = np.empty_like(self._order)
        numbers[self._order] = np.arange(len(self._order))
        return numbers

    def place(self, replay: int, run: int, which: int) -> int:
        """The place in the parts of collective ``which`` of run ``run`` of ``replays[replay]``."""
        return int(self._bases[replay]) + run * len(self._replays[replay][0]) + which

    def columns(self) -> CollectiveColumns:
        """The log as :class:`CollectiveColumns`: a block's collectives share its first run's as templates."""
        direct = self._direct
        templates = list(direct)
        kinds = [np.arange(len(direct), dtype=np.int64)]
        starts = [np.array([stats.start_ps for stats in direct], dtype=np.int64)]
        ends = [np.array([stats.end_ps for stats in direct], dtype=np.int64)]
        for collectives, run_starts, _, _ in self._replays:
            first = len(templates)
            templates.extend(collectives)
            kinds.append(np.tile(np.arange(first, len(templates), dtype=np.int64), len(run_starts)))
            for out, offsets in ((starts, [s.start_ps for s in collectives]), (ends, [s.end_ps for s in collectives])):
                out.append((run_starts[:, None] + np.array(offsets, dtype=np.int64)[None, :]).ravel())
        order = self._order
        return CollectiveColumns(
            templates, np.concatenate(kinds)[order], np.concatenate(starts)[order], np.concatenate(ends)[order]
        )

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> CollectiveStats: ...

    @overload
    def __getitem__(self, index: slice) -> list[CollectiveStats]: ...

    def __getitem__(self, index: int | slice) -> CollectiveStats | list[CollectiveStats]:
        if isinstance(index, slice):
            return [self._make(number, int(self._order[number])) for number in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(f"collective {index} of {len(self)}")
        number = index % len(self)
        return self._make(number, int(self._order[number]))

    def __iter__(self) -> Iterator[CollectiveStats]:
        parts = np.searchsorted(self._bases, self._order, side="right")
        for number, (flat, part) in enumerate(zip(self._order.tolist(), parts.tolist())):
            yield self._make(number, flat, part)

    def _make(self, number: int, flat: int, part: int | None = None) -> CollectiveStats:
        """Collective ``number``, at place ``flat`` in the parts (in part ``part``, found if not given)."""
        if part is None:
            part = int(np.searchsorted(self._bases, flat, side="right"))
        if part == 0:
            return CollectiveStats._make((number, *self._direct[flat][1:]))
        collectives, run_starts, _, _ = self._replays[part - 1]
        run, which = divmod(flat - int(self._bases[part - 1]), len(collectives))
        stats, shift = collectives[which], int(run_starts[run])
        return CollectiveStats._make((number, *stats[1:4], stats.start_ps + shift, stats.end_ps + shift, *stats[6:]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"CollectiveLog({len(self)} collectives)"

    def __reduce__(self) -> tuple[Any, ...]:
        return tuple, (tuple(self),)
