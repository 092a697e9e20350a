"""``stratasim trace reshard`` of a trace converted from PyTorch (no ``stratasim.op``): its operators read from the
ATen names and tensor shapes Chakra's converter keeps, scaled by the dimension that is neither the tokens nor the
hidden size; what cannot be classified is one ``error:`` line naming the node."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.chakra.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, AttributeProto, GlobalMetadata, Node
from stratasim.kernel import operators
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.traces.chakra import read_trace, write_trace
from stratasim.workload_layer.traces.rescale import Plan, plan_attributes
from stratasim.workload_layer.traces.reshard import resharded
from tests.helpers import RunCli

BF16 = "Tensor(c10::BFloat16)"
TOKENS, HIDDEN = 8, 32
"""One sequence of 8 tokens, hidden 32, 4 heads of 8, FFN 128: recorded at TP 2."""


def _compute(node_id: int, name: str, shapes: list[list[int]], **fields: Any) -> Node:
    node = Node(id=node_id, name=name, type=COMP_NODE, duration_micros=3, data_deps=[node_id - 1] if node_id else [])
    node.inputs.shapes = str(shapes)
    node.inputs.types = str([BF16 if shape else "Double" for shape in shapes])
    node.inputs.values = str(fields.pop("values", []))
    if fields.pop("cpu", False):
        node.attr.append(AttributeProto(name="is_cpu_op", bool_val=True))
    return node


def layer(tp: int = 2) -> list[Node]:
    """A PyTorch layer's forward pass on one rank of ``tp`` as Chakra's converter writes it."""
    heads, ffn = 4 // tp, 128 // tp
    sdpa = "aten::_scaled_dot_product_flash_attention"
    reduce = Node(id=6, name="nccl:all_reduce", type=COMM_COLL_NODE, data_deps=[5])
    reduce.attr.extend(
        [
            AttributeProto(name="comm_type", int64_val=workload_pb2.ALL_REDUCE),
            AttributeProto(name="comm_size", int64_val=TOKENS * HIDDEN * 2),
            AttributeProto(name="pg_name", string_val="tp"),
        ]
    )
    return [
        _compute(0, "aten::layer_norm", [[1, TOKENS, HIDDEN], [HIDDEN], [HIDDEN], []]),
        _compute(1, "aten::linear", [[1, TOKENS, HIDDEN], [3 * HIDDEN // tp, HIDDEN], [3 * HIDDEN // tp]]),
        _compute(2, sdpa, [[1, heads, TOKENS, 8]] * 3 + [[], []], values=[[], [], [], 0.0, True, False, None]),
        _compute(3, "aten::mm", [[TOKENS, HIDDEN // tp], [HIDDEN // tp, HIDDEN]]),
        _compute(4, "aten::empty", [[TOKENS, HIDDEN]], cpu=True),
        _compute(5, "aten::add", [[1, TOKENS, HIDDEN], [1, TOKENS, HIDDEN], []]),
        reduce,
        _compute(7, "aten::addmm", [[ffn], [TOKENS, HIDDEN], [HIDDEN, ffn]]),
        _compute(8, "aten::gelu", [[TOKENS, ffn]]),
        _compute(9, "aten::mm", [[TOKENS, ffn], [ffn, HIDDEN]]),
    ]


def write(prefix: Path, tp: int = 2, change: Callable[[list[Node]], None] | None = None) -> Path:
    """The trace ``prefix`` of ``tp`` ranks (TP ``tp``, PP 1, DP 1) with its groups file."""
    for rank in range(tp):
        nodes = layer(tp)
        if change is not None:
            change(nodes)
        write_trace(f"{prefix}.{rank}.et", GlobalMetadata(attr=plan_attributes(Plan(tp, 1, 1))), nodes)
    Path(f"{prefix}.json").write_text(json.dumps({"tp": list(range(tp))}), encoding="utf-8")
    return prefix


def test_each_operator_is_read_and_scaled_by_its_split_dimension(tmp_path: Path) -> None:
    graphs, _, _ = resharded(write(tmp_path / "torch"), 4, 1, None, max_npus=8)
    ops = {node.id: node.op for node in graphs[3].nodes if node.HasField("op")}
    bf16 = compute_pb2.BF16
    assert ops == {
        0: operators.elementwise([TOKENS * HIDDEN], bf16, inputs=3, name="aten::layer_norm"),  # replicated
        1: operators.gemm(TOKENS, HIDDEN, 24, bf16, name="aten::linear"),  # column-parallel: N
        2: operators.attention(1, TOKENS, TOKENS, 8, causal=True, dtype=bf16, name="aten::_scaled_dot_product_flash_attention"),
        3: operators.gemm(TOKENS, 8, HIDDEN, bf16, name="aten::mm"),  # row-parallel: K
        5: operators.elementwise([TOKENS * HIDDEN], bf16, inputs=2, name="aten::add"),
        7: operators.gemm(TOKENS, HIDDEN, 32, bf16, name="aten::addmm"),
        8: operators.elementwise([TOKENS * 32], bf16, inputs=1, name="aten::gelu"),
        9: operators.gemm(TOKENS, 32, HIDDEN, bf16, name="aten::mm"),
    }  # fmt: skip
    kept = next(node for node in graphs[3].nodes if node.name == "aten::empty")
    assert kept.duration_ps == 3_000_000 and not kept.HasField("op")  # a CPU operator keeps its time
    assert [n.comm_bytes for n in graphs[3].nodes if n.type == workload_pb2.COMM_COLL_NODE] == [TOKENS * HIDDEN * 2]


def test_the_cli_prices_a_resharded_pytorch_trace(run_cli: RunCli, tmp_path: Path) -> None:
    study = {
        "name": "torch",
        "workload": {"kind": "chakra", "path": "unused"},
        "network": {
            "backend": "analytical",
            "topology": [{"kind": "ring", "size": 4, "bandwidth": "300GB/s", "latency": "1us"}],
        },
        "compute": {"backend": "roofline", "device": "h100"},
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(study), encoding="utf-8")
    source = write(tmp_path / "torch")
    code, out, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "4", "--pp", "1", "--study", str(tmp_path / "s.yaml")
    )  # fmt: skip
    assert (code, err) == (0, "") and "wrote 4 files" in out  # the TP group is every rank: no groups file
    _, nodes = read_trace(tmp_path / "r.3.et")
    durations = {node.name: node.duration_micros for node in nodes if node.type == COMP_NODE}
    assert durations["aten::empty"] == 3 and durations["aten::linear"] < 3  # measured CPU time kept; GPU priced


def _no_norm(nodes: list[Node]) -> None:
    nodes[0].name = "aten::mystery"


def _shapeless(nodes: list[Node]) -> None:
    nodes[8].inputs.shapes = "[]"


def _garbled(nodes: list[Node]) -> None:
    nodes[1].inputs.shapes = "[[8, 32"


def _odd_gemm(nodes: list[Node]) -> None:
    nodes[3].inputs.shapes = str([[5, 16], [16, 7]])


@pytest.mark.parametrize(
    ("tp", "change", "new_tp", "message"),
    [
        (2, _no_norm, 4, "{first}: no layer norm (aten::_fused_rms_norm, aten::layer_norm, aten::native_layer_norm"),
        (2, _shapeless, 4, "{first}: node 8: a compute node without the operator it was priced from"),
        (2, _garbled, 4, "{first}: node 1 (aten::linear): its inputs.shapes ('[[8, 32') is not a Python list"),
        (2, _odd_gemm, 4, "{first}: node 3 (aten::mm): [M, K] x [K, N] = [5, 16] x [16, 7] has 3 dimensions other"),
        (2, None, 8, "{first}: node 2 (aten::_scaled_dot_product_flash_attention): its query heads (2) times the TP"),
        (1, None, 2, "{first}: node 3 (aten::mm): [M, K] x [K, N] = [8, 32] x [32, 32] has 0 dimensions other than"),
    ],
)
def test_what_cannot_be_classified_is_one_message(
    run_cli: RunCli, tmp_path: Path, tp: int, change: Any, new_tp: int, message: str
) -> None:
    source = write(tmp_path / "torch", tp, change)
    code, out, err = run_cli("trace", "reshard", str(source), str(tmp_path / "r"), "--tp", str(new_tp), "--pp", "1")
    assert (code, out) == (2, "") and err.startswith("error: " + message.format(first=f"{source}.0.et")), err
    assert err.count("\n") == 1 and not list(tmp_path.glob("r.*"))
