"""Dataflow-graph files: what a file's keys build, the round trip through dump, and one clear error per defect,
naming the file and the key path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from stratasim.kernel import operators
from stratasim.kernel.errors import StrataSimError
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.file import dump, load_graph, parse_graph, save_graph
from stratasim.workload_layer.dataflow.graph import Scheme
from stratasim.workload_layer.dataflow.schemes import embedding_schemes, gemm_schemes, replicated

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dataflow" / "two_gemms.graph.json"

EVERY_KIND = {
    "name": "every-kind",
    "repeat": 2,
    "training": True,
    "dtype": "fp16",
    "kernels": [
        {"name": "emb", "kind": "embedding", "lookups": 2048, "dim": 64, "rows": 1000},
        {"name": "up", "kind": "gemm", "m": 2048, "k": 64, "n": 384, "weights": True, "schemes": ["m", "n"]},
        {"name": "attn", "kind": "attention", "batch": 4, "queries": 2048, "keys": 2048, "head_dim": 32,
         "causal": True, "group": 2},
        {"name": "scores", "kind": "gemm", "m": 16, "k": 8, "n": 16, "batch": 4},
        {"name": "act", "kind": "elementwise", "elements": 64, "inputs": 2, "flops_per_element": 0,
         "function": "add", "dtype": "fp32", "weight_bytes": "1KiB"},
    ],
    "tensors": [
        {"from": "emb", "to": "up"},
        {"name": "qkv", "from": "up", "to": "attn", "bytes": 1000},
        {"from": "attn", "to": "scores"},
        {"from": "attn", "to": "scores", "slot": 1},
        {"from": "scores", "to": "act", "slot": 1},
    ],
}  # fmt: skip


def test_the_keys_build_operators_weights_and_schemes() -> None:
    graph = parse_graph(EVERY_KIND, "g.yaml")
    emb, up, attn, scores, act = graph.kernels
    assert emb.operator == operators.elementwise(
        (2048, 64), compute_pb2.FP16, flops_per_element=0, name="emb", function=compute_pb2.EMBEDDING
    )
    assert emb.weight_bytes == 1000 * 64 * 2 and emb.schemes == embedding_schemes()
    assert up.operator == operators.gemm(2048, 64, 384, compute_pb2.FP16, name="up")
    assert up.weight_bytes == 64 * 384 * 2 and [s.name for s in up.schemes] == ["m", "n"]
    assert attn.operator == operators.attention(4, 2048, 2048, 32, causal=True, group=2, dtype=compute_pb2.FP16,
                                                name="attn")  # fmt: skip
    assert scores.slots == 2 and scores.weight_bytes == 0 and scores.schemes == gemm_schemes(False)
    assert act.operator.dtype == compute_pb2.FP32 and act.weight_bytes == 1024 and act.slots == 2
    # A tensor's bytes default to its producer's whole output; its name to from->to (and the slot, past 0).
    sizes = {t.name: t.bytes for t in graph.tensors}
    assert sizes == {"emb->up": 2048 * 64 * 2, "qkv": 1000, "attn->scores": 4 * 2048 * 32 * 2,
                     "attn->scores:1": 4 * 2048 * 32 * 2, "scores->act:1": 4 * 16 * 16 * 2}  # fmt: skip
    assert graph.repeat == 2 and graph.training


OWN_SCHEMES = {
    "kernels": [
        {"name": "fft", "kind": "elementwise", "elements": 1024, "flops_per_element": 50, "bytes": "32KiB",
         "schemes": [{"name": "ffts", "inputs": ["S1"], "output": "S1", "divides": "elements"}, "replicate"]},
        {"name": "update", "kind": "gemm", "m": 8, "k": 8, "n": 8, "batch": 30, "flops": 12345,
         "schemes": [{"name": "columns", "inputs": ["R", "S1"], "output": "S1", "divides": "batch"},
                     {"name": "whole", "inputs": ["R", "R"], "output": "R", "weights_split": False}]},
    ]
}  # fmt: skip


def test_a_kernel_may_write_out_schemes_of_its_own_and_set_its_totals() -> None:
    fft, update = parse_graph(OWN_SCHEMES, "g.yaml").kernels
    assert fft.schemes == (Scheme("ffts", ("S1",), "S1", "elements"), replicated(1))
    assert fft.operator.bytes == 32 * 1024 and fft.operator.flops == 50 * 1024
    assert update.schemes[1] == Scheme("whole", ("R", "R"), "R", None, weights_split=False)
    assert update.operator.flops == 12345 and update.slots == 2


LOOK_ALIKES = {
    "kernels": [
        {"name": "copy", "kind": "elementwise", "elements": 8, "flops_per_element": 0, "schemes": ["replicate"]},
        {
            "name": "e",
            "kind": "embedding",
            "lookups": 3,
            "dim": 4,
            "rows": 5,
            "schemes": ["replicate"],
            "weight_bytes": 7,
        },
    ]
}  # an element-wise copy with the scheme an embedding also has; an embedding whose weights are no whole rows


@pytest.mark.parametrize("data", [EVERY_KIND, OWN_SCHEMES, LOOK_ALIKES, yaml.safe_load(EXAMPLE.read_text("utf-8"))])
def test_dump_round_trips(data: dict[str, object]) -> None:
    graph = parse_graph(data, "g.yaml")
    assert parse_graph(dump(graph), "again.yaml") == graph
    assert parse_graph(json.loads(json.dumps(dump(graph))), "g.json") == graph


def test_a_saved_graph_loads_back(tmp_path: Path) -> None:
    graph = parse_graph(EVERY_KIND, "g.yaml")
    for name in ("saved.json", "saved.yaml"):
        save_graph(graph, tmp_path / name)
        assert load_graph(tmp_path / name) == graph
    with pytest.raises(StrataSimError, match="cannot write the dataflow graph"):
        save_graph(graph, tmp_path / "no" / "such" / "folder.json")


def test_yaml_and_json_files_give_the_same_graph(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(json.loads(EXAMPLE.read_text(encoding="utf-8"))), "utf-8")
    assert load_graph(tmp_path / "g.yaml") == load_graph(EXAMPLE)
    (tmp_path / "anon.yaml").write_text("kernels: [{name: a, kind: elementwise, elements: 8}]\n", "utf-8")
    assert load_graph(tmp_path / "anon.yaml").name == "anon"  # the file's stem


GEMM = "{name: g, kind: gemm, m: 8, k: 8, n: 8, weights: true}"
BAD_FILES = {
    "not a mapping": ("[1, 2]", "g.yaml: expected a mapping with name"),
    "no kernels": ("name: x\n", "g.yaml: kernels: required"),
    "empty kernels": ("kernels: []\n", "g.yaml: kernels: expected at least one kernel"),
    "kernels not a list": ("kernels: 3\n", "g.yaml: kernels: expected a list of mappings, got 3"),
    "unknown top key": (f"kernals: []\nkernels: [{GEMM}]\n", "kernals: unknown key; did you mean 'kernels'?"),
    "bad repeat": (f"repeat: 0\nkernels: [{GEMM}]\n", "g.yaml: repeat: expected a positive integer, got 0"),
    "bad training": (f"training: yes please\nkernels: [{GEMM}]\n", "training: expected true or false"),
    "bad dtype": (f"dtype: fp7\nkernels: [{GEMM}]\n", "g.yaml: dtype: unknown dtype 'fp7'"),
    "negative size": (
        "kernels: [" + GEMM + ", {name: h, kind: gemm, m: 8, k: 8, n: 8}, {name: b, kind: gemm, m: -3, k: 1, n: 1}]\n",
        "g.yaml: kernels[2].m: expected a positive integer, got -3",
    ),
    "boolean size": ("kernels: [{name: a, kind: elementwise, elements: true}]\n", "kernels[0].elements: expected a"),
    "missing size": ("kernels: [{name: a, kind: gemm, m: 8, k: 8}]\n", "g.yaml: kernels[0].n: required"),
    "no kind": ("kernels: [{name: a}]\n", "kernels[0].kind: required; expected one of gemm, elementwise"),
    "unknown kind": ("kernels: [{name: a, kind: conv}]\n", "kernels[0].kind: unknown kind 'conv'"),
    "misspelt key": (
        "kernels: [{name: a, kind: gemm, m: 8, k: 8, n: 8, weigths: true}]\n",
        "kernels[0].weigths: unknown key; did you mean 'weights'?",
    ),
    "unknown scheme": (
        "kernels: [{name: a, kind: gemm, m: 8, k: 8, n: 8, weights: true, schemes: [k, q]}]\n",
        "kernels[0].schemes[1]: unknown scheme 'q'; this kernel offers n, k, m, replicate",
    ),
    "scheme written badly": (
        "kernels: [{name: a, kind: elementwise, elements: 8, schemes: [{name: s, inputs: [P], output: Q, divides: m,"
        " weights_split: 3, colour: red}]}]\n",
        "g.yaml: 5 problems\n  kernels[0].schemes[0].colour: unknown key; expected one of name, inputs, output, divides,"
        " weights_split\n  kernels[0].schemes[0].inputs: expected a list of layouts R, S0 or S1, got ['P']\n"
        "  kernels[0].schemes[0].output: expected a layout R, S0, S1 or P, got 'Q'\n"
        "  kernels[0].schemes[0].divides: expected one of elements or null, got 'm'\n"
        "  kernels[0].schemes[0].weights_split: expected true or false, got 3",
    ),
    "schemes of unequal inputs": (
        "kernels: [{name: a, kind: elementwise, elements: 8, schemes: [replicate, {name: t, inputs: [R, R], output: R}]}]\n",
        "g.yaml: kernel 'a': its schemes give different numbers of inputs: [1, 2]",
    ),
    "huge flops": ("kernels: [{name: a, kind: elementwise, elements: 8, flops: 99999999999999999999999}]\n",
                   "kernels[0].flops: must fit in 64 bits"),
    "huge tensor": (f"kernels: [{GEMM}, {{name: b, kind: elementwise, elements: 8}}]\ntensors: [{{from: g, to: b, bytes: 2000000000000000000}}]\n",
                    "tensors[0].bytes: expected at most 1 PiB"),
    "scheme twice": ("kernels: [{name: a, kind: elementwise, elements: 8, schemes: [replicate, replicate]}]\n",
                     "kernels[0].schemes: names a scheme twice"),
    "bad function": ("kernels: [{name: a, kind: elementwise, elements: 8, function: gelux}]\n",
                     "kernels[0].function: unknown element-wise function 'gelux'"),
    "bad attention": (
        "kernels: [{name: a, kind: attention, batch: 3, queries: 8, keys: 8, head_dim: 8, group: 2}]\n",
        "kernels[0]: batch (3) must be divisible by group (2)",
    ),
    "bad weight bytes": (f"kernels: [{GEMM[:-1]}, weight_bytes: 12Q}}]\n", "kernels[0].weight_bytes: unknown size unit"),
    "kernel named twice": (f"kernels: [{GEMM}, {GEMM}]\n", "g.yaml: kernel 'g': is named twice"),
    "unknown tensor end": (
        f"kernels: [{GEMM}]\ntensors: [{{from: gg, to: g}}]\n",
        "tensors[0].from: no kernel named 'gg'; did you mean 'g'?",
    ),
    "tensor without target": (f"kernels: [{GEMM}]\ntensors: [{{from: g}}]\n", "g.yaml: tensors[0].to: required"),
    "bad slot": (f"kernels: [{GEMM}, {{name: b, kind: elementwise, elements: 8}}]\ntensors: [{{from: g, to: b, slot: 1}}]\n",
                 "g.yaml: tensor 'g->b:1': slot 1: kernel 'b' has inputs 0 to 0"),
    "bad bytes": (f"kernels: [{GEMM}, {{name: b, kind: elementwise, elements: 8}}]\ntensors: [{{from: g, to: b, bytes: -1}}]\n",
                  "tensors[0].bytes: expected an integer of at least 0, got -1"),
    "self loop": (f"kernels: [{GEMM}]\ntensors: [{{from: g, to: g}}]\n", "goes from kernel 'g' to itself"),
    "cycle": (
        "kernels: [{name: a, kind: elementwise, elements: 8}, {name: b, kind: elementwise, elements: 8},"
        " {name: c, kind: elementwise, elements: 8}]\n"
        "tensors: [{from: a, to: b}, {from: b, to: c}, {from: c, to: a}]\n",
        "g.yaml: graph 'g': has a cycle: b -> c -> a -> b",
    ),
    "several problems": (
        "repeat: -1\nkernels: [{name: a, kind: gemm, m: 0, k: 8, n: 8}]\n",
        "g.yaml: 2 problems\n  repeat: expected a positive integer, got -1\n  kernels[0].m: expected a positive",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_file_is_one_error_naming_the_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "g.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(StrataSimError) as caught:
        load_graph(tmp_path / "g.yaml")
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "g.yaml")), message
    assert expected in message.replace(str(tmp_path) + "/", ""), message


def test_a_missing_file_and_bad_json_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(StrataSimError, match="nope.yaml: no such file|nope.yaml: cannot read"):
        load_graph(tmp_path / "nope.yaml")
    (tmp_path / "g.json").write_text('{"kernels": [}', encoding="utf-8")
    with pytest.raises(StrataSimError, match=r"g.json: line 1, column 14: invalid JSON"):
        load_graph(tmp_path / "g.json")
