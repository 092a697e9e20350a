"""The Chrome trace: metadata naming processes and tracks, complete events in microseconds."""

from __future__ import annotations

import json

from stratasim.report.chrome_trace import chrome_trace
from stratasim.system_layer.result import TraceSpan

SPANS = (
    TraceSpan(1, "comm phase 10", "all_reduce 0", 2_000_000, 2_500_000),
    TraceSpan(0, "compute", "node 1", 0, 1_500_000),
    TraceSpan(0, "comm phase 2", "all_reduce 0", 1_500_000, 2_000_001),
)


def test_structure() -> None:
    trace = json.loads(json.dumps(chrome_trace(SPANS)))
    assert set(trace) == {"traceEvents", "displayTimeUnit"} and trace["displayTimeUnit"] == "ns"
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 3
    for event in complete:
        assert {"name", "cat", "pid", "tid", "ts", "dur"} <= set(event)
        assert isinstance(event["ts"], float) and isinstance(event["dur"], float)
    compute = next(e for e in complete if e["cat"] == "compute")
    assert (compute["pid"], compute["ts"], compute["dur"]) == (0, 0.0, 1.5)
    assert next(e for e in complete if e["cat"] == "comm phase 2")["dur"] == 0.500001


def test_tracks_are_named_and_ordered() -> None:
    events = chrome_trace(SPANS)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {0: "NPU 0", 1: "NPU 1"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    tid = {name: t for (_, t), name in threads.items()}
    assert tid["compute"] < tid["comm phase 2"] < tid["comm phase 10"]  # natural order, compute first
    for event in events:
        if event["ph"] == "X":
            assert threads[(event["pid"], event["tid"])] == event["cat"]


def test_no_spans() -> None:
    assert chrome_trace(()) == {"traceEvents": [], "displayTimeUnit": "ns"}


def test_memory_is_a_counter_track_peaking_at_the_reported_peak() -> None:
    from pathlib import Path

    from stratasim.config.study_file import load_study
    from stratasim.study.run import run_study

    example = Path(__file__).resolve().parents[2] / "examples" / "transformer.yaml"
    report = run_study(load_study(example), record_trace=True)
    result = report.result
    trace = chrome_trace(result.spans, result.counters)
    samples = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    stands_for = result.stands_for()  # the NPUs simulated, each standing for those equivalent by symmetry
    assert {e["name"] for e in samples} == {"memory"} and {e["pid"] for e in samples} == set(stands_for)
    assert sorted(npu for lived in stands_for.values() for npu in lived) == list(range(result.npus))
    for npu in result.per_npu:
        simulated = result.stand_ins[npu.npu] if result.stand_ins else npu.npu
        held = [e["args"]["bytes"] for e in samples if e["pid"] == simulated]
        assert max(held) == npu.peak_memory_bytes
        assert held[-1] == sum(size for kind, size in npu.memory_at_peak if kind != "working")
