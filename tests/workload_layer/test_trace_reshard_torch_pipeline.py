"""``stratasim trace reshard --pp`` of a trace converted from PyTorch: its layers found from the repeating blocks of
its ATen operator sequence and dealt out to the new stages, a transfer of the last layer operator's output between
them; each rank's compute is conserved across its new stages, the trace replays, and what cannot be found is one
``error:`` line naming the file and node."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stratasim.chakra.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, AttributeProto, GlobalMetadata, Node
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.chakra import read_trace, write_trace
from stratasim.workload_layer.traces.pipeline_cut import Schedule
from stratasim.workload_layer.traces.rescale import Plan, plan_attributes
from stratasim.workload_layer.traces.reshard import resharded
from tests.helpers import RunCli
from tests.workload_layer.test_trace_reshard import replayed, study

BF16 = "Tensor(c10::BFloat16)"
T, H, FFN, VOCAB, LAYERS, MICRO_BATCHES = 8, 32, 128, 1000, 4, 2
"""One sequence of 8 tokens, hidden 32, 4 heads of 8, FFN 128, vocabulary 1,000, 4 layers; 2 micro-batches;
recorded at TP 2, PP 1, DP 2."""
PLAN = Plan(2, 1, 2)

Op = tuple[str, list[list[int]], list[list[int]]]


def _layer_forward(tp: int) -> list[Op | str]:
    heads = [1, 4 // tp, T, 8]
    sdpa = "aten::_scaled_dot_product_flash_attention"
    return [
        ("aten::native_layer_norm", [[1, T, H], [H], [H]], [[1, T, H]]),
        ("aten::linear", [[1, T, H], [3 * H // tp, H], [3 * H // tp]], [[1, T, 3 * H // tp]]),
        (sdpa, [heads, heads, heads], [heads]),
        ("aten::mm", [[T, H // tp], [H // tp, H]], [[T, H]]),
        "tp",
        ("aten::add", [[1, T, H], [1, T, H]], [[1, T, H]]),
        ("aten::native_layer_norm", [[1, T, H], [H], [H]], [[1, T, H]]),
        ("aten::addmm", [[FFN // tp], [T, H], [H, FFN // tp]], [[T, FFN // tp]]),
        ("aten::gelu", [[T, FFN // tp]], [[T, FFN // tp]]),
        ("aten::mm", [[T, FFN // tp], [FFN // tp, H]], [[T, H]]),
        "tp",
        ("aten::add", [[1, T, H], [1, T, H]], [[1, T, H]]),
    ]


def _layer_backward(tp: int) -> list[Op | str]:
    f, q, heads = FFN // tp, 3 * H // tp, [1, 4 // tp, T, 8]
    return [
        ("aten::mm", [[T, H], [H, f]], [[T, f]]),
        ("aten::mm", [[H, T], [T, f]], [[H, f]]),
        ("aten::gelu_backward", [[T, f], [T, f]], [[T, f]]),
        ("aten::mm", [[T, f], [f, H]], [[T, H]]),
        ("aten::mm", [[f, T], [T, H]], [[f, H]]),
        "tp",
        ("aten::native_layer_norm_backward", [[1, T, H], [1, T, H]], [[1, T, H]]),
        ("aten::mm", [[T, H], [H, H // tp]], [[T, H // tp]]),
        ("aten::mm", [[H, T], [T, H // tp]], [[H, H // tp]]),
        ("aten::_scaled_dot_product_flash_attention_backward", [heads] * 4, [heads] * 3),
        ("aten::mm", [[T, q], [q, H]], [[T, H]]),
        ("aten::mm", [[q, T], [T, H]], [[q, H]]),
        "tp",
        ("aten::native_layer_norm_backward", [[1, T, H], [1, T, H]], [[1, T, H]]),
    ]


def operations(tp: int = 2) -> list[Op | str]:
    """One rank's operators in order (``"tp"``/``"dp"``: an all-reduce over that group), as PyTorch runs two
    micro-batches of training with gradient accumulation and DDP's buckets in the last backward pass."""
    v = VOCAB // tp
    ops: list[Op | str] = []
    for mb in range(MICRO_BATCHES):
        ops += [("aten::embedding", [[v, H], [1, T]], [[1, T, H]]), "tp"]
        ops += _layer_forward(tp) * LAYERS
        ops += [
            ("aten::native_layer_norm", [[1, T, H], [H], [H]], [[1, T, H]]),
            ("aten::linear", [[1, T, H], [v, H]], [[1, T, v]]),
            ("aten::_log_softmax", [[T, v]], [[T, v]]),
            ("aten::nll_loss_forward", [[T, v], [T]], [[]]),
            ("aten::nll_loss_backward", [[], [T, v], [T]], [[T, v]]),
            ("aten::_log_softmax_backward_data", [[T, v], [T, v]], [[T, v]]),
            ("aten::mm", [[T, v], [v, H]], [[T, H]]),
            ("aten::mm", [[v, T], [T, H]], [[v, H]]),
            "tp",
            ("aten::native_layer_norm_backward", [[1, T, H], [1, T, H]], [[1, T, H]]),
        ]
        for layer in range(LAYERS):
            ops += _layer_backward(tp) + (["dp"] if mb == MICRO_BATCHES - 1 and layer % 2 else [])
        ops += [("aten::embedding_dense_backward", [[1, T, H], [1, T]], [[v, H]])]
    return ops + [("aten::_foreach_mul_", [[v, H]], [[v, H]]), ("aten::_foreach_add_", [[v, H], [v, H]], [[v, H]])]


def _node(node_id: int, op: Op | str, rank: int) -> Node:
    node = Node(id=node_id, data_deps=[node_id - 1] if node_id else [])
    if isinstance(op, str):
        group = PLAN.layout.group(rank, op)
        node.name, node.type = f"nccl:all_reduce {op}", COMM_COLL_NODE
        node.attr.extend(
            [
                AttributeProto(name="comm_type", int64_val=workload_pb2.ALL_REDUCE),
                AttributeProto(name="comm_size", int64_val=T * H * 2 if op == "tp" else 40_000),
                AttributeProto(name="pg_name", string_val=f"{op}{min(group)}"),
            ]
        )
        return node
    name, inputs, outputs = op
    node.name, node.type, node.duration_micros = name, COMP_NODE, 1 + node_id % 7
    node.inputs.shapes, node.outputs.shapes = str(inputs), str(outputs)
    node.inputs.types, node.outputs.types = str([BF16] * len(inputs)), str([BF16] * len(outputs))
    return node


def write(prefix: Path, change: Callable[[list[Node]], None] | None = None) -> Path:
    """The trace ``prefix``: each rank of :data:`PLAN` runs :func:`operations`, with the groups file."""
    for rank in range(PLAN.npus):
        nodes = [_node(i, op, rank) for i, op in enumerate(operations())]
        if change is not None:
            change(nodes)
        write_trace(f"{prefix}.{rank}.et", GlobalMetadata(attr=plan_attributes(PLAN)), nodes)
    groups = {
        f"{axis}{min(g)}": list(g) for axis in ("tp", "dp") for g in (PLAN.layout.group(r, axis) for r in range(4))
    }
    Path(f"{prefix}.json").write_text(json.dumps(groups), encoding="utf-8")
    return prefix


def _compute_ps(graph: workload_pb2.ExecutionGraph) -> int:
    return sum(node.duration_ps for node in graph.nodes if node.type == workload_pb2.COMP_NODE)


@pytest.mark.parametrize(("pp", "schedule"), [(2, None), (4, None), (2, Schedule("gpipe"))])
def test_each_ranks_compute_is_conserved_across_its_new_stages(
    tmp_path: Path, pp: int, schedule: Schedule | None
) -> None:
    source = write(tmp_path / "torch")
    graphs, plan, assumed = resharded(source, 2, pp, None, max_npus=64, schedule=schedule)
    _, recorded = read_trace(f"{source}.0.et")
    original = sum(node.duration_micros for node in recorded if node.type == COMP_NODE) * 10**6
    stages = [graphs[plan.layout.npu({"tp": 0, "pp": p, "dp": 0})] for p in range(pp)]
    # the optimizer's two nodes are split by the stages' shares of the weights, each rounded down
    assert original - 2 * pp <= sum(_compute_ps(graph) for graph in stages) <= original
    assert "embedding" in assumed[0] and "head" in assumed[0]
    first = [node.name for node in stages[0].nodes]
    last = [node.name for node in stages[-1].nodes]
    assert "aten::embedding" in first and "aten::embedding" not in last
    assert "aten::nll_loss_forward" in last and "aten::nll_loss_forward" not in first
    layer_norms = [name for name in first if name == "aten::native_layer_norm"]
    assert len(layer_norms) == 2 * LAYERS // pp * MICRO_BATCHES  # whole layers, both micro-batches
    sends: Counter[tuple[int, int, int, int]] = Counter()
    receives: Counter[tuple[int, int, int, int]] = Counter()
    for graph in graphs:
        for node in graph.nodes:
            if node.type == workload_pb2.COMM_SEND_NODE:
                sends[(graph.npu, node.peer, node.tag, node.comm_bytes)] += 1
            elif node.type == workload_pb2.COMM_RECV_NODE:
                receives[(node.peer, graph.npu, node.tag, node.comm_bytes)] += 1
    # the last layer operator's output, [1, T, H] in BF16; a forward and a backward message per micro-batch
    assert sends == receives and {size for *_, size in sends} == {T * H * 2}
    assert sum(sends.values()) == 4 * 2 * MICRO_BATCHES * (pp - 1)


def test_the_cli_recuts_a_pytorch_trace_saying_what_it_assumed(run_cli: RunCli, tmp_path: Path) -> None:
    source = write(tmp_path / "torch")
    code, out, err = run_cli("trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "2", "--pp", "2")
    assert (code, err) == (0, "") and "wrote 9 files" in out
    assert "note: the layers were read from the repeating blocks of the PyTorch operator sequence" in out
    assert replayed(study(2, pp=2, global_batch=8), tmp_path / "r") > 0


def _no_norm(nodes: list[Node]) -> None:
    for node in nodes:
        if node.name == "aten::native_layer_norm":
            node.name = "aten::mystery_norm"


def _layer_removed(nodes: list[Node]) -> None:
    """The second micro-batch's first layer norm renamed: its forward run is a layer short."""
    norms = [node for node in nodes if node.name == "aten::native_layer_norm"]
    norms[2 * LAYERS + 1].name = "aten::rms_norm"


def _backward_short(nodes: list[Node]) -> None:
    """A norm backward of the first micro-batch's first layer renamed: its backward no longer repeats 4 times."""
    norms = [node for node in nodes if node.name == "aten::native_layer_norm_backward"]
    norms[2].name = "aten::rms_norm_backward"


def _no_outputs(nodes: list[Node]) -> None:
    for node in nodes:
        if node.name == "aten::add":
            node.outputs.shapes = "[]"


def _forward_only(nodes: list[Node]) -> None:
    """Every micro-batch's backward pass (after its loss, up to the next embedding) and the optimizer dropped."""
    kept, skipping = [], False
    for node in nodes:
        skipping = skipping and node.name != "aten::embedding"
        kept += [] if skipping else [node]
        skipping = skipping or node.name == "aten::nll_loss_forward"
    nodes[:] = kept


def _dp_all_gather(nodes: list[Node]) -> None:
    for node in nodes:
        if node.name == "nccl:all_reduce dp":
            node.attr[0].int64_val = workload_pb2.ALL_GATHER


@pytest.mark.parametrize(
    ("change", "options", "message"),
    [
        (_no_norm, [], "{first}: no block of nodes beginning at a layer norm (aten::_fused_rms_norm, aten::layer_norm"),
        (_layer_removed, [], "{first}: the layer block found (12 nodes from node 2) repeats [3, 4] times in"),
        (_backward_short, [], "{first}: the backward pass does not repeat a block ending at a norm's backward 4 times"),
        (_no_outputs, [], "{first}: node 13 (aten::add): the last operator of a layer records no output shape"),
        (_forward_only, [], "{first}: 2 micro-batches' forward passes and no backward pass: where one's head ends"),
        (
            _dp_all_gather,
            [],
            "{first}: node 205 (nccl:all_reduce dp): a DP collective other than a gradient all-reduce",
        ),
        (None, ["--schedule", "zb_h1"], "--schedule zb_h1: the trace ({first}) was converted from PyTorch, whose"),
    ],
)
def test_what_cannot_be_found_is_one_message(
    run_cli: RunCli, tmp_path: Path, change: Any, options: list[str], message: str
) -> None:
    source = write(tmp_path / "torch", change)
    code, out, err = run_cli("trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "2", "--pp", "2", *options)
    assert (code, out) == (2, "") and err.startswith("error: " + message.format(first=f"{source}.0.et")), err
    assert err.count("\n") == 1 and not list(tmp_path.glob("r.*"))
