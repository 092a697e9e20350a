"""Several jobs in one study: their keys, placement policies, graphs moved onto their NPUs, per-job report figures,
and the interference a congestion-aware fabric shows (and the analytical one says it cannot)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.config.study_file import parse_study
from stratasim.kernel.contracts import MultiJobWorkload, SymmetricWorkload
from stratasim.kernel.npu_ids import npu_ids
from stratasim.study.budget import estimate_study
from stratasim.study.run import prepare_workload, run_study
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.jobs.config import JobsConfig
from stratasim.workload_layer.jobs.placement import place_jobs
from stratasim.workload_layer.jobs.remap import remap_graphs
from stratasim.workload_layer.jobs.workload import JobsWorkload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
ALL_REDUCE = {"kind": "collective", "collective": "all_reduce", "size": "16MiB"}
FAT_TREE = {
    "backend": "congestion_aware",
    "topology": {"kind": "fat_tree", "k": 4, "bandwidth": "50GB/s", "latency": "500ns"},
}


def jobs(*sizes: int, **keys: Any) -> JobsConfig:
    return JobsConfig.model_validate(
        {**keys, "jobs": [{"name": f"j{i}", "npus": n, "workload": ALL_REDUCE} for i, n in enumerate(sizes)]}
    )


def study(jobs_: list[dict[str, Any]], network: dict[str, Any] = FAT_TREE, **keys: Any) -> dict[str, Any]:
    return {"workload": {"kind": "jobs", **keys, "jobs": jobs_}, "system": {"algorithm": "ring"}, "network": network}


def job(name: str, npus: int, **keys: Any) -> dict[str, Any]:
    return {"name": name, "npus": npus, "workload": ALL_REDUCE, **keys}


def test_packed_takes_contiguous_blocks_in_order() -> None:
    assert place_jobs(jobs(3, 2), 8) == ((0, 1, 2), (3, 4))


def test_spread_deals_ranks_round_robin_over_the_whole_topology() -> None:
    # 6 slots on 12 NPUs, every other one: j0 rank 0, j1 rank 0, j0 rank 1, j1 rank 1, j0 rank 2, j0 rank 3...
    assert place_jobs(jobs(4, 2, placement="spread"), 12) == ((0, 4, 8, 10), (2, 6))
    assert place_jobs(jobs(2, 2, placement="spread"), 4) == ((0, 2), (1, 3))


def test_random_is_a_seeded_permutation() -> None:
    first = place_jobs(jobs(4, 4, placement="random", seed=1), 16)
    assert first == place_jobs(jobs(4, 4, placement="random", seed=1), 16)
    assert first != place_jobs(jobs(4, 4, placement="random", seed=2), 16)
    assert len(set(first[0]) | set(first[1])) == 8 and max(first[0] + first[1]) < 16


def test_explicit_places_take_lists_or_ranges() -> None:
    assert npu_ids("0-3, 8, 10-11") == (0, 1, 2, 3, 8, 10, 11)
    config = JobsConfig.model_validate(
        {"placement": "explicit", "jobs": [job("a", 4, place="4-7"), job("b", 2, place=[1, 0])]}
    )
    assert place_jobs(config, 8) == ((4, 5, 6, 7), (1, 0))


def test_graphs_move_onto_the_placed_npus() -> None:
    graph = workload_pb2.ExecutionGraph()
    graph.nodes.add(id=0, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE)  # every NPU
    graph.nodes.add(id=1, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.BROADCAST, group=[0, 2], root=2)
    graph.nodes.add(id=2, type=workload_pb2.COMM_SEND_NODE, peer=1)
    graph.nodes.add(id=3, type=workload_pb2.COMP_NODE, name="first token", milestone=True)
    block = graph.blocks.add()
    block.nodes.add(id=0, type=workload_pb2.COMM_RECV_NODE, peer=2)
    moved = remap_graphs([graph] * 3, (9, 4, 6), job=2, start_ps=5, name="c")
    assert moved[0] is moved[1] is moved[2]  # ranks sharing a graph share its moved copy
    nodes = moved[0].nodes
    assert list(nodes[0].group) == [9, 4, 6]
    assert (list(nodes[1].group), nodes[1].root) == ([9, 6], 6)
    assert nodes[2].peer == 4 and moved[0].blocks[0].nodes[0].peer == 6
    assert (moved[0].job, moved[0].start_ps) == (2, 5)
    assert nodes[3].name == "c/first token"  # a milestone is the job's own
    assert list(graph.nodes[0].group) == []  # the job's own graph is left as it was


def test_idle_npus_run_empty_graphs_and_each_job_is_tagged() -> None:
    config = JobsConfig.model_validate({"jobs": [job("a", 2), job("b", 3, start="1us")]})
    graphs = JobsWorkload(config).graphs(8)
    assert [graph.job for graph in graphs[:5]] == [0, 0, 1, 1, 1]
    assert [graph.start_ps for graph in graphs[:5]] == [0, 0, 10**6, 10**6, 10**6]
    assert all(not graph.nodes for graph in graphs[5:])
    assert list(graphs[2].nodes[0].group) == [2, 3, 4]


def test_the_workload_claims_no_symmetry_and_estimates_its_jobs_together() -> None:
    parsed = parse_study(study([job("a", 4), job("b", 8)]), "s.yaml")
    source, npus = prepare_workload(parsed)
    assert isinstance(source, MultiJobWorkload) and not isinstance(source, SymmetricWorkload)
    assert npus == 16
    work = estimate_study(parsed, source, npus).work
    # Each job's graph is shared by its NPUs: two graphs, and one for the 4 idle NPUs.
    assert (work.graphs, work.largest_message) == (3, 16 << 20)
    assert work.nodes == 1  # (4 + 8) NPUs x 1 node and 4 idle NPUs x 1, over 16


def test_inner_problems_name_their_full_key() -> None:
    bad = study([job("a", 4), {"name": "b", "npus": 4, "workload": {"kind": "collective", "collective": "all_reduce"}}])
    with pytest.raises(Exception, match=r"workload\.jobs\[1\]\.workload\.size: required"):
        parse_study(bad, "s.yaml")


def _durations(data: dict[str, Any]) -> dict[str, int]:
    return {figures.name: figures.duration_ps for figures in run_study(parse_study(data, "s.yaml")).jobs}


def test_two_jobs_sharing_links_take_longer_than_each_alone() -> None:
    # Interleaved on a ring of 16, each job's ring all-reduce goes through the other's NPUs: every hop of a's
    # (0 -> 2, ...) crosses the links b's (1 -> 3, ...) also takes.
    ring = {
        "backend": "congestion_aware",
        "topology": [{"kind": "ring", "size": 16, "bandwidth": "50GB/s", "latency": "500ns"}],
    }
    a, b = job("a", 8, place=list(range(0, 16, 2))), job("b", 8, place=list(range(1, 16, 2)))
    alone = _durations(study([a], ring, placement="explicit"))["a"]
    together = _durations(study([a, b], ring, placement="explicit"))
    # Every link of a's ring then carries b's messages too: nearly twice the time alone (601.2 us).
    assert alone == 601_202_560
    assert together == {"a": 1_181_405_120, "b": 1_181_405_120}


def test_jobs_on_disjoint_parts_of_the_fabric_take_exactly_what_each_takes_alone() -> None:
    # Packed, each job holds two pods of the k = 4 fat tree: no link carries both jobs' traffic.
    alone = _durations(study([job("a", 8)]))["a"]
    assert _durations(study([job("a", 8), job("b", 8)])) == {"a": alone, "b": alone}


def test_training_jobs_interfere_when_spread_and_not_when_packed() -> None:
    data = yaml.safe_load((EXAMPLES / "two_jobs.yaml").read_text())
    alone = copy.deepcopy(data)
    alone["workload"]["jobs"] = alone["workload"]["jobs"][:1]  # spread alone: the same NPUs as in the pair
    assert _durations(data) == {"a": 64_534_072_300, "b": 64_534_072_300}
    assert _durations(alone) == {"a": 48_267_023_020}
    for study_ in (data, alone):
        study_["workload"]["placement"] = "packed"
    assert _durations(data) == {"a": 29_282_298_860, "b": 29_282_298_860} and _durations(alone)["a"] == 29_282_298_860


def test_the_report_gives_each_jobs_figures() -> None:
    data = yaml.safe_load((EXAMPLES / "two_jobs.yaml").read_text())
    data["workload"]["jobs"][1]["start"] = "5ms"
    report = run_study(parse_study(data, "s.yaml"))
    rows = report.to_dict()["jobs"]
    assert [(row["name"], row["kind"], row["npus"], row["placed"]) for row in rows] == [
        ("a", "transformer", 8, "0, 2, 4, 6, 8, 10, 12, 14"),
        ("b", "transformer", 8, "1, 3, 5, 7, 9, 11, 13, 15"),
    ]
    b = rows[1]
    assert b["start_ns"] == 5e6 and b["duration_ns"] == b["end_ns"] - b["start_ns"]
    assert b["iteration_time_ns"] == b["duration_ns"]
    # 8 samples an iteration; model FLOPs over the job's own 8 NPUs and its own duration.
    assert b["samples_per_second"] == pytest.approx(8 / (b["duration_ns"] / 1e9))
    per_npu = [row for row in report.to_dict()["per_npu"] if row["npu"] % 2]
    assert b["compute_ns"] == pytest.approx(sum(row["compute_ns"] for row in per_npu) / 8)
    assert b["exposed_comm_ns"] == pytest.approx(sum(row["exposed_comm_ns"] for row in per_npu) / 8)
    assert b["compute_ns"] + b["exposed_comm_ns"] <= b["duration_ns"]  # the wait before 5 ms is in neither
    assert report.total_time_ps == max(npu.finish_ps for npu in report.per_npu)
    text = report.to_text()
    assert "jobs (2)" in text and "1, 3, 5, 7, 9, 11, 13, 15" not in text  # the placement is cut to the column


def test_the_analytical_level_says_once_that_it_cannot_show_interference() -> None:
    analytical = {**FAT_TREE, "backend": "analytical"}
    data = study([job("a", 8), job("b", 8, start="13us")], analytical, placement="random", seed=3)
    # On it each job takes what it takes alone, wherever it sits and whenever it starts.
    assert _durations(data)["a"] == _durations(study([job("a", 8)], analytical, placement="random", seed=3))["a"]
    warnings = run_study(parse_study(data, "s.yaml")).warnings
    assert [w for w in warnings if "interference" in w] == [
        "network: the analytical level prices every message as if alone (it has no shared links), so it cannot show "
        "interference between the study's 2 jobs: each takes what it would alone; network.backend: congestion_aware "
        "or flit_level shows it"
    ]
    assert not [w for w in run_study(parse_study(study([job("a", 8), job("b", 8)]), "s.yaml")).warnings]


def test_a_dumped_config_validates_back_to_itself() -> None:
    data = yaml.safe_load((EXAMPLES / "two_jobs.yaml").read_text())["workload"]
    config = JobsConfig.model_validate({key: value for key, value in data.items() if key != "kind"})
    dumped = config.model_dump(mode="json", exclude_unset=True)
    assert dumped["jobs"][1]["workload"]["kind"] == "transformer"
    again = JobsConfig.model_validate(dumped)
    assert again == config and [job.kind for job in again.jobs] == ["transformer", "transformer"]
