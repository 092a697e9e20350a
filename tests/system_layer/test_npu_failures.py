"""``system.failures``: an NPU failing stops its job at that time, the other jobs run on exactly; a single-job run
stops, marked incomplete; switch failures in ``network.links`` reroute on a fat tree; bad entries get one message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.config.study_file import load_study
from stratasim.report.report import Report
from stratasim.study.run import run_study
from stratasim.system_layer.result import FailureStats
from tests.helpers import RunCli
from tests.system_layer.helpers import ser

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
EXAMPLE = EXAMPLES / "npu_failure.yaml"
B, ALPHA, MS = 50 * 10**9, 500_000, 10**9


def _run(path: Path, *overrides: str) -> Report:
    return run_study(load_study(path, list(overrides)))


@pytest.mark.parametrize(
    ("backend", "spawn"), [("congestion_aware", False), ("congestion_aware", True), ("analytical", False)]
)
def test_a_failure_mid_collective_stops_a_single_job_run_there(backend: str, spawn: bool) -> None:
    failed = _run(
        EXAMPLES / "failed_link.yaml",
        "network.links=[]",
        f"network.backend={backend}",
        f"network.spawn={str(spawn).lower()}",
        "system.failures=[{npus: [5], at: 1ms}]",
    )
    result = failed.result
    assert result.stopped_at_ps == result.total_time_ps == MS
    assert result.unfinished_collectives == 1 and result.collectives[0].end_ps == MS
    assert result.failures == (FailureStats(5, MS, 0, 16, "all_reduce"),)
    assert all(npu.finish_ps == MS for npu in result.per_npu)
    assert failed.warnings[0] == (
        "incomplete: the run was stopped by the failure of NPU 5 (its all_reduce could not complete) at simulated "
        "time 1 ms; every figure covers the run up to then"
    )


def test_a_failure_stops_the_node_computing_and_counts_its_compute_up_to_then() -> None:
    """Each NPU's compute time is its compute spans of the intact run cut at the failure."""
    steady = ["system.variability=null"]
    intact = run_study(load_study(EXAMPLES / "stragglers.yaml", steady), record_trace=True)
    at = intact.total_time_ps // 3 + 12_345
    failed = _run(EXAMPLES / "stragglers.yaml", *steady, f"system.failures=[{{npus: [0], at: {at}ps}}]")
    assert failed.result.stopped_at_ps == at
    cut = [0] * intact.result.npus
    for span in intact.result.spans:
        if span.track == "compute" and span.start_ps < at:
            cut[span.npu] += min(span.end_ps, at) - span.start_ps
    stand_in = intact.result.stand_ins or range(intact.result.npus)  # the intact run simulates NPU 0 for all
    expected = [cut[stand_in[npu]] for npu in range(intact.result.npus)]
    assert [npu.compute_ps for npu in failed.result.per_npu] == expected and 0 < expected[0] <= at
    assert any(span.track == "compute" and span.start_ps < at < span.end_ps for span in intact.result.spans)
    assert any("symmetry shortcut is off" in note for note in failed.result.notes)


def _jobs(report: Report) -> dict[str, Any]:
    return {row["name"]: row for row in json.loads(report.to_json())["jobs"]}


@pytest.mark.parametrize("spawn", [False, True])
def test_the_failed_job_stops_and_the_other_runs_on_exactly_as_alone_when_disjoint(spawn: bool) -> None:
    spawned = [f"network.spawn={str(spawn).lower()}"]
    report = _run(EXAMPLE, *spawned)
    jobs = _jobs(report)
    step = ALPHA + ser(8 << 20, B)  # a 64 MiB ring all-reduce over 8 NPUs: 14 steps of 8 MiB
    assert report.total_time_ps == 14 * step
    assert jobs["a"]["end_ns"] == 14 * step / 1000 and "failed_at_ns" not in jobs["a"]
    assert jobs["b"]["failed_at_ns"] == jobs["b"]["end_ns"] == 1e6
    assert report.warnings == (
        "NPU 12 failed at 1 ms: job b stopped there (its all_reduce could not complete); "
        "the other jobs ran to completion",
    )
    assert report.result.failures == (FailureStats(12, MS, 1, 8, "all_reduce"),)


@pytest.mark.parametrize("spawn", [False, True])
def test_sharing_links_the_other_job_ends_between_alone_and_with_the_failed_job_all_along(spawn: bool) -> None:
    """Spread, the jobs' rings share the ring links; after b stops, a has them to itself."""
    spread = ["workload.placement=spread", f"network.spawn={str(spawn).lower()}"]
    failed = _run(EXAMPLE, *spread, "system.failures=[{npus: [13], at: 1ms}]")  # spread: b holds the odd NPUs
    along = _run(EXAMPLE, *spread, "system.failures=[]")
    alone = _run(EXAMPLE, *spread, "system.failures=[{npus: [1], at: 0ns}]")  # b stops before it sends anything
    a = {
        name: _jobs(report)["a"]["end_ns"] for name, report in (("failed", failed), ("along", along), ("alone", alone))
    }
    assert a["alone"] < a["failed"] < a["along"]
    assert _jobs(failed)["b"]["end_ns"] == 1e6 and _jobs(alone)["b"]["end_ns"] == 0
    b_bytes = {
        name: sum(size for link in report.result.links for job, size in link.bytes_by_job if job == 1)
        for name, report in (("failed", failed), ("along", along), ("alone", alone))
    }
    assert b_bytes["alone"] == 0 < b_bytes["failed"] < b_bytes["along"]


def test_a_failure_after_the_work_is_done_or_on_an_idle_npu_stops_nothing() -> None:
    late = _run(EXAMPLE, "system.failures=[{npus: [12], at: 5ms}]")
    assert late.total_time_ps == 14 * (ALPHA + ser(8 << 20, B)) and late.result.stopped_at_ps is None
    assert late.warnings == ("NPU 12 failed at 5 ms: its work was already done, so nothing stopped",)
    idle = _run(EXAMPLE, "workload.jobs.1.npus=4", "system.failures=[{npus: [15], at: 1ms}]")
    assert idle.warnings == ("NPU 15 failed at 1 ms: it held no work, so nothing stopped",)
    twice = _run(EXAMPLE, "system.failures=[{npus: [12], at: 1ms}, {npus: [9], at: 2ms}]")
    assert twice.warnings[1] == "NPU 9 failed at 2 ms: its job b had stopped already, so nothing stopped"


def test_a_slowed_npu_may_also_fail(tmp_path: Path) -> None:
    """A slow-down ``from`` and a failure on one NPU: it computes slowly from then, and stops at the failure."""
    report = _run(
        Path(EXAMPLES).parent / "quickstart.yaml",
        "system.slowdown=[{npus: [0], factor: 2, from: 0ns}]",
        "system.failures=[{npus: [0], at: 1us}]",
    )
    assert report.result.stopped_at_ps == 10**6


FAT_TREE = {
    "name": "fat_tree_switch",
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "16MiB"},
    "system": {"algorithm": "ring", "splits": 4},
    "network": {
        "backend": "congestion_aware",
        "topology": {"kind": "fat_tree", "k": 4, "bandwidth": "50GB/s", "latency": "500ns"},
    },
}


def _fat_tree(tmp_path: Path, links: list[dict[str, Any]], spawn: bool = False) -> Report:
    study = {**FAT_TREE, "network": {**FAT_TREE["network"], "links": links, "spawn": spawn}}  # type: ignore[dict-item]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    return run_study(load_study(path))


@pytest.mark.parametrize("spawn", [False, True])
def test_a_failed_aggregation_switch_reroutes_through_the_other(tmp_path: Path, spawn: bool) -> None:
    intact = _fat_tree(tmp_path, [], spawn)
    failed = _fat_tree(tmp_path, [{"switch": "aggregation 0.0", "at": "50us", "fail": True}], spawn)
    assert failed.result.stopped_at_ps is None and failed.total_time_ps >= intact.total_time_ps

    def through(report: Report, switch: str) -> int:
        return sum(link.bytes for link in report.result.links if switch in link.link.split("->"))

    assert through(intact, "aggregation 0.1") == 0 < through(failed, "aggregation 0.1")
    assert 0 < through(failed, "aggregation 0.0") < through(intact, "aggregation 0.0")  # only before 50 us


def test_a_failed_switch_with_no_other_way_names_the_link_and_the_time(run_cli: RunCli) -> None:
    """Spread, the jobs' rings cross the switch dimension, which has no other way."""
    switch = "network.links=[{switch: 'dim 1: switch', at: 10us, fail: true}]"
    code, out, err = run_cli("run", str(EXAMPLE), "--set", "workload.placement=spread", "--set", switch)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("error: link dim 1: ") and "failed at 10 us" in err and "cannot reach" in err


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("system.failures=[{npus: [99], at: 1ms}]", ("system.failures", "entry 0 names NPU 99", "has 16 NPUs")),
        ("system.failures=[{npus: [3], at: -1ms}]", ("system.failures[0].at", "negative")),
        ("system.failures=[{npus: [3]}]", ("system.failures[0].at",)),
        (
            "system.failures=[{npus: ['x'], at: 1ms}]",
            ("system.failures[0].npus", "cannot read 'x' as an NPU id or a range"),
        ),
        (
            "network.links=[{switch: 'dim 0: switch', fail: true}]",
            ("network.links[0]", "no switch named 'dim 0: switch'", "did you mean 'dim 1: switch'?"),
        ),
        ("network.links=[{switch: 'dim 1: 3->switch', fail: true}]", ("network.links[0]", "give link instead")),
        ("network.links=[{link: 'dim 1: switch', fail: true}]", ("network.links[0]", "give switch instead")),
        (
            "network.links=[{link: 'dim 0: 1->2', switch: 'dim 1: switch', fail: true}]",
            ("network.links[0]", "one of them"),
        ),
    ],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_bad_failure_input_gets_one_named_message(
    run_cli: RunCli, command: str, override: str, fragments: tuple[str, ...]
) -> None:
    code, _, err = run_cli(command, str(EXAMPLE), "--set", override)
    assert code == 2
    assert err.startswith("error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


def test_a_fabric_switch_name_gets_the_nearest_one(tmp_path: Path, run_cli: RunCli) -> None:
    path = tmp_path / "study.yaml"
    links = [{"switch": "aggregation 0.9", "fail": True}]
    path.write_text(yaml.safe_dump({**FAT_TREE, "network": {**FAT_TREE["network"], "links": links}}), "utf-8")  # type: ignore[dict-item]
    code, _, err = run_cli("check", str(path))
    assert code == 2 and "no switch named 'aggregation 0.9'" in err and "did you mean 'aggregation 0.1'?" in err
    links[0]["switch"] = "npu 3"
    path.write_text(yaml.safe_dump({**FAT_TREE, "network": {**FAT_TREE["network"], "links": links}}), "utf-8")  # type: ignore[dict-item]
    code, _, err = run_cli("check", str(path))
    assert code == 2 and "'npu 3' is an NPU, not a switch: system.failures fails an NPU" in err


def test_a_run_stopped_by_a_failure_exits_0_with_its_report_marked_incomplete(run_cli: RunCli) -> None:
    args = ["--set", "network.links=[]", "--set", "system.failures=[{npus: [5], at: 1ms}]", "--json"]
    code, out, err = run_cli("run", str(EXAMPLES / "failed_link.yaml"), *args)
    assert code == 0 and "Traceback" not in err
    incomplete = json.loads(out)["incomplete"]
    assert incomplete["stopped_at_ps"] == MS
    assert incomplete["reason"] == "stopped by the failure of NPU 5 (its all_reduce could not complete)"
