"""Reports from a hand-made engine result: contract fields, ns conversion, the text table, the written files."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from stratasim.config import load_study
from stratasim.kernel.errors import StrataSimError
from stratasim.report.json_report import write_json, write_report
from stratasim.report.report import Report
from stratasim.study import run_study
from stratasim.system_layer.result import CollectiveStats, NpuStats, SimulationResult, TraceSpan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CONTRACT = {
    "total_time_ps",
    "total_time_ns",
    "compute_time_ns",
    "exposed_comm_ns",
    "npus",
    "collectives",
    "per_npu",
    "wall_seconds",
    "events_processed",
}


def result(npus: int = 4, collectives: int = 1) -> SimulationResult:
    """NPUs 1 and 2 tie for last (finish 12.5 us); NPU 1 is the lowest id among them."""
    finish = {1: 12_500_000, 2: 12_500_000}
    ends = [finish.get(n, 10_000_000) for n in range(npus)]
    busy = [1_000_000 * (n + 1) for n in range(npus)]
    per_npu = tuple(
        NpuStats(n, ends[n], busy[n], 9_000_000, ends[n] - busy[n], ((0, 3 << 20), (1, 1 << 20))) for n in range(npus)
    )
    stats = tuple(
        CollectiveStats(
            i,
            "all_reduce",
            2**30,
            npus,
            1_000_000,
            12_500_000,
            (1500, 2500),
            (4_000_000, 5_000_000),
            phase_dims=(0, 1),
            phase_collectives=("all_reduce", "all_reduce"),
            queue_delay_ps_per_chunk=((1000, 2000), (2000, 3000)),
            network_delay_ps_per_chunk=((4_000_000, 5_000_000), (4_000_000, 5_000_000)),
        )
        for i in range(collectives)
    )
    spans = (
        TraceSpan(0, "compute", "node 1", 0, 1_000_000),
        TraceSpan(0, "comm phase 10", "all_reduce 0", 1_000_000, 2_000_000),
        TraceSpan(0, "comm phase 2", "all_reduce 0", 1_000_000, 3_000_000),
        TraceSpan(1, "comm phase 2", "all_reduce 0", 1_000_000, 3_500_000),
    )
    return SimulationResult(12_500_000, npus, stats, per_npu, spans, 1234)


def report(**kwargs: int) -> Report:
    return Report("tiny", result(**kwargs), 0.25, {"network": "analytical (in-process)"})


def test_headline_numbers_come_from_the_last_npu_to_finish() -> None:
    r = report()
    assert (r.total_time_ps, r.total_time_ns) == (12_500_000, 12_500.0)
    assert (r.result.npus, r.result.events_processed) == (4, 1234)
    assert r.critical_npu == 1 and r.compute_time_ns == 2000.0 and r.exposed_comm_ns == 10_500.0


def test_to_dict_is_json_with_every_contract_field() -> None:
    data = json.loads(json.dumps(report().to_dict()))
    assert set(data) >= CONTRACT and "spans" not in data
    assert data["backends"] == {"network": "analytical (in-process)"} and data["wall_seconds"] == 0.25
    (collective,) = data["collectives"]
    assert collective == {
        "id": 0,
        "type": "all_reduce",
        "bytes": 2**30,
        "group_size": 4,
        "start_ns": 1000.0,
        "end_ns": 12500.0,
        "queue_delay_ns_per_phase": [1.5, 2.5],
        "network_delay_ns_per_phase": [4000.0, 5000.0],
        "phase_dims": [0, 1],
        "phase_collectives": ["all_reduce", "all_reduce"],
        "queue_delay_ns_per_chunk": [[1.0, 2.0], [2.0, 3.0]],
        "network_delay_ns_per_chunk": [[4000.0, 5000.0], [4000.0, 5000.0]],
        "communicator": "",
    }
    assert data["per_npu"][0] == {
        "npu": 0,
        "finish_ns": 10000.0,
        "compute_ns": 1000.0,
        "comm_ns": 9000.0,
        "exposed_comm_ns": 9000.0,
        "waiting_ns": 0.0,
        "bytes_sent_per_dim": {"0": 3 << 20, "1": 1 << 20},
        "p2p_bytes_per_dim": {},
        "exposed_comm_ns_by_kind": {},
        "peak_memory_bytes": 0,
        "peak_memory_ns": 0.0,
        "memory_at_peak": {},
        "compute_energy_pj": 0.0,
        "compute_power_w": 0.0,
    }


def test_to_text_shows_headline_collectives_and_npus() -> None:
    text = report().to_text()
    assert "tiny: 4 NPUs" in text and "12.5 us" in text and "12500000 ps" in text
    assert "NPU 1, the last to finish" in text and "1,234 events" in text
    assert "all_reduce" in text and "1 GiB" in text and "1.5 ns / 4 us" in text
    assert "analytical (in-process)" in text
    assert "per NPU" in text and len(text.splitlines()) < 30


def test_to_text_stays_short_for_many_collectives_and_npus() -> None:
    text = report(npus=4096, collectives=50).to_text()
    assert "collectives (50 in all, grouped; most time first)" in text
    assert "per NPU (4096 NPUs)" in text and "mean" in text
    assert len(text.splitlines()) < 45


def test_collectives_are_grouped_by_kind_and_communicator_with_a_legend() -> None:
    """Issue 14: the text listed the first 20 of 41,220 collectives, its delay column unexplained. Groups now sum
    every collective: count, sizes, mean and total time, delays per phase averaged over the group's members."""

    def stats(i: int, kind: str, communicator: str, size: int, span: int, queue: int) -> CollectiveStats:
        return CollectiveStats(
            i,
            kind,
            size,
            8,
            1000 * i,
            1000 * i + span,
            (queue,),
            (span - queue,),
            phase_dims=(0,),
            communicator=communicator,
        )

    rows = (
        stats(0, "all_reduce", "tp", 1 << 20, 3000, 0),
        stats(1, "all_reduce", "tp", 2 << 20, 5000, 1000),
        stats(2, "all_gather", "pp", 1 << 20, 1000, 0),
        stats(3, "all_reduce", "", 1 << 20, 2000, 0),
    )
    text = Report("g", replace(result(), collectives=rows), 0.1, {}).to_text()
    lines = text[text.index("collectives (4 in all") :].splitlines()
    assert lines[2].split() == [
        "all_reduce",
        "tp",
        "2",
        "1",
        "MiB–2",
        "MiB",
        "4",
        "ns",
        "8",
        "ns",
        "500",
        "ps",
        "/",
        "3.5",
        "ns",
    ]  # mean 4 ns, total 8 ns; queue (0 + 1000) / 2, network (3000 + 4000) / 2
    assert lines[3].split()[:3] == ["all_reduce", "-", "1"] and lines[4].split()[:3] == ["all_gather", "pp", "1"]
    assert lines[5].startswith("  mean: start to end of one; per phase, the mean over its chunks of queue")


def test_write_creates_report_and_chrome_trace(tmp_path: Path) -> None:
    report_path, trace_path = report().write(tmp_path / "out" / "deeper")
    assert json.loads(report_path.read_text()) == json.loads(json.dumps(report().to_dict()))
    trace = json.loads(trace_path.read_text())
    assert trace["displayTimeUnit"] == "ns"
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "X") == 4


def test_write_failure_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StrataSimError, match="cannot write the report"):
        report().write(blocker)


def test_empty_result() -> None:
    r = Report("empty", SimulationResult(0, 0, (), (), (), 0), 0.0, {})
    assert r.compute_time_ns == 0.0 and "collectives: none" in r.to_text()


def test_a_training_workload_adds_throughput_at_top_level() -> None:
    from stratasim.study.run import _training_figures

    class Iteration:
        def model_flops_per_iteration(self) -> float:
            return 8e15

        def samples_per_iteration(self) -> int:
            return 64

    figures = _training_figures(Iteration(), result())  # type: ignore[arg-type]
    # 12.5 us for 64 samples and 8e15 FLOPs on 4 NPUs.
    assert figures == pytest.approx(
        {"iteration_time_ns": 12_500.0, "samples_per_second": 64 / 12.5e-6, "tflops_per_npu": 8e15 / 12.5e-6 / 4 / 1e12}
    )
    r = Report("tiny", result(), 0.25, {}, figures)
    data = r.to_dict()
    assert data["samples_per_second"] == figures["samples_per_second"] and "training" not in data
    assert "samples/s" in r.to_text()
    assert _training_figures(object(), result()) is None  # type: ignore[arg-type]


def test_a_memory_model_adds_the_peak_per_npu() -> None:
    from stratasim.study.run import _training_figures

    class Iteration:
        def model_flops_per_iteration(self) -> float:
            return 1e12

        def samples_per_iteration(self) -> int:
            return 8

        def memory_per_npu_bytes(self) -> list[int]:
            return [3 << 30, 5 << 30, 4 << 30, 1 << 30]

    figures = _training_figures(Iteration(), result())  # type: ignore[arg-type]
    assert figures is not None and figures["memory_per_npu_bytes"] == [3 << 30, 5 << 30, 4 << 30, 1 << 30]
    r = Report("tiny", result(), 0.25, {}, figures)
    assert r.to_dict()["memory_per_npu_bytes"][1] == 5 << 30
    assert "up to 5 GiB per NPU (NPU 1)" in r.to_text()


def test_link_counters_become_utilisation_rows() -> None:
    from dataclasses import replace

    from stratasim.system_layer.result import LinkStats

    links = (LinkStats("dim 0: 0->1", 6_250_000, 1 << 20, 4), LinkStats("dim 0: 1->2", 12_500_000, 2 << 20, 8))
    r = Report("tiny", replace(result(), links=links), 0.25, {})
    data = r.to_dict()
    assert data["links"][1] == {
        "link": "dim 0: 1->2",
        "busy_ns": 12_500.0,
        "bytes": 2 << 20,
        "messages": 8,
        "utilisation": 1.0,
    }
    text = r.to_text()
    assert "busiest links (of 2 that carried traffic)" in text
    assert text.index("dim 0: 1->2") < text.index("dim 0: 0->1") and "100.0%" in text
    assert "links" not in Report("tiny", result(), 0.25, {}).to_dict()


def test_packet_latency_comes_only_from_networks_that_count_packets() -> None:
    from dataclasses import replace

    from stratasim.system_layer.result import LinkStats, PacketLatencyStats

    # 4 packets taking 10 ns in all: a mean of 2.5 ns; every *_ns value is ps / 1000.
    latency = PacketLatencyStats(packets=4, total_ps=10_000, min_ps=2_000, p50_ps=2_500, p99_ps=3_000, max_ps=3_000)
    links = (LinkStats("dim 0: 0->1", 6_250_000, 1 << 20, 4),)
    r = Report("tiny", replace(result(), links=links, packet_latency=latency), 0.25, {})
    assert r.to_dict()["packet_latency"] == {
        "packets": 4,
        "mean_ns": 2.5,
        "min_ns": 2.0,
        "p50_ns": 2.5,
        "p99_ns": 3.0,
        "max_ns": 3.0,
    }
    assert "packet latency over 4 packets: mean 2.5 ns, p50 2.5 ns, p99 3 ns, max 3 ns" in r.to_text()
    assert "packet_latency" not in report().to_dict() and "packet latency" not in report().to_text()


@pytest.mark.parametrize("example", ["quickstart.yaml", "transformer.yaml", "megatron/gpt_39b.yaml"])
def test_the_written_report_is_the_report_dict_as_json(example: str) -> None:
    """``report.json`` (collective rows encoded from each distinct collective's) reads as ``to_dict()``, and is
    the very text of writing that dict."""
    report = run_study(load_study(EXAMPLES / example))
    fast, plain = io.StringIO(), io.StringIO()
    write_report(fast, report)
    write_json(plain, report.to_dict())
    assert fast.getvalue() == plain.getvalue()
    assert json.loads(fast.getvalue()) == json.loads(json.dumps(report.to_dict()))
