"""Serving in a study of several jobs: a request-level serving job priced apart (``shared: false``, as the
example's disaggregated one) runs its own loop on its placed NPUs and gives what it gives alone; a training job
beside it is not slowed (the report says why: their traffic never meets); a study of serving jobs only; graph-based
inference jobs get their own TTFT and TPOT. A serving job of pools of role both with TP is replayed in the engine
with its batching decisions frozen (more shapes: test_serving_replay_shapes.py): alone or on links nobody else
uses it gives its standalone figures exactly, sharing links with a training job on the congestion-aware network
both slow down, on the analytical network neither does."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.config.study_file import parse_study
from stratasim.kernel import registry
from stratasim.kernel.graph_blocks import unrolled
from stratasim.kernel.serving import Iteration, IterationShape
from stratasim.report.report import Report
from stratasim.study.budget import (
    DEFAULT_BUDGET,
    NODE_BYTES,
    RUN_NODE_BYTES,
    Budget,
    BudgetError,
    check_budget,
    replay_memory,
)
from stratasim.study.jobs import serving_jobs
from stratasim.study.run import prepare_workload, run_study
from stratasim.study.serving import serve
from stratasim.study.serving_replay import replay_jobs, replayable_jobs
from stratasim.system_layer.operators import OperatorPricer
from stratasim.system_layer.serving.kv_transfer import quantised
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.replay import replay_graphs, replay_size
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "train_and_serve.yaml"
WARNING = (
    "workload.jobs: serving job 'serve' runs its own request-level loop, not in the engine: the per-NPU figures, "
    "cluster view and compute energy show its NPUs idle (its figures are in the jobs list); it prices each collective "
    "and KV move on the network alone, not on the links the study's other jobs share: its traffic and the other jobs' "
    "never meet, so neither slows the other (docs/how-to/several-jobs.md)"
)


def _example(requests: int = 40) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["workload"]["jobs"][1]["workload"]["requests"]["count"] = requests
    return data


def _run(data: dict[str, Any]) -> Report:
    return run_study(parse_study(data, "s.yaml"))


def _alone(data: dict[str, Any], index: int) -> dict[str, Any]:
    """The study of job ``index`` alone: its own workload on the same cluster (on NPUs 0, 1, ...)."""
    alone = copy.deepcopy(data)
    alone["workload"] = alone["workload"]["jobs"][index]["workload"]
    return alone


def test_a_serving_job_gives_what_it_gives_alone_and_does_not_slow_a_training_job() -> None:
    data = _example()
    report = _run(data)
    train, serve = report.jobs
    # The serving job on node 1 (NPUs 8-15), alone on node 0: the same NPUs as far as the network can tell, the same
    # requests (the same seed), so exactly the same figures.
    alone = _run(_alone(data, 1))
    assert serve.npus == tuple(range(8, 16)) and (serve.compute_ps, serve.exposed_comm_ps) == (None, None)
    assert serve.serving == alone.serving
    assert serve.end_ps == serve.duration_ps == alone.total_time_ps
    # The training job holds node 0 and shares no link with the serving job: exactly what it takes alone.
    only_training = copy.deepcopy(data)
    only_training["workload"]["jobs"] = only_training["workload"]["jobs"][:1]
    assert _run(only_training).jobs == (train,)
    # The study lasts until its last job ends: here the serving job's last request.
    assert report.total_time_ps == max(train.end_ps, serve.end_ps) == serve.end_ps
    assert report.warnings.count(WARNING) == 1


def test_the_serving_job_s_entry_in_the_json_and_text_reports() -> None:
    report = _run(_example())
    row = report.to_dict()["jobs"][1]
    assert (row["name"], row["kind"], row["placed"]) == ("serve", "serving", "8-15")
    assert "compute_ns" not in row and row["duration_ns"] == report.total_time_ns
    serving = report.jobs[1].serving
    assert serving is not None
    assert row["serving"]["ttft_p99_ns"] == serving["ttft_p99_ps"] / 1000
    assert row["serving"]["goodput_requests_per_second"] == serving["goodput_requests_per_second"]
    text = report.to_text()
    assert "    serving: 40 requests; TTFT p50 " in text and "goodput" in text
    assert "a serving job (-) runs its own request-level loop" in text


def test_a_serving_job_s_kv_moves_run_between_its_placed_npus() -> None:
    # Its prefill replicas on node 0 and its decode replicas on node 1: each KV move crosses the 50 GB/s link
    # between the nodes instead of the 450 GB/s switch within one, while the TP all-reduces stay within a node.
    packed = _run(_example()).jobs[1].serving
    data = _example()
    data["workload"]["placement"] = "explicit"
    data["workload"]["jobs"][0]["place"] = "4-7, 12-15"
    data["workload"]["jobs"][1]["place"] = "0-3, 8-11"
    split = _run(data).jobs[1].serving
    assert packed is not None and split is not None
    assert split["ttft_p50_ps"] == packed["ttft_p50_ps"]
    assert split["kv_transfer_mean_ps"] > 5 * packed["kv_transfer_mean_ps"]


def test_a_study_of_serving_jobs_only() -> None:
    data = _example(requests=20)
    serving = data["workload"]["jobs"][1]
    data["workload"]["jobs"] = [serving, {**serving, "name": "later", "start": "1s"}]
    report = _run(data)
    alone = _run(_alone(data, 0))
    first, later = report.jobs
    assert first.serving == later.serving == alone.serving
    assert (first.end_ps, later.start_ps, later.end_ps) == (alone.total_time_ps, 10**12, 10**12 + alone.total_time_ps)
    assert report.total_time_ps == later.end_ps
    assert [warning for warning in report.warnings if "serving jobs 'serve', 'later' run their own" in warning]


def test_on_the_analytical_level_the_warning_says_only_that_the_engine_shows_the_serving_npus_idle() -> None:
    data = _example(requests=10)
    data["network"]["backend"] = "analytical"
    warnings = _run(data).warnings
    said = [warning for warning in warnings if warning.startswith("workload.jobs: serving job 'serve'")]
    assert len(said) == 1 and "show its NPUs idle" in said[0] and "links" not in said[0]
    assert [warning for warning in warnings if "cannot show interference between the study's 2 jobs" in warning]


INFERENCE = {
    "kind": "transformer_inference",
    "model": {"layers": 2, "hidden": 1024, "heads": 8, "seq_len": 2048, "vocab": 32000},
    "serving": {"batch": 4, "prompt_len": 256, "generate": 4},
    "parallelism": {"tp": 2},
    "precision": "bf16",
}


def test_two_inference_jobs_get_their_own_ttft_and_tpot() -> None:
    bigger = copy.deepcopy(INFERENCE)
    bigger["serving"] |= {"batch": 16, "generate": 6}
    data = {
        "workload": {
            "kind": "jobs",
            "jobs": [
                {"name": "small", "npus": 2, "workload": INFERENCE},
                {"name": "big", "npus": 2, "start": "1ms", "workload": bigger},
            ],
        },
        "system": {"algorithm": "ring"},
        "network": {"topology": [{"kind": "switch", "size": 4, "bandwidth": "450GB/s", "latency": "1us"}]},
        "compute": {"backend": "roofline", "device": "h100"},
    }
    report = _run(data)
    for index, job in enumerate(report.jobs):
        own = _alone(data, index)
        own["network"]["topology"][0]["size"] = 2  # its plan fills the topology
        alone = _run(own).serving  # the single study's figures, from its own milestones
        assert alone is not None and alone.pop("cost_usd_per_million_tokens") > 0  # the study's alone
        assert job.serving == alone
    small, big = (job.serving for job in report.jobs)
    assert small is not None and big is not None and small["ttft_ps"] < big["ttft_ps"]
    row = report.to_dict()["jobs"][1]
    assert row["serving"]["ttft_ns"] == big["ttft_ps"] / 1000 and "TTFT" in report.to_text()


REPLAYED = (
    "workload.jobs: serving job 'serve' replays its standalone request-level run in the engine, sharing the network "
    "with the other jobs, with the batching decisions frozen from the standalone run (which requests batch together, "
    "how long each replica waits between iterations): only when its iterations end moves; a full co-simulation would "
    "let the decisions react to the slowed iterations (docs/how-to/several-jobs.md)"
)


def _shared(backend: str = "congestion_aware") -> dict[str, Any]:
    """The example's jobs on a ring of 8 NPUs, interleaved: a 4-way data-parallel training job on the even NPUs, a
    serving job of two TP-2 replicas (role both) on the odd ones, each replica's pair opposite on the ring, so its
    all-reduces cross the links the training job's ring all-reduce uses."""
    data = _example(requests=6)
    train, serve = data["workload"]["jobs"]
    del serve["shared"]  # the example's is priced apart
    train["npus"] = serve["npus"] = 4
    train["workload"]["parallelism"] |= {"dp": 4, "global_batch": 4}
    serve["workload"]["pools"] = [{"name": "both", "replicas": 2, "parallelism": {"tp": 2}}]
    serve["workload"]["requests"] |= {"arrival": {"process": "poisson", "rate": "500/s"}}
    serve["workload"]["requests"]["output"]["median"] = 16
    data["workload"]["placement"] = "explicit"
    train["place"], serve["place"] = "0, 2, 4, 6", "1, 5, 3, 7"
    data["network"] = {
        "backend": backend,
        "topology": [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "1us"}],
    }
    return data


def _without(data: dict[str, Any], index: int) -> dict[str, Any]:
    """The study with job ``index`` only, on the NPUs it was placed on."""
    only = copy.deepcopy(data)
    only["workload"]["jobs"] = [only["workload"]["jobs"][index]]
    return only


def test_a_replayed_serving_job_alone_gives_exactly_its_standalone_figures() -> None:
    # Replayed in the engine (role both, TP only) on its own: each iteration's operators priced by the same operator
    # pricer, its all-reduces those the pricer simulated alone, so every time is the standalone run's to the ps.
    data = _without(_shared(), 1)
    data["workload"]["jobs"][0]["place"] = "0-3"  # where the serving study alone runs it
    report = _run(data)
    (serve,) = report.jobs
    alone = _run(_alone(_shared(), 1) | {"network": data["network"]})
    assert serve.serving == alone.serving and serve.end_ps == alone.total_time_ps == report.total_time_ps
    assert serve.compute_ps is not None and serve.compute_ps > 0 and serve.exposed_comm_ps is not None
    assert REPLAYED in report.warnings and not [w for w in report.warnings if "own request-level loop" in w]


def test_a_replayed_serving_job_on_links_no_other_job_uses_is_not_slowed() -> None:
    # The example's two nodes, the training job on node 0, a TP-2 serving job (role both) on node 1: no shared link.
    data = _example(requests=6)
    del data["workload"]["jobs"][1]["shared"]
    data["workload"]["jobs"][1]["workload"]["pools"] = [{"name": "both", "replicas": 4, "parallelism": {"tp": 2}}]
    data["workload"]["jobs"][1]["workload"]["requests"]["output"]["median"] = 16
    train, serve = _run(data).jobs
    alone = _run(_alone(data, 1))
    assert serve.serving == alone.serving and serve.duration_ps == alone.total_time_ps
    assert _run(_without(data, 0)).jobs == (train,)


def test_sharing_links_with_a_training_job_slows_both_on_the_congestion_aware_network() -> None:
    data = _shared()
    train, serve = _run(data).jobs
    (train_alone,) = _run(_without(data, 0)).jobs
    (serve_alone,) = _run(_without(data, 1)).jobs
    assert train.duration_ps > train_alone.duration_ps
    assert serve.serving is not None and serve_alone.serving is not None
    for figure in ("ttft_p50_ps", "tpot_p50_ps", "e2e_p99_ps"):
        assert serve.serving[figure] > serve_alone.serving[figure]
    # Frozen decisions: the same iterations and requests, later.
    assert serve.serving["iterations"] == serve_alone.serving["iterations"]
    assert serve.serving["tokens_per_second"] < serve_alone.serving["tokens_per_second"]


def test_on_the_analytical_network_a_replayed_serving_job_and_a_training_job_do_not_meet() -> None:
    data = _shared("analytical")
    train, serve = _run(data).jobs
    assert (train,) == _run(_without(data, 0)).jobs
    assert serve.serving == _run(_without(data, 1)).jobs[0].serving


def test_shared_false_prices_a_replayable_serving_job_apart() -> None:
    data = _shared()
    data["workload"]["jobs"][1]["shared"] = False
    report = _run(data)
    train, serve = report.jobs
    assert (train,) == _run(_without(data, 0)).jobs and serve.compute_ps is None
    assert [w for w in report.warnings if "serving job 'serve' runs its own request-level loop" in w]


def test_a_replay_over_the_budget_is_refused_before_its_graphs_are_built() -> None:
    # The replay's size is counted from the loop's record (replay_size) and matches the graphs it builds; a budget
    # under it refuses the run naming the job, the way out (shared: false) and the budget's flag.
    study = parse_study(_shared(), "s.yaml")
    others = check_budget(study, *prepare_workload(study), DEFAULT_BUDGET).events  # the estimate before the replay
    with pytest.raises(BudgetError, match=r"workload\.jobs\[1\]: replaying serving job 'serve' .*shared: false"):
        run_study(study, budget=Budget.of(max_events=others + 1))


def test_the_replay_size_counts_the_nodes_its_graphs_hold() -> None:
    workload = _shared()["workload"]["jobs"][1]["workload"]
    source = registry.load("workload", "serving")(
        ServingRequestsWorkload.Config.model_validate({key: value for key, value in workload.items() if key != "kind"})
    )
    runs: list[PoolRun] = []
    study = parse_study(_without(_shared(), 1), "s.yaml")
    serve(study, source, DEFAULT_BUDGET, placed=(0, 1, 2, 3), key="workload", runs=runs)
    cached: dict[Any, Iteration] = {}

    def works(pool: int, shape: IterationShape) -> Iteration:
        return cached.setdefault((pool, shape), Iteration(shape, source.works(shape, pool)))

    replicas = [list(npus) for pool in source.pools() for npus in pool.replica_npus()]
    nodes, run = replay_size(runs[0], replicas, works)
    graphs = replay_graphs(runs[0], replicas, works, quantised)
    assert nodes == sum(len(graph.nodes) for graph in graphs) > 0  # every rank's, shared graphs too
    assert [graphs.index(graph) for graph in graphs] == [0, 0, 2, 2]  # a replica's TP-2 ranks share its graph
    # What the engine runs: every rank's nodes, its blocks unrolled; the budget prices both counts.
    assert run == sum(len(unrolled(graph).nodes) for graph in graphs) > nodes
    assert replay_memory(nodes, run) == nodes * NODE_BYTES + run * RUN_NODE_BYTES


def test_a_replay_is_refused_when_with_the_rest_of_the_study_it_would_exceed_the_memory_budget() -> None:
    # The rest of the study's estimate plus the replay's (replay_memory of what replay_size counts) is what the
    # budget must hold: a byte less is refused before the graphs are built, naming the job and the way out.
    study = parse_study(_shared(), "s.yaml")
    source, npus = prepare_workload(study)
    rest = check_budget(study, source, npus, DEFAULT_BUDGET).memory
    jobs = replayable_jobs(study, source, serving_jobs(source, npus))
    (replay,) = replay_jobs(study, jobs, DEFAULT_BUDGET).values()
    need = rest + replay_memory(
        sum(len(graph.nodes) for graph in replay.graphs), sum(len(unrolled(graph).nodes) for graph in replay.graphs)
    )
    with pytest.raises(BudgetError, match=r"workload\.jobs\[1\]: replaying serving job 'serve' .*shared: false"):
        replay_jobs(study, jobs, Budget.of(max_memory=need - 1), rest)
    assert replay_jobs(study, jobs, Budget.of(max_memory=need), rest).keys() == {1}


def test_a_replayed_serving_job_computes_its_iterations_operators_and_waits_for_requests_apart() -> None:
    # Replayed beside the training job: each NPU's compute is exactly its iterations' operators at the study's
    # prices (summed from its replayed graph), its waits for requests (wait nodes, in a chain: the compute stream is
    # idle throughout) are its waiting time, and compute, waiting and exposed communication fill its timeline.
    data = _shared()
    study = parse_study(data, "s.yaml")
    source, npus = prepare_workload(study)
    jobs = serving_jobs(source, npus)
    (replay,) = replay_jobs(study, replayable_jobs(study, source, jobs), DEFAULT_BUDGET).values()
    report = run_study(study)
    pricer = OperatorPricer(RooflineCompute(), "h100")
    per_npu = []
    for npu, graph in zip(jobs[1].npus, replay.graphs, strict=True):
        nodes = list(unrolled(graph).nodes)
        compute = sum(cost.duration_ps for cost in pricer.costs(node.op for node in nodes if node.HasField("op")))
        waits = sum(node.duration_ps for node in nodes if node.type == workload_pb2.WAIT_NODE)
        stats = report.result.per_npu[npu]
        assert (stats.compute_ps, stats.waiting_ps) == (compute, waits) and waits > 0
        assert stats.compute_ps + stats.waiting_ps + stats.exposed_comm_ps == stats.finish_ps - graph.start_ps
        assert sum(amount for _, amount in stats.exposed_comm_ps_by_kind) == stats.exposed_comm_ps
        per_npu.append(compute)
    serve = report.jobs[1]
    assert serve.compute_ps == sum(per_npu) / len(per_npu)
    assert serve.exposed_comm_ps == sum(report.result.per_npu[npu].exposed_comm_ps for npu in jobs[1].npus) / 4
    rows = {row["npu"]: row for row in report.to_dict()["per_npu"]}
    assert rows[1]["waiting_ns"] == report.result.per_npu[1].waiting_ps / 1000
    assert "waiting" in report.to_text()


def test_a_replay_with_its_waits_gives_the_same_figures_with_the_network_in_another_process() -> None:
    data = _shared()
    remote = copy.deepcopy(data)
    remote["network"]["spawn"] = True
    here, there = _run(data), _run(remote)
    assert there.result.per_npu == here.result.per_npu and there.jobs == here.jobs
    assert any(npu.waiting_ps for npu in here.result.per_npu)
