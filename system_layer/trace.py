"""What a run records for its trace: which part (:class:`TraceSelection`) and how, compactly (:class:`SpanLog`).

A whole-model run busies millions of nodes; one :class:`~stratasim.system_layer.spans.TraceSpan` object per busy
span would cost a few hundred bytes each. :class:`SpanLog` keeps spans column by column in machine integers, each
track once and the names as UTF-8 in one buffer (about 70 bytes a span), and hands out ``TraceSpan`` objects only
when read. Only the NPUs the engine simulated
are recorded: an NPU standing in for others by symmetry is recorded once, and
:attr:`~stratasim.system_layer.result.SimulationResult.stand_ins` says whom it stands for.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Protocol

import numpy as np

from stratasim.system_layer.spans import CounterSample, TraceSpan
from stratasim.system_layer.trace_detail import AUTO_NODE_LIMIT, TraceDetail

__all__ = [
    "AUTO_NODE_LIMIT",
    "TraceDetail",
    "TraceSelection",
    "SpanLog",
    "TraceRecorder",
    "BlockSpans",
    "WAITING_TRACK",
]


WAITING_TRACK = "waiting"
"""The track of wait nodes' spans (``WAIT_NODE``): an NPU waiting on purpose, neither computing nor communicating."""


@dataclass(frozen=True)
class TraceSelection:
    """The part of a run to record: the NPUs in ``npus`` (None: all), spans overlapping ``[start_ps, end_ps]``
    (``end_ps`` None: to the end), at ``detail``. A simulated NPU is recorded when it, or any NPU it stands for
    by symmetry, is selected."""

    npus: frozenset[int] | None = None
    start_ps: int = 0
    end_ps: int | None = None
    detail: TraceDetail = TraceDetail.AUTO

    def overlaps(self, start_ps: int, end_ps: int) -> bool:
        """Whether a span from ``start_ps`` to ``end_ps`` shows in the window (touching its edges counts)."""
        return end_ps >= self.start_ps and (self.end_ps is None or start_ps <= self.end_ps)


class SpanLog:
    """Busy spans stored column by column, names as UTF-8 in one buffer (a whole-model run gives nearly every span
    a name of its own); reads as a sequence of :class:`TraceSpan` in recording order, or after :meth:`sorted` by
    NPU, start, end and track. Two logs are equal when they hold the same spans in the same order; a log also
    equals a tuple of the same ``TraceSpan`` objects."""

    def __init__(self) -> None:
        self.npu = array("i")
        self.track = array("i")  # index into tracks
        self.start_ps = array("q")
        self.end_ps = array("q")
        self.name_at = array("q")  # where the name starts in text
        self.name_length = array("i")
        self.text = bytearray()
        self.tracks: list[str] = []
        self._track_ids: dict[str, int] = {}

    def append(self, npu: int, track: str, name: str, start_ps: int, end_ps: int) -> None:
        """Record one span."""
        self.npu.append(npu)
        track_id = self._track_ids.get(track)
        if track_id is None:
            track_id = self._track_ids[track] = len(self.tracks)
            self.tracks.append(track)
        self.track.append(track_id)
        self.start_ps.append(start_ps)
        self.end_ps.append(end_ps)
        encoded = name.encode()
        self.name_at.append(len(self.text))
        self.name_length.append(len(encoded))
        self.text += encoded

    def track_id(self, track: str) -> int:
        """The index of ``track`` in ``tracks``, adding it if new."""
        track_id = self._track_ids.get(track)
        if track_id is None:
            track_id = self._track_ids[track] = len(self.tracks)
            self.tracks.append(track)
        return track_id

    def extend(
        self, npu: int, tracks: Sequence[int], starts: Sequence[int], ends: Sequence[int], names: Sequence[bytes]
    ) -> None:
        """Record many spans of ``npu`` at once: their track ids, start and end times and UTF-8 names."""
        if not names:
            return
        self.npu.extend([npu] * len(starts))
        self.track.extend(tracks)
        self.start_ps.extend(starts)
        self.end_ps.extend(ends)
        lengths = list(map(len, names))
        self.name_at.extend(accumulate(lengths[:-1], initial=len(self.text)))
        self.name_length.extend(lengths)
        self.text += b"".join(names)

    def rename(self, index: int, name: str) -> None:
        """Give span ``index`` (in recording order) the name ``name``."""
        encoded = name.encode()
        self.name_at[index] = len(self.text)
        self.name_length[index] = len(encoded)
        self.text += encoded

    def rows(self) -> Iterator[tuple[int, str, str, int, int]]:
        """Each span as ``(npu, track, name, start_ps, end_ps)``, without building ``TraceSpan`` objects."""
        tracks, text = self.tracks, self.text
        columns = zip(self.npu, self.track, self.name_at, self.name_length, self.start_ps, self.end_ps)
        for npu, track, at, length, start, end in columns:
            yield npu, tracks[track], text[at : at + length].decode(), start, end

    def __len__(self) -> int:
        return len(self.npu)

    def __iter__(self) -> Iterator[TraceSpan]:
        return (TraceSpan(*row) for row in self.rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpanLog | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable while recording

    def __repr__(self) -> str:
        return f"SpanLog({len(self)} spans)"

    def sort(self) -> SpanLog:
        """Order the spans by NPU, start, end and track (tracks compared as text), ties in recording order, one
        column at a time (so sorting holds one extra column at most); the log itself."""
        ranks = np.empty(len(self.tracks), dtype=np.int64)
        ranks[sorted(range(len(self.tracks)), key=self.tracks.__getitem__)] = np.arange(len(self.tracks))
        keys = [np.frombuffer(column, dtype=column.typecode) for column in (self.end_ps, self.start_ps, self.npu)]
        order = np.lexsort((ranks[np.frombuffer(self.track, dtype=self.track.typecode)], *keys))
        del keys
        for name in ("npu", "track", "start_ps", "end_ps", "name_at", "name_length"):
            column: array[int] = getattr(self, name)
            ordered = array(column.typecode, np.frombuffer(column, dtype=column.typecode)[order].tobytes())
            setattr(self, name, ordered)
        return self


@dataclass(frozen=True)
class BlockSpans:
    """A block run's spans relative to its start, by column: ``tracks`` the distinct tracks and ``track_of`` each
    span's index in them, ``starts`` and ``ends``, ``names`` (UTF-8, a node's own name), ``collective`` the index
    of the collective a span is named after (-1: a node's span) and ``suffixes`` what follows its number."""

    tracks: tuple[str, ...]
    track_of: tuple[int, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    names: tuple[bytes, ...]
    collective: tuple[int, ...]
    suffixes: tuple[str, ...]

    @cached_property
    def shows_collectives(self) -> bool:
        """Whether a span is named after a collective (else a run's collectives need no names)."""
        return any(index >= 0 for index in self.collective)

    @cached_property
    def earliest_end(self) -> int:
        return min(self.ends)

    @cached_property
    def latest_start(self) -> int:
        return max(self.starts)


class Numbered(Protocol):
    """A collective as its spans name it: its kind, and its number in the result (set after the run)."""

    kind: str
    number: int


class TraceRecorder:
    """Keeps the spans and memory samples a :class:`TraceSelection` asks for, of the simulated NPUs in ``npus``."""

    def __init__(self, selection: TraceSelection, npus: Iterable[int]) -> None:
        self.selection = selection
        self.nodes = selection.detail in (TraceDetail.NODES, TraceDetail.BLOCKS)
        self.npus = frozenset(npus)
        self.spans = SpanLog()
        self.counters: list[CounterSample] = []
        self._before: dict[tuple[int, str], int] = {}  # the last value of each counter before the window opened
        self._numbered: list[tuple[int, Numbered, str]] = []  # spans named after a collective's number, once known

    def span(self, npu: int, track: str, name: str, start_ps: int, end_ps: int) -> None:
        """Record a busy span of ``npu`` if the selection keeps it."""
        if npu in self.npus and self.selection.overlaps(start_ps, end_ps):
            self.spans.append(npu, track, name, start_ps, end_ps)

    def collective_span(
        self, npu: int, track: str, collective: Numbered, suffix: str, start_ps: int, end_ps: int
    ) -> None:
        """Record a busy span of ``collective``, named ``<kind> #<number><suffix>`` once the collectives are numbered
        (:meth:`name_collectives`): in the order they started, as the result lists them."""
        if npu in self.npus and self.selection.overlaps(start_ps, end_ps):
            self._numbered.append((len(self.spans), collective, suffix))
            self.spans.append(npu, track, "", start_ps, end_ps)

    def block_spans(
        self, npu: int, block: BlockSpans, start_ps: int, scope: str, collectives: Sequence[Numbered]
    ) -> None:
        """Record the spans of a block run ``start_ps`` in, if the selection keeps them: a node's named after the
        block node (``scope``) and itself, a collective's after ``collectives[i]`` once it is numbered, and a span
        without a name (the whole run) after the block node."""
        if npu not in self.npus or not block.starts:
            return
        if len(block.starts) == 1 and not block.names[0] and block.collective[0] < 0:  # the whole run, at block detail
            self.span(npu, block.tracks[0], scope, start_ps + block.starts[0], start_ps + block.ends[0])
            return
        selection, spans = self.selection, self.spans
        chosen: Sequence[int] = range(len(block.starts))
        if block.earliest_end + start_ps < selection.start_ps or (
            selection.end_ps is not None and block.latest_start + start_ps > selection.end_ps
        ):  # the window cuts the block: keep the spans it overlaps
            chosen = [i for i in chosen if selection.overlaps(block.starts[i] + start_ps, block.ends[i] + start_ps)]
        first = len(spans)
        prefix = scope.encode() + b" " if scope else b""
        ids = [spans.track_id(track) for track in block.tracks]
        spans.extend(
            npu,
            [ids[block.track_of[i]] for i in chosen],
            [block.starts[i] + start_ps for i in chosen],
            [block.ends[i] + start_ps for i in chosen],
            [b"" if block.collective[i] >= 0 else prefix + block.names[i] for i in chosen],
        )
        for at, i in enumerate(chosen):
            if block.collective[i] >= 0:
                self._numbered.append((first + at, collectives[block.collective[i]], block.suffixes[i]))

    def collective_spans(self) -> list[tuple[int, Numbered, str]]:
        """The spans named after a collective so far: (span index in recording order, collective, suffix)."""
        return list(self._numbered)

    def name_collectives(self) -> None:
        """Name the collectives' spans, now that each collective has its ``number``."""
        for index, collective, suffix in self._numbered:
            self.spans.rename(index, f"{collective.kind} #{collective.number}{suffix}")
        self._numbered = []

    def counter(self, npu: int, name: str, time_ps: int, value: int) -> None:
        """Record a counter sample (node detail only); one taken before the window opens is kept as the value
        the counter has when it does."""
        selection = self.selection
        if not self.nodes or npu not in self.npus or (selection.end_ps is not None and time_ps > selection.end_ps):
            return
        if time_ps < selection.start_ps:
            self._before[(npu, name)] = value
        else:
            self.counters.append(CounterSample(npu, name, time_ps, value))

    def samples(self) -> list[CounterSample]:
        """The counter samples kept, each counter's value at the window's start first, sorted by NPU and time."""
        opening = [
            CounterSample(npu, name, self.selection.start_ps, value) for (npu, name), value in self._before.items()
        ]
        return sorted(opening + self.counters, key=lambda c: (c.npu, c.time_ps))
