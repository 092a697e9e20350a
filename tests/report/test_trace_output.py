"""``stratasim run --out``: the written trace.json is a well-formed Trace Event Format document, shows the NPUs the
engine simulated (saying which NPUs each stands for), and the selection options select without moving a number."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stratasim.cli import commands as cli
from stratasim.kernel.npu_ids import npu_ranges
from stratasim.system_layer.engine import simulation_scope
from tests.helpers import RunCli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRANSFORMER = EXAMPLES / "transformer.yaml"  # PP with symmetric TP/DP ranks: one NPU simulated per stage
QUICKSTART = EXAMPLES / "quickstart.yaml"
REQUIRED = {  # the keys each kind of event needs (Trace Event Format)
    "M": {"name", "pid", "tid", "args"},
    "X": {"name", "cat", "pid", "tid", "ts", "dur"},
    "C": {"name", "pid", "ts", "args"},
}


def run_out(run_cli: RunCli, out: Path, study: Path, *args: str) -> dict[str, Any]:
    """Run ``study`` with ``--out out`` and ``args``; the report and (when written) the trace as parsed JSON."""
    assert run_cli("run", str(study), "--out", str(out), *args)[0] == 0
    written = {"report": json.loads((out / "report.json").read_text(encoding="utf-8"))}
    if (out / "trace.json").exists():
        written["trace"] = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    return written


def npus_in(ranges: str) -> Iterator[int]:
    """The NPU ids of ``0-7,64``."""
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        yield from range(int(first), int(last or first) + 1)


def check_structure(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Assert what a viewer needs of the document; its events."""
    assert set(trace) == {"traceEvents", "displayTimeUnit"} and trace["displayTimeUnit"] == "ns"
    events = trace["traceEvents"]
    named: set[int] = set()
    threads: dict[tuple[int, int], str] = {}
    last_counter: dict[tuple[int, str], float] = {}
    for event in events:
        assert REQUIRED[event["ph"]] <= set(event), event
        assert isinstance(event["pid"], int) and isinstance(event["name"], str)
        if event["ph"] == "M":  # metadata precedes every event of its process and thread
            assert event["name"] in {
                "process_name",
                "process_labels",
                "process_sort_index",
                "thread_name",
                "thread_sort_index",
            }
            if event["name"] == "process_name":
                named.add(event["pid"])
            elif event["name"] == "thread_name":
                threads[(event["pid"], event["tid"])] = event["args"]["name"]
        elif event["ph"] == "X":
            assert event["pid"] in named and threads[(event["pid"], event["tid"])] == event["cat"]
            assert isinstance(event["ts"], float) and isinstance(event["dur"], float) and event["dur"] >= 0
        else:  # counters: named, numeric, each in time order
            assert event["pid"] in named
            assert all(isinstance(value, int) for value in event["args"].values())
            key = (event["pid"], event["name"])
            assert event["ts"] >= last_counter.get(key, 0.0)
            last_counter[key] = event["ts"]
    return events


def processes(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {e["pid"]: e["args"] for e in events if e["name"] == "process_name"}


def test_the_trace_shows_the_simulated_npus_and_whom_each_stands_for(run_cli: RunCli, tmp_path: Path) -> None:
    written = run_out(run_cli, tmp_path, TRANSFORMER)
    events = check_structure(written["trace"])
    report = written["report"]
    named = processes(events)
    assert len(named) < report["npus"]  # stand-ins are not expanded
    covered = sorted(npu for pid, args in named.items() for npu in npus_in(args.get("stands_for", str(pid))))
    assert covered == list(range(report["npus"]))  # each NPU is stood for exactly once
    for pid, args in named.items():
        lived = list(npus_in(args["stands_for"]))
        assert pid in lived and args["name"] == f"NPU {pid} (stands for {len(lived)} NPUs)"
    labels = {e["pid"]: e["args"]["labels"] for e in events if e["name"] == "process_labels"}
    assert labels == {pid: f"stands for NPUs {args['stands_for']}" for pid, args in named.items()}
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == set(named) and {"compute", "comm"} <= {e["cat"] for e in spans}
    assert {e["name"] for e in events if e["ph"] == "C"} == {"memory"}


def test_every_npu_simulated_is_every_npu_traced(run_cli: RunCli, tmp_path: Path) -> None:
    events = check_structure(run_out(run_cli, tmp_path, QUICKSTART, "--set", "system.aggregate=false")["trace"])
    assert processes(events) == {npu: {"name": f"NPU {npu}"} for npu in range(32)}


def test_selecting_npus_keeps_those_that_stand_for_them(run_cli: RunCli, tmp_path: Path) -> None:
    full = check_structure(run_out(run_cli, tmp_path / "full", TRANSFORMER)["trace"])
    stand_in = {npu: pid for pid, args in processes(full).items() for npu in npus_in(args["stands_for"])}
    last = max(stand_in)
    events = check_structure(run_out(run_cli, tmp_path / "some", TRANSFORMER, "--trace-npus", str(last))["trace"])
    assert set(processes(events)) == {stand_in[last]} < set(processes(full))
    kept = [e for e in full if e["ph"] != "M" and e["pid"] in set(processes(events))]
    assert [e for e in events if e["ph"] != "M"] == kept  # the same events as the full trace, for those NPUs


def test_selecting_npus_of_an_every_npu_run(run_cli: RunCli, tmp_path: Path) -> None:
    written = run_out(run_cli, tmp_path, QUICKSTART, "--set", "system.aggregate=false", "--trace-npus", "0-2,17")
    assert set(processes(check_structure(written["trace"]))) == {0, 1, 2, 17}


def test_a_window_keeps_the_spans_overlapping_it(run_cli: RunCli, tmp_path: Path) -> None:
    full = check_structure(run_out(run_cli, tmp_path / "full", TRANSFORMER)["trace"])
    spans = [e for e in full if e["ph"] == "X"]
    end_us = max(e["ts"] + e["dur"] for e in spans)
    start_us, stop_us = round(end_us / 3), round(2 * end_us / 3)
    events = check_structure(
        run_out(run_cli, tmp_path / "window", TRANSFORMER, "--trace-window", f"{start_us}us:{stop_us}us")["trace"]
    )
    windowed = [e for e in events if e["ph"] == "X"]
    assert windowed == [e for e in spans if e["ts"] + e["dur"] >= start_us and e["ts"] <= stop_us]
    assert 0 < len(windowed) < len(spans)
    memory = [e for e in events if e["ph"] == "C"]
    assert memory and all(start_us <= e["ts"] <= stop_us for e in memory)
    assert {e["pid"] for e in memory if e["ts"] == start_us} == {e["pid"] for e in memory}  # the value as it opens


def test_collective_detail_has_one_span_per_collective(run_cli: RunCli, tmp_path: Path) -> None:
    full = check_structure(run_out(run_cli, tmp_path / "full", TRANSFORMER)["trace"])
    events = check_structure(run_out(run_cli, tmp_path / "coll", TRANSFORMER, "--trace-detail", "collectives")["trace"])
    untracked = [{**e, "tid": 0} for e in events if e["ph"] != "M"]  # the track numbers differ, with fewer tracks
    assert untracked == [{**e, "tid": 0} for e in full if e["ph"] == "X" and e["cat"] == "comm"]


def test_block_detail_has_one_span_per_block_run(run_cli: RunCli, tmp_path: Path) -> None:
    """At block detail a layer's pass run whole is one span, from its start to its last node's end; every span
    outside the blocks is as at node detail, every other node detail span falls within a block's."""

    def spans(out: Path, *args: str) -> set[tuple[int, str, str, float, float]]:
        events = check_structure(run_out(run_cli, out, TRANSFORMER, *args)["trace"])
        return {(e["pid"], e["name"], e["cat"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"}

    nodes, blocks = spans(tmp_path / "n"), spans(tmp_path / "b", "--trace-detail", "blocks")
    whole = sorted(blocks - nodes)
    assert whole and len(blocks) * 4 < len(nodes)
    by_npu: dict[int, list[tuple[float, float]]] = {}
    for pid, _, _, ts, dur in whole:
        by_npu.setdefault(pid, []).append((ts, ts + dur))
    for pid, _, _, ts, dur in nodes - blocks:
        assert any(start - 1e-6 <= ts and ts + dur <= end + 1e-6 for start, end in by_npu[pid])
    for pid, _, _, ts, dur in whole[:50]:
        ends = [t + d for p, _, _, t, d in nodes if p == pid and ts - 1e-6 <= t and t + d <= ts + dur + 1e-6]
        assert max(ends) == pytest.approx(ts + dur, abs=1e-6)


def test_auto_detail_shows_blocks_for_big_runs(
    run_cli: RunCli, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default a trace shows every node, unless the NPUs traced run more nodes than the limit: then blocks
    whole, saying so; a window asks for nodes again."""
    small = run_out(run_cli, tmp_path / "small", TRANSFORMER)["trace"]
    assert small == run_out(run_cli, tmp_path / "nodes", TRANSFORMER, "--trace-detail", "nodes")["trace"]
    monkeypatch.setattr(simulation_scope, "AUTO_NODE_LIMIT", 100)
    assert cli.main(["run", str(TRANSFORMER), "--out", str(tmp_path / "big")]) == 0
    assert "trace: one span per block run (a layer's pass): the NPUs traced ran" in capsys.readouterr().out
    blocks = run_out(run_cli, tmp_path / "blocks", TRANSFORMER, "--trace-detail", "blocks")["trace"]
    assert json.loads((tmp_path / "big" / "trace.json").read_text(encoding="utf-8")) == blocks
    windowed = run_out(run_cli, tmp_path / "window", TRANSFORMER, "--trace-window", "0:")["trace"]
    assert windowed == small


def test_no_trace_writes_the_report_only(run_cli: RunCli, tmp_path: Path) -> None:
    written = run_out(run_cli, tmp_path, TRANSFORMER, "--trace-detail", "none")
    assert set(written) == {"report"} and not (tmp_path / "trace.json").exists()


def test_selection_moves_no_number(run_cli: RunCli, tmp_path: Path) -> None:
    runs = [
        run_out(run_cli, tmp_path / str(index), TRANSFORMER, *args)["report"]
        for index, args in enumerate(
            [
                (),
                ("--trace-detail", "none"),
                ("--trace-detail", "collectives"),
                ("--trace-detail", "blocks"),
                ("--trace-npus", "3", "--trace-window", "1ms:"),
            ]
        )
    ]
    for report in runs:  # fusing compute runs (no node spans) processes fewer events, nothing else differs
        report.pop("wall_seconds"), report.pop("events_processed")
    assert all(report == runs[0] for report in runs)


def test_ranges() -> None:
    assert npu_ranges(sorted([64, 3, 0, 1, 2, 5, 6]), ",") == "0-3,5-6,64"
    assert list(npus_in(npu_ranges(range(8), ","))) == list(range(8))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--trace-npus", "x"], "argument --trace-npus: expected NPU ids and ranges such as 0-7,64, got 'x'"),
        (["--trace-npus", "0-7,"], "argument --trace-npus: expected NPU ids and ranges such as 0-7,64"),
        (["--trace-npus", "5-2"], "argument --trace-npus: the range '5-2' in '5-2' ends before it starts"),
        (["--trace-npus", "0,999"], "--trace-npus names NPU 999, but the study has 32 NPUs (0-31)"),
        (["--trace-window", "5ms"], "argument --trace-window: expected START:END such as 0:5ms or 2ms:, got '5ms'"),
        (["--trace-window", "5ms:1ms"], "argument --trace-window: the window '5ms:1ms' ends before it starts"),
        (["--trace-window", "0:5parsecs"], "argument --trace-window: unknown time unit 'parsecs'"),
        (["--trace-window", "1:5ms"], "argument --trace-window: 1 has no unit; write 1ns if you meant that"),
        (["--trace-window", "0:5"], "argument --trace-window: 5 has no unit; write 5ns if you meant that"),
        (["--trace-detail", "all"], "argument --trace-detail: invalid choice: 'all'"),
        (
            ["--trace-npus", "0", "--trace-detail", "none"],
            "--trace-npus select from a trace, but --trace-detail none writes none",
        ),
    ],
)
def test_bad_selections_are_one_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], expected: str
) -> None:
    assert cli.main(["run", str(QUICKSTART), "--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "trace.json").exists()


@pytest.mark.parametrize(
    ("args", "options"),
    [
        (["--trace-npus", "0", "--trace-window", ":1ms"], "--trace-npus and --trace-window"),
        (["--trace-detail", "collectives"], "--trace-detail"),
    ],
)
def test_a_selection_needs_out(capsys: pytest.CaptureFixture[str], args: list[str], options: str) -> None:
    assert cli.main(["run", str(QUICKSTART), *args]) == 2
    assert capsys.readouterr().err == f"error: {options} select what --out DIR traces; give --out DIR too\n"
