"""Busy spans as a Chrome / Perfetto trace (the JSON "Trace Event Format"), one process per NPU.

Each NPU is a process (``pid`` = NPU id) and each track a thread named by a ``thread_name`` metadata event:
``compute`` first, then the communication tracks (``comm phase 0``, ``comm phase 1``...) in natural order.
Spans are complete events (``"ph": "X"``) whose ``ts`` and ``dur`` are microseconds, as the format requires;
picoseconds divide exactly enough into floats for any trace a viewer can open. Counter samples (an NPU's
memory) are counter events (``"ph": "C"``), drawn as a graph above the NPU's tracks.

When links were recorded, a last process, ``network`` (``pid`` one past the last NPU's), has one counter per
link, named after it, whose ``busy`` value is 1 while the link transmits and 0 otherwise: a 1 at the start of
each busy stretch, a 0 at its end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from stratasim.kernel.units import ps_to_us
from stratasim.system_layer.result import CounterSample, LinkBusy, TraceSpan

__all__ = ["chrome_trace"]


def _track_order(track: str) -> tuple[bool, list[int | str]]:
    """Compute first, then natural order, so ``comm phase 10`` follows ``comm phase 9``."""
    parts: list[int | str] = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", track)]
    return track != "compute", parts


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def chrome_trace(
    spans: Iterable[TraceSpan], counters: Iterable[CounterSample] = (), links: Iterable[LinkBusy] = (), npus: int = 0
) -> dict[str, Any]:
    """The trace document for ``spans``, ``counters`` and the ``links`` of a run on ``npus`` NPUs (at least those
    the spans and counters name): ``{"traceEvents": [...], "displayTimeUnit": "ns"}``."""
    spans, counters = list(spans), list(counters)
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
            "ts": ps_to_us(span.start_ps),
            "dur": ps_to_us(span.end_ps - span.start_ps),
        }
        for span in spans
    )
    events.extend(
        {"ph": "C", "name": sample.name, "pid": sample.npu, "ts": ps_to_us(sample.time_ps),
         "args": {"bytes": sample.value}}
        for sample in counters
    )  # fmt: skip
    recorded = list(links)
    if recorded:
        network = max(npus, 1 + max([span.npu for span in spans] + [sample.npu for sample in counters], default=-1))
        events.append(_metadata("process_name", network, 0, {"name": "network"}))
        events.append(_metadata("process_sort_index", network, 0, {"sort_index": network}))
        events.extend(_link_samples(recorded, network))
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def _link_samples(links: list[LinkBusy], pid: int) -> list[dict[str, Any]]:
    """Each link's counter: 1 from the start of each busy stretch, 0 from its end."""
    return [
        {"ph": "C", "name": link.link, "pid": pid, "ts": ps_to_us(time_ps), "args": {"busy": value}}
        for link in links
        for span in link.spans
        for time_ps, value in zip(span, (1, 0))
    ]
