"""The dataflow workload: a graph file mapped onto TP x PP x DP NPUs, emitted per NPU and simulated.

Notation: ``t(op)`` is the roofline's time of operator ``op`` on the datasheet H100; a ring all-reduce of ``S`` bytes
on ``N`` NPUs in one chunk takes ``2 (N - 1) (alpha + ser(S / N))`` (tests/system_layer/test_closed_form.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.devices import datasheet
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel import operators, registry
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.grid import Grid
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.dataflow.file import parse_graph
from stratasim.workload_layer.dataflow.sharding import backward_operators
from stratasim.workload_layer.dataflow.workload import DataflowWorkload
from tests.helpers import RunCli
from tests.system_layer.helpers import RING, ser, topology
from tests.workload_layer.transformer_helpers import messages

H100 = RooflineCompute([datasheet(PRESETS["h100"])])
B, ALPHA = 100 * 10**9, 1_000_000  # 100 GB/s and 1 us per hop

MLP = {
    "name": "mlp",
    "kernels": [
        {"name": "up", "kind": "gemm", "m": 512, "k": 1024, "n": 4096, "weights": True},
        {"name": "act", "kind": "elementwise", "elements": 512 * 4096, "flops_per_element": 8, "function": "gelu"},
        {"name": "down", "kind": "gemm", "m": 512, "k": 4096, "n": 1024, "weights": True},
    ],
    "tensors": [{"from": "up", "to": "act"}, {"from": "act", "to": "down"}],
}
MEGATRON = {"up": "n", "act": "split_S1", "down": "k"}
STAGES = {"up": 0, "act": 0, "down": 1}


def gpt_layer(tokens: int = 512, hidden: int = 1024, heads: int = 8) -> dict[str, object]:
    """One GPT layer as a chain of kernels: layernorm, QKV, attention, projection, residual, layernorm, MLP,
    residual."""
    d = hidden // heads
    elementwise = {"kind": "elementwise", "elements": tokens * hidden}
    chain = [
        {"name": "ln1", **elementwise, "flops_per_element": 8, "function": "layernorm"},
        {"name": "qkv", "kind": "gemm", "m": tokens, "k": hidden, "n": 3 * hidden, "weights": True},
        {"name": "attn", "kind": "attention", "batch": heads, "queries": tokens, "keys": tokens, "head_dim": d},
        {"name": "proj", "kind": "gemm", "m": tokens, "k": hidden, "n": hidden, "weights": True},
        {"name": "add1", **elementwise, "function": "add"},
        {"name": "ln2", **elementwise, "flops_per_element": 8, "function": "layernorm"},
        {"name": "fc1", "kind": "gemm", "m": tokens, "k": hidden, "n": 4 * hidden, "weights": True},
        {"name": "gelu", "kind": "elementwise", "elements": tokens * 4 * hidden, "flops_per_element": 8},
        {"name": "fc2", "kind": "gemm", "m": tokens, "k": 4 * hidden, "n": hidden, "weights": True},
        {"name": "add2", **elementwise, "function": "add"},
    ]
    tensors = [{"from": a["name"], "to": b["name"]} for a, b in zip(chain, chain[1:])]
    return {"name": "gpt-layer", "training": True, "kernels": chain, "tensors": tensors}


GPT_MEGATRON = {"qkv": "n", "attn": "heads", "proj": "k", "fc1": "n", "gelu": "split_S1", "fc2": "k"}


def workload(tmp: Path, graph: dict[str, object], **mapping: object) -> DataflowWorkload:
    (tmp / "graph.yaml").write_text(yaml.safe_dump(graph), encoding="utf-8")
    config = DataflowWorkload.Config.model_validate({"graph": str(tmp / "graph.yaml"), "mapping": mapping})
    return DataflowWorkload(config)


def graphs(work: DataflowWorkload) -> list[workload_pb2.ExecutionGraph]:
    return list(work.graphs(work.npus_required()))


def run(work: DataflowWorkload) -> SimulationResult:
    """Simulate on rings ``[tp, pp, dp]`` of 100 GB/s and 1 us per hop, one chunk per collective."""
    plan = work.plan
    dims = [(RING, size, B, ALPHA) for size in (plan.tp, plan.pp, plan.dp)]
    return simulate(graphs(work), AnalyticalNetwork(), topology(*dims), SystemOptions(), compute=H100, device="h100")


def t(op: compute_pb2.OperatorDesc) -> int:
    return H100.estimate(compute_pb2.EstimateRequest(device="h100", ops=[op])).costs[0].duration_ps


def ring_all_reduce(size: int, n: int) -> int:
    return 2 * (n - 1) * (ALPHA + ser(-(-size // n), B))


@pytest.mark.parametrize("training", [False, True])
def test_a_megatron_mlp_takes_its_operators_and_one_all_reduce(tmp_path: Path, training: bool) -> None:
    # TP 2: up [512, 1024] x [1024, 2048], GeLU on 512 x 2048, down [512, 2048] x [2048, 1024] whose partial sums
    # (512 x 1024 bf16, 1 MiB) are all-reduced. Training adds each kernel's backward operators after it, on the
    # same serial stream: no gradient needs converting (Megatron's MLP exchanges nothing backward within it).
    work = workload(tmp_path, {**MLP, "training": training}, tp=2, schemes=MEGATRON)
    forward = [
        operators.gemm(512, 1024, 2048, name="up"),
        operators.elementwise((512 * 2048,), flops_per_element=8, name="act", function=compute_pb2.GELU),
        operators.gemm(512, 2048, 1024, name="down"),
    ]
    ops = forward + [b for op in forward for b in backward_operators(op)] if training else forward
    expected = sum(t(op) for op in ops) + ring_all_reduce(512 * 1024 * 2, 2)
    assert run(work).total_time_ps == expected


def test_data_parallel_replicas_all_reduce_their_weight_shares_at_the_end(tmp_path: Path) -> None:
    # TP 2 x DP 2: each device holds half of each GEMM's weights, (1024 x 4096 x 2) x 2 / 2 = 8 MiB, all-reduced over
    # DP after the last backward operator; weights split by rows (scheme m) are summed over TP first.
    work = workload(tmp_path, {**MLP, "training": True}, tp=2, dp=2, schemes=MEGATRON)
    (graph, *_) = graphs(work)
    (dp,) = [n for n in graph.nodes if n.pg_name == "dp"]
    assert dp.comm_bytes == 1024 * 4096 * 2 and dp.name == "weight gradient dp all-reduce"
    assert graph.resident_bytes["weights"] == dp.comm_bytes
    work = workload(tmp_path, {**MLP, "training": True}, tp=2, dp=2, schemes={"up": "m", "act": "split_S0"})
    (graph, *_) = graphs(work)
    tp_sum = [n for n in graph.nodes if n.name == "weight gradient tp sum"]
    assert [n.comm_bytes for n in tp_sum] == [1024 * 4096 * 2]  # up's weights, whole on each device


@pytest.mark.parametrize("repeat", [1, 3])
def test_a_gpt_layer_with_megatron_schemes_runs_four_tp_all_reduces(tmp_path: Path, repeat: int) -> None:
    # Forward: the projection's and the second MLP GEMM's partial sums; backward: the gradients of the inputs of
    # the QKV and first MLP GEMMs, which each device computes a part of. Per layer and micro-batch.
    work = workload(tmp_path, {**gpt_layer(), "repeat": repeat}, tp=4, micro_batches=2, schemes=GPT_MEGATRON)
    for graph in graphs(work):
        tp = [n for n in graph.nodes if n.pg_name == "tp"]
        assert len(tp) == 4 * repeat * 2
        assert {n.comm_type for n in tp} == {workload_pb2.ALL_REDUCE}
        assert {n.comm_bytes for n in tp} == {512 * 1024 * 2}
        assert sum("gradient" in n.name for n in tp) == 2 * repeat * 2
    assert run(work).total_time_ps > 0


def test_two_stages_send_each_tensor_crossing_them_and_its_gradient(tmp_path: Path) -> None:
    # up and act on stage 0, down on stage 1: per micro-batch and repeat, act's output (split by columns, a
    # quarter a TP rank) goes forward and its gradient (split the same) back, between NPUs of equal TP rank.
    graph = {**MLP, "training": True, "repeat": 2}
    work = workload(tmp_path, graph, tp=4, pp=2, micro_batches=3, schemes=MEGATRON, stages=STAGES)
    every = graphs(work)
    sends = messages(every, workload_pb2.COMM_SEND_NODE)
    assert sends == messages(every, workload_pb2.COMM_RECV_NODE)
    share = 512 * 4096 * 2 // 4
    tags = [2 * (2 * i + 1) for i in range(6)]  # tensor 1 of 2, for each (micro-batch, repeat); backward odd
    forward = Counter({(rank, rank + 4, tag, share): 1 for rank in range(4) for tag in tags})
    backward = Counter({(rank + 4, rank, tag + 1, share): 1 for rank in range(4) for tag in tags})
    assert sends == forward + backward
    for schedule in ("gpipe", "1f1b"):
        work = workload(tmp_path, graph, tp=4, pp=2, micro_batches=3, schemes=MEGATRON, stages=STAGES,
                        schedule=schedule)  # fmt: skip
        assert run(work).total_time_ps > 0


def test_registered_as_a_workload_kind() -> None:
    assert registry.load("workload", "dataflow") is DataflowWorkload


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dataflow"
BAD_STUDIES = {
    "unknown kernel": (
        {"schemes": {"upp": "n"}},
        "workload.mapping.schemes.upp: the graph 'two-gemms' has no such kernel; did you mean 'up'?",
    ),
    "unknown scheme": ({"schemes": {"down": "n"}}, "workload.mapping.schemes.down: kernel 'down': has no sharding"),
    "stage backwards": (
        {"pp": 2, "tp": 2, "stages": {"up": 1, "act": 0, "down": 1}},
        "workload.mapping.stages.act: stage 0 comes before stage 1 of 'up'",
    ),
    "stage missing": (
        {"pp": 2, "tp": 2, "stages": {"up": 0}},
        "every kernel needs a stage, or none (the repeats split); missing act, down",
    ),
    "stage out of range": ({"stages": {"up": 1}}, "workload.mapping.stages.up: stage 1 does not exist"),
    "empty stage": ({"pp": 2, "tp": 2, "stages": {"up": 0, "act": 0, "down": 0}}, "stage 1 holds no kernel"),
    "degrees": ({"tp": 2}, "its plan runs on 4 NPUs but the topology (network.topology) has 8"),
    "bad degree": ({"tp": 0}, "workload.mapping.tp: input should be greater than or equal to 1"),
    "unknown key": ({"micro_batch": 2}, "workload.mapping.micro_batch: unknown key; did you mean 'micro_batches'?"),
    "bad schedule": ({"schedule": "interleaved"}, "workload.mapping.schedule: input should be 'gpipe' or '1f1b'"),
}


@pytest.mark.parametrize(("mapping", "expected"), BAD_STUDIES.values(), ids=BAD_STUDIES.keys())
def test_a_bad_mapping_is_one_clear_error(
    tmp_path: Path, run_cli: RunCli, mapping: dict[str, object], expected: str
) -> None:
    study = yaml.safe_load((EXAMPLE / "two_gemms.yaml").read_text(encoding="utf-8"))
    study["workload"]["mapping"] = {**study["workload"]["mapping"], **mapping}
    study["workload"]["graph"] = str(EXAMPLE / "two_gemms.graph.json")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(study), encoding="utf-8")
    code, out, err = run_cli("check", str(tmp_path / "s.yaml"))
    assert code == 2 and "Traceback" not in err, err
    assert expected in err, err


def test_a_bad_graph_file_is_named_by_the_study(tmp_path: Path, run_cli: RunCli) -> None:
    study = yaml.safe_load((EXAMPLE / "two_gemms.yaml").read_text(encoding="utf-8"))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(study), encoding="utf-8")  # the graph file is not beside it
    code, _, err = run_cli("check", str(tmp_path / "s.yaml"))
    assert code == 2 and f"{tmp_path / 'two_gemms.graph.json'}: cannot read the dataflow graph: no such file" in err, (
        err
    )
    (tmp_path / "two_gemms.graph.json").write_text(
        '{"kernels": [{"name": "a", "kind": "gemm", "m": -3, "k": 1, "n": 1}]}', "utf-8"
    )
    code, _, err = run_cli("check", str(tmp_path / "s.yaml"))
    assert code == 2 and "two_gemms.graph.json: kernels[0].m: expected a positive integer, got -3" in err, err


def test_symmetric_ranks_run_their_stage_representatives_graph(tmp_path: Path) -> None:
    # Every TP and DP rank of a stage runs the graph of the stage's TP 0, DP 0 moved along the topology: simulating
    # the representatives only gives every NPU's time.
    graph = {**MLP, "training": True}
    work = workload(tmp_path, graph, tp=2, pp=2, dp=2, micro_batches=2, schemes=MEGATRON, stages=STAGES)
    dims = [(RING, 2, B, ALPHA)] * 3
    grid = Grid.of(topology(*dims))
    assert work.representatives(grid) == (0, 0, 2, 2, 0, 0, 2, 2)
    whole = run(work)
    every = graphs(work)
    alone = simulate(
        every, AnalyticalNetwork(), topology(*dims), SystemOptions(), compute=H100, device="h100",
        representatives=work.representatives(grid),
    )  # fmt: skip
    assert alone.total_time_ps == whole.total_time_ps


def test_a_graph_built_in_memory_runs_as_its_file_would(tmp_path: Path) -> None:
    from_file = workload(tmp_path, MLP, tp=2, schemes=MEGATRON)
    config = DataflowWorkload.Config.model_validate({"graph": "built.json", "mapping": {"tp": 2, "schemes": MEGATRON}})
    in_memory = DataflowWorkload(config, parse_graph(MLP, "built.json"))
    assert graphs(in_memory) == graphs(from_file)


def test_a_kernel_taking_two_tensors_from_one_producer_waits_for_it_once(tmp_path: Path) -> None:
    # Attention scores as a GEMM without weights: both operands come from one kernel, on two input slots.
    graph = {
        "name": "two-slots",
        "training": True,
        "kernels": [
            {"name": "proj", "kind": "gemm", "m": 256, "k": 256, "n": 256, "weights": True},
            {"name": "scores", "kind": "gemm", "m": 256, "k": 256, "n": 256},
        ],
        "tensors": [{"from": "proj", "to": "scores"}, {"from": "proj", "to": "scores", "slot": 1}],
    }
    work = workload(tmp_path, graph, tp=2, schemes={"proj": "n", "scores": "batch"})
    for node in graphs(work)[0].nodes:
        assert len(set(node.data_deps)) == len(node.data_deps)
    assert run(work).total_time_ps > 0


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_stages_may_split_the_repeats_handing_the_graph_outputs_on(tmp_path: Path, schedule: str) -> None:
    # No stages listed with pp = 2: each stage runs 2 of the 4 repeats. Per micro-batch, stage 0's last repeat
    # hands down's output (partial sums all-reduced first: 512 x 1024 bf16, whole on each TP rank) to stage 1, and
    # its gradient comes back; stage 1 runs repeats 2 and 3.
    graph = {**MLP, "training": True, "repeat": 4}
    work = workload(tmp_path, graph, tp=2, pp=2, micro_batches=3, schemes=MEGATRON, schedule=schedule)
    every = graphs(work)
    sends = messages(every, workload_pb2.COMM_SEND_NODE)
    assert sends == messages(every, workload_pb2.COMM_RECV_NODE)
    base, size = 3 * 4 * 2, 512 * 1024 * 2  # tags after the tensors' (3 micro-batches x 4 repeats x 2 tensors)
    forward = Counter({(rank, rank + 2, 2 * (base + m), size): 1 for rank in range(2) for m in range(3)})
    backward = Counter({(rank + 2, rank, 2 * (base + m) + 1, size): 1 for rank in range(2) for m in range(3)})
    assert sends == forward + backward
    assert {n.name.split()[1] for n in every[2].nodes if n.type == workload_pb2.COMP_NODE} == {"r2", "r3"}
    assert every[0].resident_bytes["weights"] == 2 * (1024 * 4096 * 2 // 2) * 2  # two repeats of two GEMMs' halves
    whole = run(work)
    grid = Grid.of(topology(*[(RING, size, B, ALPHA) for size in (2, 2, 1)]))
    assert work.representatives(grid) == (0, 0, 2, 2)
    topo = topology(*[(RING, size, B, ALPHA) for size in (2, 2, 1)])
    alone = simulate(
        every, AnalyticalNetwork(), topo, SystemOptions(), compute=H100, device="h100", representatives=(0, 0, 2, 2)
    )
    assert alone.total_time_ps == whole.total_time_ps > 0


def test_repeats_that_do_not_split_over_the_stages_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StrataSimError, match=r"workload.mapping.pp: the graph's 3 repeats do not split evenly"):
        workload(tmp_path, {**MLP, "repeat": 3}, tp=1, pp=2)


def test_a_two_stage_forward_pass_is_both_stages_and_one_transfer(tmp_path: Path) -> None:
    # Inference, TP 1, PP 2 splitting 2 repeats, one micro-batch: stage 0 runs up, act, down once, sends down's
    # output (512 x 1024 bf16) one hop, alpha + ser(1 MiB), and stage 1 runs them once more.
    work = workload(tmp_path, {**MLP, "repeat": 2}, pp=2)
    ops = [
        operators.gemm(512, 1024, 4096, name="up"),
        operators.elementwise((512 * 4096,), flops_per_element=8, name="act", function=compute_pb2.GELU),
        operators.gemm(512, 4096, 1024, name="down"),
    ]
    assert run(work).total_time_ps == 2 * sum(t(op) for op in ops) + ALPHA + ser(512 * 1024 * 2, B)
