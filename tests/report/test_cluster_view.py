"""The report's cluster view: NPU utilisation, the links that carried the most bytes (per job in a study of several
jobs) and queueing per link level, in the JSON and in a few lines of text."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.report.cluster import link_level
from stratasim.report.report import Report
from stratasim.study.run import run_study
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.result import LinkStats, NpuStats
from tests.system_layer.test_link_load_by_job import TOPO, two_jobs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("name", "level"),
    [
        ("dim 1: 5->switch", "dim 1"),
        ("dim 0: switch->3", "dim 0"),
        ("npu 3->edge 0.1", "npu->edge"),
        ("edge 0.1->aggregation 0.0", "edge->aggregation"),
        ("aggregation 3.1->core 2", "aggregation->core"),
        ("core 2->aggregation 3.1", "core->aggregation"),
        ("gpu3->tor0", "gpu->tor"),
        ("nvswitch 0.1->gpu 7", "nvswitch->gpu"),
    ],
)
def test_a_links_level_is_its_dimension_or_what_it_joins(name: str, level: str) -> None:
    assert link_level(name) == level


def hand_made() -> SimulationResult:
    """Two NPUs of 10 us, NPU 0 computing 4 us, NPU 1 idle; two links, one shared by jobs 0 and 1."""
    per_npu = (NpuStats(0, 10_000_000, 4_000_000, 0, 6_000_000), NpuStats(1, 0, 0, 0, 0))
    links = (
        LinkStats("npu 0->edge 0.0", 1_000_000, 100, 2, 3_000, ((0, 100),), ((0, 2),), ((0, 3_000),)),
        LinkStats(
            "edge 0.0->aggregation 0.0",
            2_000_000,
            300,
            3,
            6_000,
            ((0, 100), (1, 200)),
            ((0, 1), (1, 2)),
            ((0, 0), (1, 6_000)),
        ),
    )
    return SimulationResult(10_000_000, 2, (), per_npu, (), 0, links=links)


def test_the_cluster_block_gives_utilisation_load_by_job_and_queueing_per_level() -> None:
    cluster = Report("c", hand_made(), 0.1, {}).to_dict()["cluster"]
    assert cluster["npu_utilisation"] == 4 / 20  # 4 us computing of 2 NPUs x 10 us
    assert cluster["active_npu_share"] == 0.5
    assert cluster["jobs"] == [0, 1]
    assert cluster["busiest_links"][0] == {
        "link": "edge 0.0->aggregation 0.0",
        "bytes": 300,
        "messages": 3,
        "utilisation": 0.2,
        "queue_ns": 6.0,
        "bytes_by_job": {"0": 100, "1": 200},
    }
    assert cluster["by_level"] == [
        {
            "level": "npu->edge",
            "links": 1,
            "bytes": 100,
            "messages": 2,
            "queue_ns": 3.0,
            "mean_queue_ns": 1.5,
            "by_job": {"0": {"bytes": 100, "messages": 2, "queue_ns": 3.0, "mean_queue_ns": 1.5}},
        },
        {
            "level": "edge->aggregation",
            "links": 1,
            "bytes": 300,
            "messages": 3,
            "queue_ns": 6.0,
            "mean_queue_ns": 2.0,
            "by_job": {
                "0": {"bytes": 100, "messages": 1, "queue_ns": 0.0, "mean_queue_ns": 0.0},
                "1": {"bytes": 200, "messages": 2, "queue_ns": 6.0, "mean_queue_ns": 3.0},
            },
        },
    ]
    text = Report("c", hand_made(), 0.1, {}).to_text()
    assert "cluster: NPUs computing 20.0% of NPU-time, 1 of 2 NPUs busy at all" in text
    assert "edge->aggregation" in text and "(job 0 100 B 0 ps, job 1 200 B 3 ns)" in text
    assert "most loaded link edge 0.0->aggregation 0.0: 300 B (job 0 100 B, job 1 200 B)" in text


def test_a_run_of_two_jobs_reports_each_jobs_bytes_on_the_shared_link() -> None:
    result = simulate(two_jobs(), CongestionAwareNetwork(), TOPO, SystemOptions())
    cluster = Report("two", result, 0.1, {}).to_dict()["cluster"]
    shared = next(row for row in cluster["busiest_links"] if row["link"] == "dim 0: 1->2")
    assert shared["bytes_by_job"] == {"0": 1 << 20, "1": 1 << 20}
    assert [row["level"] for row in cluster["by_level"]] == ["dim 0"]


def test_a_single_job_fat_tree_study_shows_queueing_at_every_level_and_no_jobs() -> None:
    report = run_study(load_study(str(EXAMPLES / "fat_tree_alltoall.yaml"), []))
    cluster = report.to_dict()["cluster"]
    assert "jobs" not in cluster and all("bytes_by_job" not in row for row in cluster["busiest_links"])
    levels = {row["level"]: row for row in cluster["by_level"]}
    assert set(levels) == {
        "npu->edge",
        "edge->npu",
        "edge->aggregation",
        "aggregation->edge",
        "aggregation->core",
        "core->aggregation",
    }
    assert all("by_job" not in row for row in levels.values())
    engine = report.engine
    assert engine is not None
    assert sum(row["messages"] for row in levels.values()) == sum(link.messages for link in engine.links)
    assert sum(link.queue_ps for link in engine.links) > 0


def test_a_network_that_does_not_measure_queueing_shows_none() -> None:
    report = run_study(
        load_study(str(EXAMPLES / "fat_tree_alltoall.yaml"), ["network.backend=flit_level", "workload.size=64KiB"])
    )
    cluster = report.to_dict()["cluster"]
    assert all("queue_ns" not in row for row in cluster["busiest_links"] + cluster["by_level"])
    assert "(not measured by this network)" in report.to_text()


def test_no_cluster_block_without_link_counters() -> None:
    result = SimulationResult(10, 1, (), (NpuStats(0, 10, 10, 0, 0),), (), 0)
    assert "cluster" not in Report("a", result, 0.1, {}).to_dict()
    assert "cluster" not in Report("a", result, 0.1, {}).to_text()


def test_the_cluster_view_explains_why_packed_placement_beats_random() -> None:
    # Packed, each job's ring stays on links of its own: no link carries two jobs and no message waits. At random,
    # rings cross at the aggregation switches: links carry two jobs and messages queue climbing to them.
    path = str(EXAMPLES / "clusters" / "placement_fat_tree.yaml")
    packed, spread = (
        run_study(load_study(path, [f"workload.placement={placement}"])).to_dict()["cluster"]
        for placement in ("packed", "random")
    )
    assert packed["jobs"] == spread["jobs"] == [0, 1, 2, 3]
    assert all(len(row["bytes_by_job"]) == 1 for row in packed["busiest_links"])
    assert all(row["queue_ns"] == 0 for row in packed["by_level"])
    assert len(spread["busiest_links"][0]["bytes_by_job"]) > 1
    climbing = next(row for row in spread["by_level"] if row["level"] == "edge->aggregation")
    assert climbing["queue_ns"] > 0 and all(job["queue_ns"] > 0 for job in climbing["by_job"].values())


@pytest.mark.parametrize(
    ("name", "level"),
    [
        ("npu 5->npu 6", "dim 0"),
        ("npu 4->npu 7", "dim 0"),  # the wrap-around cable of row 1
        ("npu 5->npu 9", "dim 1"),
        ("npu 3->npu 15", "dim 1"),
        ("npu 5->npu 10", "npu->npu"),  # no link of the torus: read as a name
    ],
)
def test_a_torus_links_level_is_its_dimension(name: str, level: str) -> None:
    assert link_level(name, (4, 4)) == level
    assert link_level(name) == "npu->npu"


def test_a_torus_study_shows_load_per_dimension_and_where_a_failure_moved_it() -> None:
    # The failed cable 5<->6 (dimension 0) sends the 48 MiB left to cross 5 -> 6 by 5 -> 1 -> 2 -> 6: dimension 1
    # carries 2 x 48 MiB more, dimension 0 as much as before (1 -> 2 instead of 5 -> 6).
    failed = run_study(load_study(str(EXAMPLES / "clusters" / "failed_link.yaml"), []))
    intact = run_study(load_study(str(EXAMPLES / "clusters" / "failed_link.yaml"), ["network.links=[]"]))
    levels = [{row["level"]: row for row in run.to_dict()["cluster"]["by_level"]} for run in (intact, failed)]
    assert [sorted(by_level) for by_level in levels] == [["dim 0", "dim 1"]] * 2
    assert levels[1]["dim 0"]["bytes"] == levels[0]["dim 0"]["bytes"]
    assert levels[1]["dim 1"]["bytes"] == levels[0]["dim 1"]["bytes"] + 2 * (48 << 20)
    # the ring all-reduce runs one way round each ring: 16 links of the 32 of each dimension carry it
    assert levels[0]["dim 0"]["links"] == levels[0]["dim 1"]["links"] == 16
    assert all(row["queue_ns"] >= 0 for row in levels[1].values())
    assert "dim 1" in failed.to_text()
