"""Serving jobs of more shapes replayed on the shared fabric: disaggregated pools, whose KV moves become
point-to-point sends between the prefill and decode replicas' NPUs; pipeline-parallel pools, whose stages run
on their own NPUs and hand each pass's activation on as a point-to-point send; expert-parallel pools, whose groups'
dispatch and combine all-to-alls run as collectives among their members' NPUs; pools decoding speculatively, whose
draft passes run before the target's (a draft on fewer NPUs than the pool's TP: its all-reduces among the first of
them); pools on devices of their own.

Alone, a move in the replay is exactly the sends the standalone loop's KV transfer pricer simulated (the same
quantised size, the same slices between the same NPUs), injected as the iteration that handed its requests off
ends, and the decode iteration that batches them first waits for their arrival: where every move crosses links
nothing else uses while it moves (the standalone pricer prices each move on an idle network), the replay gives the
standalone figures to the picosecond. Sharing links with a training job, the prefill replicas' all-reduces queue
behind its traffic (TTFT grows) and so do the moves and the decode replicas' all-reduces (TPOT grows).

A pipeline stage's part of an iteration, as the loop's pricer prices it, is its operators and collectives plus the
transfer of the activation into it, and the loop starts it once the stage before has finished and the stage is
free; the replay sends the activation as the stage before finishes, so where a stage is idle as it arrives (each
iteration through the stages alone) the replay gives the standalone figures to the picosecond; where the stage is
still busy the transfer overlaps its work in the replay, and the activations share links with the job's own
collectives.

An expert-parallel group's iteration, as the loop prices it, is its slowest member's own part then the group's
expert part, priced alone on the network; in the replay each member runs its own part, waits as long as it waited
standalone for the slowest one, then the expert part's operators and all-to-alls on its members' NPUs: the group
steps in lock-step, so alone the replay gives the standalone figures to the picosecond where the all-to-alls and the
members' TP all-reduces do not share links (each member's NPUs under one switch here)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from stratasim.config.study_file import parse_study
from stratasim.kernel import registry
from stratasim.kernel.serving import Iteration, IterationShape
from stratasim.report.report import Report
from stratasim.study.budget import DEFAULT_BUDGET
from stratasim.study.run import run_study
from stratasim.study.serving import serve
from stratasim.study.serving_replay import expert_groups
from stratasim.system_layer.serving.kv_transfer import quantised
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.replay import HOST_LINK, replay_graphs, replay_size
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload
from tests.workload_layer.test_serving_expert_parallel import STUDY as MOE_STUDY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "train_and_serve.yaml"


def _disaggregated(requests: int, arrival: dict[str, str]) -> dict[str, Any]:
    """The example's cluster and disaggregated serving job (two TP-2 prefill replicas, two TP-2 decode replicas),
    replayed (``shared`` left at its default), serving ``requests`` requests of about 16 output tokens."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    serving = data["workload"]["jobs"][1]
    del serving["shared"]
    serving["workload"]["requests"] |= {"count": requests, "arrival": arrival}
    serving["workload"]["requests"]["output"]["median"] = 16
    return data


def _run(data: dict[str, Any]) -> Report:
    return run_study(parse_study(data, "s.yaml"))


def _only(data: dict[str, Any], index: int) -> dict[str, Any]:
    """The study with job ``index`` only."""
    only = copy.deepcopy(data)
    only["workload"]["jobs"] = [only["workload"]["jobs"][index]]
    return only


def _standalone(data: dict[str, Any], index: int) -> tuple[Report, PoolRun]:
    """Job ``index``'s serving workload as its own study on the same cluster (its NPUs 0, 1, ...), and its loop's
    record."""
    alone = copy.deepcopy(data)
    alone["workload"] = workload = alone["workload"]["jobs"][index]["workload"]
    study = parse_study(alone, "s.yaml")
    config = ServingRequestsWorkload.Config.model_validate({k: v for k, v in workload.items() if k != "kind"})
    runs: list[PoolRun] = []
    serve(study, registry.load("workload", "serving")(config), DEFAULT_BUDGET, runs=runs)
    return run_study(study), runs[0]


def test_a_replayed_disaggregated_job_alone_gives_its_standalone_figures_where_its_moves_cross_idle_links() -> None:
    # Requests 200 ms apart, each served (prefill, move, 16 decodes) well before the next arrives: every KV move
    # starts as its prefill iteration ends (it queues behind no other move) and moves while no iteration of its two
    # replicas runs, so it has the links to itself, as the loop's pricer assumes.
    data = _disaggregated(6, {"process": "fixed", "rate": "5/s"})
    alone, run = _standalone(data, 1)
    assert len(run.moves) == 6 and all(move.start_ps == move.sent_ps for move in run.moves)
    for move in run.moves:
        ends = [record for record in run.record if record.engine in (move.source, move.destination)]
        assert not [record for record in ends if record.start_ps < move.arrival_ps and record.end_ps > move.sent_ps]
    report = _run(_only(data, 1))  # placed on NPUs 0-7, where the serving study alone runs it
    (served,) = report.jobs
    assert served.compute_ps is not None  # replayed in the engine
    # Its TTFT, TPOT, end to end, KV-move and throughput figures (every one) equal the standalone loop's.
    assert served.serving == alone.serving and served.end_ps == alone.total_time_ps
    assert [w for w in report.warnings if "serving job 'serve' replays its standalone request-level run" in w]


def test_a_disaggregated_job_sharing_links_with_a_training_job_gets_a_longer_ttft_and_tpot() -> None:
    # A ring of 8 NPUs (50 GB/s): the training job's 4-way data-parallel all-reduce on the even NPUs, the serving
    # job's TP-2 prefill replica on NPUs 1 and 5, its TP-2 decode replica on NPUs 3 and 7: its all-reduces and its
    # KV moves (1 to 3, 5 to 7) cross the ring links the training job's gradient all-reduce uses.
    data = _disaggregated(6, {"process": "poisson", "rate": "500/s"})
    train, serving = data["workload"]["jobs"]
    train["npus"] = serving["npus"] = 4
    train["workload"]["parallelism"] |= {"dp": 4, "global_batch": 4}
    serving["workload"]["pools"] = [
        {"name": "prefill", "role": "prefill", "replicas": 1, "parallelism": {"tp": 2}},
        {"name": "decode", "role": "decode", "replicas": 1, "parallelism": {"tp": 2}},
    ]
    data["workload"]["placement"] = "explicit"
    train["place"], serving["place"] = "0, 2, 4, 6", "1, 5, 3, 7"
    data["network"]["topology"] = [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "1us"}]
    shared = _run(data).jobs
    (train_alone,) = _run(_only(data, 0)).jobs
    (serve_alone,) = _run(_only(data, 1)).jobs
    assert shared[0].duration_ps > train_alone.duration_ps
    together, apart = shared[1].serving, serve_alone.serving
    assert together is not None and apart is not None
    for figure in ("ttft_p50_ps", "ttft_p99_ps", "tpot_p50_ps", "e2e_p99_ps"):
        assert together[figure] > apart[figure], figure
    assert together["iterations"] == apart["iterations"] and together["kv_transfers"] == apart["kv_transfers"]


def _pipelined(requests: int, arrival: dict[str, str], tp: int = 2) -> dict[str, Any]:
    """The example's cluster and a serving job of role both pools of ``tp`` x 2 pipeline stages on node 1."""
    data = _disaggregated(requests, arrival)
    data["workload"]["jobs"][1]["workload"]["pools"] = [
        {"name": "both", "replicas": 8 // (2 * tp), "parallelism": {"tp": tp, "pp": 2}}
    ]
    return data


def test_a_replayed_pipeline_parallel_job_alone_gives_its_standalone_figures_when_each_iteration_runs_alone() -> None:
    # Requests 200 ms apart: each iteration goes through the two stages while no other runs on its replica, so its
    # activation arrives at an idle stage on idle links, as the loop's pricer prices it.
    data = _pipelined(6, {"process": "fixed", "rate": "5/s"})
    alone, run = _standalone(data, 1)
    assert all(record.stage_ends_ps[0] < record.end_ps for record in run.record)  # two stages
    (served,) = _run(_only(data, 1)).jobs
    assert served.compute_ps is not None and served.serving == alone.serving
    assert served.end_ps == alone.total_time_ps


def test_a_pipeline_parallel_job_sharing_links_with_a_training_job_gets_a_longer_ttft() -> None:
    # The ring of 8 NPUs: the training job on the even NPUs, one TP-2 x PP-2 replica on the odd ones, its first
    # stage on NPUs 1 and 5 (its all-reduces across the ring), its second on 3 and 7 (activations 1 to 3, 5 to 7).
    data = _pipelined(6, {"process": "poisson", "rate": "500/s"})
    train, serving = data["workload"]["jobs"]
    train["npus"] = serving["npus"] = 4
    train["workload"]["parallelism"] |= {"dp": 4, "global_batch": 4}
    serving["workload"]["pools"][0]["replicas"] = 1
    data["workload"]["placement"] = "explicit"
    train["place"], serving["place"] = "0, 2, 4, 6", "1, 5, 3, 7"
    data["network"]["topology"] = [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "1us"}]
    (_, shared), (serve_alone,) = _run(data).jobs, _run(_only(data, 1)).jobs
    assert shared.serving is not None and serve_alone.serving is not None
    for figure in ("ttft_p50_ps", "ttft_p99_ps", "e2e_p99_ps"):
        assert shared.serving[figure] > serve_alone.serving[figure], figure


def _replay_counted(data: dict[str, Any]) -> tuple[PoolRun, list[Any], int]:
    """Job 1's standalone record, the graphs its replay builds and the nodes :func:`replay_size` counts."""
    workload = data["workload"]["jobs"][1]["workload"]
    source = registry.load("workload", "serving")(
        ServingRequestsWorkload.Config.model_validate({key: value for key, value in workload.items() if key != "kind"})
    )
    _, run = _standalone(data, 1)
    cached: dict[Any, Iteration] = {}

    def works(pool: int, shape: IterationShape) -> Iteration:
        return cached.setdefault((pool, shape), Iteration(shape, source.works(shape, pool)))

    replicas = [list(npus) for pool in source.pools() for npus in pool.replica_npus()]
    experts = expert_groups(source)
    nodes, _ = replay_size(run, replicas, works, experts)
    return run, replay_graphs(run, replicas, works, quantised, experts), nodes


def test_the_replay_size_counts_a_pipeline_parallel_job_s_nodes_and_activations() -> None:
    run, graphs, nodes = _replay_counted(_pipelined(8, {"process": "poisson", "rate": "50/s"}, tp=1))
    assert nodes == sum(len(graph.nodes) for graph in graphs) > 0
    # Replica r on ranks 2r (its first stage) and 2r + 1 (its second): one activation an iteration from one to the
    # other, the milestones on the second.
    for graph in graphs:
        kinds = {node.type for node in graph.nodes}
        milestones = [node for node in graph.nodes if node.milestone]
        if graph.npu % 2:
            assert workload_pb2.COMM_SEND_NODE not in kinds and all(n.peer == graph.npu - 1 for n in _p2p(graph))
        else:
            assert workload_pb2.COMM_RECV_NODE not in kinds and not milestones
    sent = [node for graph in graphs for node in _p2p(graph) if node.type == workload_pb2.COMM_SEND_NODE]
    assert len(sent) == len(run.record) == sum(len(_p2p(graph)) for graph in graphs if graph.npu % 2)


def _p2p(graph: workload_pb2.ExecutionGraph) -> list[workload_pb2.Node]:
    return [node for node in graph.nodes if node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE)]


def test_the_replay_size_counts_a_disaggregated_job_s_nodes_and_moves() -> None:
    data = _disaggregated(8, {"process": "poisson", "rate": "50/s"})
    run, graphs, nodes = _replay_counted(data)
    assert nodes == sum(len(graph.nodes) for graph in graphs) > 0
    # Each move as its two slices, a send on each prefill NPU and a receive on each decode NPU.
    sends = [node for graph in graphs for node in graph.nodes if node.name == "kv cache"]
    assert len(sends) == 2 * len(run.moves) and sum(node.comm_bytes for node in sends) == sum(
        quantised(move.size) for move in run.moves
    )


def test_a_disaggregated_pipelined_job_s_moves_leave_each_stage_as_it_finishes() -> None:
    # A TP-2 x PP-2 prefill replica handing off to two TP-1 x PP-2 decode replicas, requests 200 ms apart: the
    # loop sends a move's four slices (one from each prefill NPU, two into each decode NPU) together as the last
    # stage finishes; the replay sends the first stage's as that stage finishes, earlier, so its moves arrive
    # sooner (they no longer meet at the decode NPUs) while the prefill iterations, hence TTFT, are the same.
    data = _disaggregated(6, {"process": "fixed", "rate": "5/s"})
    data["workload"]["jobs"][1]["workload"]["pools"] = [
        {"name": "prefill", "role": "prefill", "replicas": 1, "parallelism": {"tp": 2, "pp": 2}},
        {"name": "decode", "role": "decode", "replicas": 2, "parallelism": {"tp": 1, "pp": 2}},
    ]
    alone, run = _standalone(data, 1)
    (served,) = _run(_only(data, 1)).jobs
    assert served.serving is not None and alone.serving is not None
    assert [served.serving[f] for f in ("ttft_p50_ps", "ttft_p99_ps")] == [
        alone.serving[f] for f in ("ttft_p50_ps", "ttft_p99_ps")
    ]
    assert served.serving["kv_transfer_p99_ps"] < alone.serving["kv_transfer_mean_ps"]
    assert served.serving["tpot_p50_ps"] < alone.serving["tpot_p50_ps"]
    _, graphs, nodes = _replay_counted(data)
    assert nodes == sum(len(graph.nodes) for graph in graphs)
    assert len([n for g in graphs for n in g.nodes if n.name == "kv cache"]) == 4 * len(run.moves)


def _swapping(requests: int) -> dict[str, Any]:
    """One TP-2 replica of role both on node 1 whose KV cache (48 MiB, 96 blocks) holds too little for ``requests`` requests
    arriving 1 ms apart, each generating 200 tokens: it preempts by swapping KV blocks over a 32 GB/s host link."""
    data = _disaggregated(requests, {"process": "fixed", "rate": "1000/s"})
    workload = data["workload"]["jobs"][1]["workload"]
    workload["requests"]["output"] = {"distribution": "fixed", "value": 200}
    scheduler = {"kv_capacity": "48MiB", "preemption": "swap", "swap_bandwidth": "32GB/s"}
    workload["pools"] = [{"name": "both", "replicas": 1, "parallelism": {"tp": 2}, "scheduler": scheduler}]
    data["workload"]["jobs"][1]["npus"] = 2
    return data


def test_a_replayed_job_that_swaps_gives_its_standalone_figures_its_copies_not_compute() -> None:
    # Each iteration's copies out to host memory then back run before its operators on both NPUs, as long as the
    # loop priced them (a store and a load stating their durations): alone, every figure is the standalone one, and
    # the compute stream idle behind them counts as exposed host-link communication, not compute.
    data = _swapping(8)
    alone, run = _standalone(data, 1)
    assert alone.serving is not None and alone.serving["swap_outs"] > 0
    report = _run(_only(data, 1))
    (served,) = report.jobs
    assert served.serving == alone.serving and served.end_ps == alone.total_time_ps
    copied = sum(sum(record.swaps) for record in run.record)
    assert copied == alone.serving["swap_time_ps"] > 0
    host = [dict(stats.exposed_comm_ps_by_kind).get(HOST_LINK, 0) for stats in report.result.per_npu]
    assert host[:2] == [copied] * 2 and not any(host[2:])  # every copy exposed: the operators wait for them
    _, graphs, nodes = _replay_counted(data)
    assert nodes == sum(len(graph.nodes) for graph in graphs)
    swaps = [node for node in graphs[0].nodes if node.pg_name == HOST_LINK]
    assert sum(node.duration_ps for node in swaps) == copied
    assert {node.type for node in swaps} == {workload_pb2.MEM_STORE_NODE, workload_pb2.MEM_LOAD_NODE}


def test_a_pool_on_its_own_device_is_replayed_on_it() -> None:
    # A role-both pool on A100s in a study of H100s: the engine prices the replayed operators on the pool's NPUs as
    # A100s (they are a group of compute.groups for the run), as its loop's pricer did, so alone it gives the
    # standalone figures to the ps; on the study's H100s it would be much faster.
    data = _pipelined(6, {"process": "fixed", "rate": "5/s"})
    pool = data["workload"]["jobs"][1]["workload"]["pools"][0]
    pool |= {"parallelism": {"tp": 2}, "replicas": 4, "device": "a100"}
    alone, _ = _standalone(data, 1)
    report = _run(_only(data, 1))
    (served,) = report.jobs
    assert served.compute_ps is not None and served.serving == alone.serving
    assert report.to_dict()["devices"] == {"h100": 8, "a100": 8}
    del pool["device"]
    (on_h100,) = _run(_only(data, 1)).jobs
    assert on_h100.serving is not None and on_h100.serving["ttft_p50_ps"] < alone.serving["ttft_p50_ps"] / 1.5


def _experts(network: str = "congestion_aware") -> dict[str, Any]:
    """A training job on NPUs 0, 2, 4, 6 of a ring of 8 and the small mixture of experts served by two TP-2
    replicas in one expert-parallel group on NPUs 1, 5 (replica 0) and 3, 7 (replica 1): the all-reduces and the
    all-to-alls (1 with 3, 5 with 7) cross the ring links the training job's gradient all-reduce uses."""
    serving = copy.deepcopy(MOE_STUDY["workload"])
    serving["pools"] = [{"replicas": 2, "parallelism": {"tp": 2, "ep": 2}, "scheduler": {"max_batch": 32}}]
    serving["requests"] |= {"count": 12, "arrival": {"process": "poisson", "rate": "500/s"}}
    train = _disaggregated(1, {"process": "fixed", "rate": "1/s"})["workload"]["jobs"][0]
    train["npus"] = 4
    train["workload"]["parallelism"] |= {"dp": 4, "global_batch": 4}
    return {
        "workload": {
            "kind": "jobs",
            "placement": "explicit",
            "jobs": [
                train | {"place": "0, 2, 4, 6"},
                {"name": "serve", "npus": 4, "place": "1, 5, 3, 7", "workload": serving},
            ],
        },
        "system": {"algorithm": "direct"},
        "network": {
            "backend": network,
            "topology": [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "1us"}],
        },
        "compute": {"backend": "roofline", "device": "h100"},
    }


def test_a_replayed_expert_parallel_job_alone_gives_its_standalone_figures() -> None:
    # The group of four TP-2 replicas on a switch of 8 NPUs (100 GB/s), 40 requests at 200/s: members busy with
    # batches of different lengths, idle members joining the all-to-alls; every figure the standalone loop's.
    data = copy.deepcopy(MOE_STUDY)
    data["workload"]["pools"][0]["parallelism"]["ep"] = 4
    data["network"]["backend"] = "congestion_aware"
    alone = _run(data).serving
    data["workload"] = {"kind": "jobs", "jobs": [{"name": "serve", "npus": 8, "workload": data["workload"]}]}
    (served,) = _run(data).jobs
    assert served.compute_ps is not None and served.serving == alone


def test_an_expert_parallel_job_sharing_links_with_a_training_job_gets_a_longer_ttft() -> None:
    data = _experts()
    (_, shared), (apart,) = _run(data).jobs, _run(_only(data, 1)).jobs
    assert shared.serving is not None and apart.serving is not None
    for figure in ("ttft_p50_ps", "ttft_p99_ps", "e2e_p99_ps"):
        assert shared.serving[figure] > apart.serving[figure], figure
    analytical = _experts("analytical")
    assert _run(analytical).jobs[1].serving == _run(_only(analytical, 1)).jobs[0].serving


def test_the_replay_size_counts_an_expert_parallel_job_s_nodes() -> None:
    data = _experts()
    data["workload"]["jobs"][1]["workload"]["requests"]["count"] = 30
    run, graphs, nodes = _replay_counted(data)
    assert nodes == sum(len(graph.nodes) for graph in graphs) > 0
    # Idle members joined their group's iterations: every member recorded each one.
    assert len(run.record) == 2 * len({record.start_ps for record in run.record}) > run.iterations
    nodes_in = [node for graph in graphs for part in (graph, *graph.blocks) for node in part.nodes]
    groups = {tuple(node.group) for node in nodes_in if node.comm_type == workload_pb2.ALL_TO_ALL and node.group}
    assert groups == {(0, 2), (1, 3)}  # the job's ranks: replica 0 on 0, 1 and replica 1 on 2, 3


def _speculative(draft_tp: int) -> dict[str, Any]:
    """Four TP-2 replicas of role both on node 1, each decoding speculatively with 4 proposals a step from a
    2-layer draft on ``draft_tp`` of its NPUs, 8 requests at 200/s."""
    data = _pipelined(8, {"process": "poisson", "rate": "200/s"})
    pool = data["workload"]["jobs"][1]["workload"]["pools"][0]
    draft = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "seq_len": 16384, "vocab": 32000}
    pool |= {
        "replicas": 4,
        "parallelism": {"tp": 2},
        "speculative": {"draft": draft, "tokens": 4, "tp": draft_tp, "acceptance": 0.8},
    }
    return data


def test_a_replayed_speculative_job_alone_gives_its_standalone_figures() -> None:
    # Each iteration's draft passes (over the prompt chunks and a token a decode, then 3 over the decodes) before
    # the target's, as the loop's pricer sums them: every figure the standalone loop's, the accepted tokens too.
    for draft_tp in (2, 1):
        data = _speculative(draft_tp)
        alone, _ = _standalone(data, 1)
        (served,) = _run(_only(data, 1)).jobs
        assert served.serving == alone.serving and served.serving is not None
        assert served.serving["speculative_tokens_per_step"] > 1


def test_the_replay_size_counts_a_speculative_job_s_nodes_with_a_draft_on_fewer_npus() -> None:
    run, graphs, nodes = _replay_counted(_speculative(1))
    assert nodes == sum(len(graph.nodes) for graph in graphs) > 0
    # The draft on each replica's first NPU: its all-reduces (of one NPU) none; the target's on both.
    groups = {
        tuple(node.group)
        for graph in graphs
        for part in (graph, *graph.blocks)
        for node in part.nodes
        if node.type == workload_pb2.COMM_COLL_NODE
    }
    assert groups and all(len(group) == 2 for group in groups)
