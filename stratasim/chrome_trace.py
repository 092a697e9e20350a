"""Busy spans as a Chrome / Perfetto trace (the JSON "Trace Event Format"), one process per NPU.

Each NPU is a process (``pid`` = NPU id) and each track a thread named by a ``thread_name`` metadata event:
``compute`` first, then the communication tracks (``comm phase 0``, ``comm phase 1``...) in natural order.
Spans are complete events (``"ph": "X"``) whose ``ts`` and ``dur`` are microseconds, as the format requires;
picoseconds divide exactly enough into floats for any trace a viewer can open. Counter samples (an NPU's
memory) are counter events (``"ph": "C"``), drawn as a graph above the NPU's tracks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from system_layer.result import CounterSample, TraceSpan

__all__ = ["chrome_trace"]

_PS_PER_US = 1_000_000


def _track_order(track: str) -> tuple[bool, list[int | str]]:
    """Compute first, then natural order, so ``comm phase 10`` follows ``comm phase 9``."""
    parts: list[int | str] = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", track)]
    return track != "compute", parts


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def chrome_trace(spans: Iterable[TraceSpan], counters: Iterable[CounterSample] = ()) -> dict[str, Any]:
    """The trace document for ``spans`` and ``counters``: ``{"traceEvents": [...], "displayTimeUnit": "ns"}``."""
    spans = list(spans)
    tracks = sorted({span.track for span in spans}, key=_track_order)
    tids = {track: index + 1 for index, track in enumerate(tracks)}
    events: list[dict[str, Any]] = []
    for npu in sorted({span.npu for span in spans}):
        events.append(_metadata("process_name", npu, 0, {"name": f"NPU {npu}"}))
        events.append(_metadata("process_sort_index", npu, 0, {"sort_index": npu}))
    for npu, track in sorted({(span.npu, span.track) for span in spans}, key=lambda p: (p[0], tids[p[1]])):
        events.append(_metadata("thread_name", npu, tids[track], {"name": track}))
        events.append(_metadata("thread_sort_index", npu, tids[track], {"sort_index": tids[track]}))
    events.extend(
        {
            "ph": "X",
            "name": span.name,
            "cat": span.track,
            "pid": span.npu,
            "tid": tids[span.track],
            "ts": span.start_ps / _PS_PER_US,
            "dur": (span.end_ps - span.start_ps) / _PS_PER_US,
        }
        for span in spans
    )
    events.extend(
        {"ph": "C", "name": sample.name, "pid": sample.npu, "ts": sample.time_ps / _PS_PER_US,
         "args": {"bytes": sample.value}}
        for sample in counters
    )  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ns"}
