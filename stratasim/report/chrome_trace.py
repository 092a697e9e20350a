"""Busy spans as a Chrome / Perfetto trace (the JSON "Trace Event Format"), one process per simulated NPU.

Each NPU the engine simulated is a process (``pid`` = NPU id). When NPUs equivalent by symmetry were simulated
once, a process stands for several NPUs: its name says how many (``NPU 0 (stands for 64 NPUs)``) and its
``process_labels`` metadata, like the ``stands_for`` argument of its ``process_name``, lists them as ranges
(``0-7,64-71``). Each track is a thread named by a ``thread_name`` metadata event: ``compute`` first, then the
communication tracks (``comm``, ``comm phase 0 (dim 0)``...) in natural order. Spans are complete events
(``"ph": "X"``) whose ``ts`` and ``dur`` are microseconds, as the format requires; picoseconds divide exactly
enough into floats for any trace a viewer can open. Counter samples (an NPU's memory, in ``bytes``; a serving
replica's batch size, queue length and KV blocks in use on its first NPU, as a ``value``) are counter events
(``"ph": "C"``) in time order, drawn as a graph above the NPU's tracks.

With ``layers`` (a run asked for its per-layer breakdown), an NPU whose compute spans name the passes of a
transformer's blocks gets a ``layers`` track above its compute track: a span per run of its compute spans in one
pass of one block for one micro-batch (``mb3 layer5 forward``), from the first one's start to the last one's end, so
the waits inside the pass (its TP collectives, say) lie within the span.

When links were recorded, a last process, ``network`` (``pid`` one past the last NPU's), has one counter per
link, named after it, whose ``busy`` value is 1 while the link transmits and 0 otherwise: a 1 at the start of
each busy stretch, a 0 at its end.

:func:`write_chrome_trace` streams the events to a file one by one, in memory that does not grow with the trace;
:func:`chrome_trace` gives the same events as a document, for small traces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

import numpy as np

from stratasim.kernel.npu_ids import npu_ranges
from stratasim.kernel.units import ps_to_us
from stratasim.system_layer.result import CounterSample, LinkBusy, TraceSpan
from stratasim.system_layer.trace import SpanLog
from stratasim.workload_layer.transformer.node_names import pass_span

__all__ = ["chrome_trace", "write_chrome_trace"]

_Spans = Sequence[TraceSpan] | SpanLog
LAYERS = "layers"
"""The track of the passes of a transformer's blocks (see the module docstring)."""


def _track_order(track: str) -> tuple[bool, list[int | str]]:
    """Compute first, then natural order, so ``comm phase 10`` follows ``comm phase 9``."""
    parts: list[int | str] = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", track)]
    return track != "compute", parts


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> str:
    return json.dumps({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}, separators=(",", ":"))


def _processes(npus: Iterable[int], stands_for: Mapping[int, tuple[int, ...]] | None) -> Iterator[str]:
    """Each NPU's name and sort index, saying which NPUs it stands for when it stands for others."""
    for npu in sorted(npus):
        lived = stands_for.get(npu, (npu,)) if stands_for is not None else (npu,)
        if lived == (npu,):
            yield _metadata("process_name", npu, 0, {"name": f"NPU {npu}"})
        else:
            ranges = npu_ranges(sorted(lived), ",")
            yield _metadata(
                "process_name", npu, 0, {"name": f"NPU {npu} (stands for {len(lived)} NPUs)", "stands_for": ranges}
            )
            yield _metadata("process_labels", npu, 0, {"labels": f"stands for NPUs {ranges}"})
        yield _metadata("process_sort_index", npu, 0, {"sort_index": npu})


_PLAIN = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII but the quote and the backslash: JSON as it is
_PLAIN_BYTES = re.compile(rb"[ !#-\[\]-~]*")


def _quoted(text: str) -> str:
    """``text`` as a JSON string, as ``json.dumps`` writes it (a million span names: the common case, plain
    text, skips the encoder)."""
    return f'"{text}"' if _PLAIN.fullmatch(text) else json.dumps(text)


def _columns(spans: _Spans) -> Iterator[tuple[int, str, str, int, int]]:
    if isinstance(spans, SpanLog):
        yield from spans.rows()
    else:
        for span in spans:
            yield span.npu, span.track, span.name, span.start_ps, span.end_ps


def _tracks(spans: _Spans) -> set[tuple[int, str]]:
    """The (NPU, track) pairs the spans occupy (from a span log's columns without reading its names)."""
    if not isinstance(spans, SpanLog):
        return {(npu, track) for npu, track, *_ in _columns(spans)}
    width = max(len(spans.tracks), 1)
    npus = np.frombuffer(spans.npu, dtype=np.int32).astype(np.int64)
    tracks = np.frombuffer(spans.track, dtype=np.int32).astype(np.int64)
    pairs = np.unique(npus * width + tracks)
    return {(int(pair) // width, spans.tracks[int(pair) % width]) for pair in pairs}


def trace_events(
    spans: _Spans,
    counters: Iterable[CounterSample] = (),
    links: Iterable[LinkBusy] = (),
    npus: int = 0,
    stands_for: Mapping[int, tuple[int, ...]] | None = None,
    layers: bool = False,
) -> Iterator[str]:
    """Each event of the trace as JSON text: metadata, then spans, then counters, then the network's links.
    ``spans`` is read twice (for the tracks, then the events; three times with ``layers``) and never copied."""
    for batch in _event_batches(spans, counters, links, npus, stands_for, layers):
        yield from batch


def _layer_spans(spans: _Spans) -> Iterator[tuple[int, str, int, int]]:
    """The ``layers`` track's spans, ``(npu, name, start_ps, end_ps)``: each NPU's runs of compute spans in one
    block pass (a compute span outside the blocks' passes ends a run)."""
    runs: dict[int, tuple[str | None, int, int]] = {}
    for npu, track, name, start, end in _columns(spans):
        if track != "compute":
            continue
        label = pass_span(name)
        run = runs.get(npu)
        if run is not None and run[0] == label:
            runs[npu] = (label, run[1], max(run[2], end))
            continue
        if run is not None and run[0] is not None:
            yield npu, run[0], run[1], run[2]
        runs[npu] = (label, start, end)
    for npu, (label, start, end) in sorted(runs.items()):
        if label is not None:
            yield npu, label, start, end


def _layer_events(spans: _Spans, tid: int) -> list[str]:
    """The ``layers`` track of every NPU that has one: its name and place (above compute), then its spans."""
    found = list(_layer_spans(spans))
    head = []
    for npu in sorted({npu for npu, *_ in found}):
        head.append(_metadata("thread_name", npu, tid, {"name": LAYERS}))
        head.append(_metadata("thread_sort_index", npu, tid, {"sort_index": 0}))
    category = f'"cat":"{LAYERS}","tid":{tid}'
    return head + [_span_event(name, category, npu, start, end) for npu, name, start, end in found]


def _event_batches(
    spans: _Spans,
    counters: Iterable[CounterSample],
    links: Iterable[LinkBusy],
    npus: int,
    stands_for: Mapping[int, tuple[int, ...]] | None,
    layers: bool = False,
) -> Iterator[list[str]]:
    """The events of :func:`trace_events` in batches (a span log's spans formatted a chunk of columns at a time)."""
    pairs = _tracks(spans)
    counters = list(counters)
    tids = {track: index + 1 for index, track in enumerate(sorted({t for _, t in pairs}, key=_track_order))}
    head = list(_processes({npu for npu, _ in pairs}, stands_for))
    for npu, track in sorted(pairs, key=lambda p: (p[0], tids[p[1]])):
        head.append(_metadata("thread_name", npu, tids[track], {"name": track}))
        head.append(_metadata("thread_sort_index", npu, tids[track], {"sort_index": tids[track]}))
    yield head
    categories = {track: f'"cat":{json.dumps(track)},"tid":{tid}' for track, tid in tids.items()}
    if isinstance(spans, SpanLog):
        yield from _span_log_events(spans, categories)
    else:
        yield [
            _span_event(name, categories[track], npu, start, end) for npu, track, name, start, end in _columns(spans)
        ]
    if layers:
        yield _layer_events(spans, len(tids) + 1)
    yield [
        _counter_event(
            sample.name, sample.npu, sample.time_ps, {"bytes" if sample.name == "memory" else "value": sample.value}
        )
        for sample in counters
    ]
    recorded = list(links)
    if recorded:
        known = [npu for npu, _ in pairs] + [sample.npu for sample in counters]
        yield _link_events(recorded, max(npus, 1 + max(known, default=-1)))


def _counter_event(name: str, pid: int, time_ps: int, args: dict[str, int]) -> str:
    """One counter event ("ph": "C") of process ``pid``, as compact JSON."""
    return json.dumps(
        {"ph": "C", "name": name, "pid": pid, "ts": ps_to_us(time_ps), "args": args}, separators=(",", ":")
    )


def _link_events(links: list[LinkBusy], network: int) -> list[str]:
    """The links' busy stretches as counters (1 from a stretch's start, 0 from its end) of a ``network`` process."""
    batch = [
        _metadata("process_name", network, 0, {"name": "network"}),
        _metadata("process_sort_index", network, 0, {"sort_index": network}),
    ]
    for link in links:
        for span in link.spans:
            for time_ps, value in zip(span, (1, 0)):
                batch.append(_counter_event(link.link, network, time_ps, {"busy": value}))
    return batch


def _span_event(name: str, category: str, npu: int, start_ps: int, end_ps: int) -> str:
    return (
        f'{{"ph":"X","name":{_quoted(name)},{category},"pid":{npu},'
        f'"ts":{ps_to_us(start_ps)!r},"dur":{ps_to_us(end_ps - start_ps)!r}}}'
    )


_CHUNK = 1 << 16


def _span_log_events(spans: SpanLog, categories: Mapping[str, str]) -> Iterator[list[str]]:
    """A span log's spans as events, a chunk of its columns at a time: times divided in numpy (the same floats
    as :func:`ps_to_us`), names quoted only if some name needs escaping."""
    by_id = [categories[track] for track in spans.tracks]
    npu = np.frombuffer(spans.npu, dtype=np.int32)
    track = np.frombuffer(spans.track, dtype=np.int32)
    start = np.frombuffer(spans.start_ps, dtype=np.int64)
    end = np.frombuffer(spans.end_ps, dtype=np.int64)
    at = np.frombuffer(spans.name_at, dtype=np.int64)
    length = np.frombuffer(spans.name_length, dtype=np.int32)
    text = bytes(spans.text)
    plain = _PLAIN_BYTES.fullmatch(text) is not None
    for lo in range(0, len(spans), _CHUNK):
        hi = min(lo + _CHUNK, len(spans))
        names = [text[a : a + n].decode() for a, n in zip(at[lo:hi].tolist(), length[lo:hi].tolist())]
        quoted = [f'"{name}"' for name in names] if plain else [_quoted(name) for name in names]
        ts = (start[lo:hi] / 1_000_000).tolist()
        dur = ((end[lo:hi] - start[lo:hi]) / 1_000_000).tolist()
        cats = [by_id[t] for t in track[lo:hi].tolist()]
        yield [
            f'{{"ph":"X","name":{q},{c},"pid":{p},"ts":{t!r},"dur":{d!r}}}'
            for q, c, p, t, d in zip(quoted, cats, npu[lo:hi].tolist(), ts, dur)
        ]


def chrome_trace(
    spans: _Spans,
    counters: Iterable[CounterSample] = (),
    links: Iterable[LinkBusy] = (),
    npus: int = 0,
    stands_for: Mapping[int, tuple[int, ...]] | None = None,
    layers: bool = False,
) -> dict[str, Any]:
    """The trace document for ``spans``, ``counters`` and the ``links`` of a run on ``npus`` NPUs (at least those
    the spans and counters name), ``stands_for`` saying which NPUs each simulated NPU stands for, with ``layers``
    the ``layers`` tracks: ``{"traceEvents": [...], "displayTimeUnit": "ns"}``."""
    return {
        "traceEvents": [json.loads(e) for e in trace_events(spans, counters, links, npus, stands_for, layers)],
        "displayTimeUnit": "ns",
    }


def write_chrome_trace(
    file: IO[str],
    spans: _Spans,
    counters: Iterable[CounterSample] = (),
    links: Iterable[LinkBusy] = (),
    npus: int = 0,
    stands_for: Mapping[int, tuple[int, ...]] | None = None,
    layers: bool = False,
) -> None:
    """Write the document :func:`chrome_trace` builds to ``file``, a batch of events at a time."""
    file.write('{"displayTimeUnit":"ns","traceEvents":[')
    separator = "\n"
    for batch in _event_batches(spans, counters, links, npus, stands_for, layers):
        if batch:
            file.write(separator)
            file.write(",\n".join(batch))
            separator = ",\n"
    file.write("\n]}\n")
