"""Each link of a congestion-aware or flit-level run is a counter track of the Chrome trace, in a ``network``
process, whose busy stretches add up to the busy time the report gives the link; recorded only when the run
writes a trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stratasim.config.study_file import load_study
from stratasim.report.chrome_trace import chrome_trace
from stratasim.study.run import run_study
from stratasim.system_layer.result import LinkBusy, TraceSpan
from tests.helpers import RunCli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STUDIES = {
    "mesh": (EXAMPLES / "palm_congestion.yaml", ["workload.tasks.0.size=256KiB", "workload.tasks.2.size=1MiB"]),
    "dimensions": (EXAMPLES / "quickstart.yaml", ["network.backend=congestion_aware", "workload.size=4MiB"]),
    "flit level": (EXAMPLES / "quickstart.yaml", ["network.backend=flit_level", "workload.size=256KiB"]),
}


def run_with_out(run_cli: RunCli, out: Path, study: Path, overrides: list[str]) -> dict[str, Any]:
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert run_cli("run", str(study), *sets, "--out", str(out))[0] == 0
    return {name: json.loads((out / f"{name}.json").read_text(encoding="utf-8")) for name in ("report", "trace")}


@pytest.mark.parametrize("case", sorted(STUDIES))
def test_link_tracks_sum_to_the_reported_busy_time(run_cli: RunCli, tmp_path: Path, case: str) -> None:
    written = run_with_out(run_cli, tmp_path, *STUDIES[case])
    report, events = written["report"], written["trace"]["traceEvents"]
    processes = {e["args"]["name"]: e["pid"] for e in events if e["name"] == "process_name"}
    network = processes["network"]
    assert network >= report["npus"]  # after every NPU
    tracks: dict[str, list[tuple[float, int]]] = {}
    for event in events:
        if event["ph"] == "C" and event["pid"] == network:
            tracks.setdefault(event["name"], []).append((event["ts"], event["args"]["busy"]))
    busy_ns = {link["link"]: link["busy_ns"] for link in report["links"]}
    assert set(tracks) == {link for link, ns in busy_ns.items() if ns > 0}
    for link, samples in tracks.items():
        assert [value for _, value in samples] == [1, 0] * (len(samples) // 2)  # busy, idle, busy, idle...
        times = [ts for ts, _ in samples]
        assert times == sorted(times) and len(set(times)) == len(times)
        busy_us = sum(end - start for (start, _), (end, _) in zip(samples[::2], samples[1::2]))
        assert busy_us * 1000 == pytest.approx(busy_ns[link], rel=1e-9)


def test_no_network_tracks_from_a_network_without_links(run_cli: RunCli, tmp_path: Path) -> None:
    events = run_with_out(run_cli, tmp_path, EXAMPLES / "quickstart.yaml", ["workload.size=4MiB"])["trace"][
        "traceEvents"
    ]
    assert "network" not in {e["args"]["name"] for e in events if e["name"] == "process_name"}


def test_busy_stretches_are_recorded_only_with_a_trace() -> None:
    study = load_study(*STUDIES["mesh"])
    plain = run_study(study).result
    assert plain.links and not plain.link_busy
    traced = run_study(study, record_trace=True).result
    assert traced.total_time_ps == plain.total_time_ps and traced.links == plain.links
    assert {busy.link for busy in traced.link_busy} == {link.link for link in traced.links if link.busy_ps > 0}


def test_the_network_process_follows_every_npu() -> None:
    spans = [TraceSpan(2, "compute", "node 0", 0, 1_000_000)]
    links = [LinkBusy("npu 0->npu 1", ((0, 500_000), (700_000, 1_000_000)))]
    events = chrome_trace(spans, (), links, npus=4)["traceEvents"]
    assert {"ph": "M", "name": "process_name", "pid": 4, "tid": 0, "args": {"name": "network"}} in events
    samples = [(e["ts"], e["args"]["busy"]) for e in events if e["ph"] == "C"]
    assert samples == [(0.0, 1), (0.5, 0), (0.7, 1), (1.0, 0)]
    assert chrome_trace(spans, (), ())["traceEvents"] == chrome_trace(spans)["traceEvents"]


@pytest.mark.parametrize("case", ["mesh", "flit level"])
def test_a_spawned_network_records_the_same_stretches(case: str) -> None:
    path, overrides = STUDIES[case]
    local = run_study(load_study(path, overrides), record_trace=True)
    remote = run_study(load_study(path, [*overrides, "network.spawn=true"]), record_trace=True)
    assert remote.backends["network"].endswith("(spawned)")
    assert remote.result.link_busy == local.result.link_busy and remote.result.links == local.result.links
    assert remote.result.packet_latency == local.result.packet_latency
    assert (local.result.packet_latency.packets == 0) == (case == "mesh")
