"""``workload.graph`` as a generator's call: the graph is the generator function's, and a bad generator, key or
argument is one problem naming ``workload.graph``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stratasim.config.study_file import load_study
from stratasim.kernel.errors import ConfigError
from stratasim.workload_layer.dataflow.generated import GENERATORS, graph_of
from stratasim.workload_layer.dataflow.generators.dlrm import dlrm_graph
from stratasim.workload_layer.dataflow.generators.fft import fft_graph
from stratasim.workload_layer.dataflow.generators.hpl import hpl_graph
from stratasim.workload_layer.dataflow.workload import DataflowWorkload

STUDY = {
    "name": "generated",
    "workload": {"kind": "dataflow", "graph": {"generator": "hpl", "n": 8192, "nb": 1024, "groups": 3}},
    "network": {
        "backend": "analytical",
        "topology": [{"kind": "ring", "size": 2, "bandwidth": "100GB/s", "latency": "1us"}],
    },
    "compute": {"backend": "roofline", "device": "h100"},
}


def _study(tmp_path: Path, graph: object) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "workload": {"kind": "dataflow", "graph": graph}}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"generator": "hpl", "n": 8192, "nb": 1024, "groups": 3}, hpl_graph(8192, 1024, 3)),
        ({"generator": "fft", "points": 2**12, "dtype": "fp32"}, fft_graph(2**12, "fp32")),
        (
            {"generator": "dlrm", "batch": 64, "tables": 4, "rows": 100, "embedding_dim": 16, "pooling": 2}
            | {"mlp_dim": 32, "bottom_layers": 2, "top_layers": 2},
            dlrm_graph(64, tables=4, rows=100, embedding_dim=16, pooling=2, mlp_dim=32, bottom_layers=2, top_layers=2),
        ),
    ],
)
def test_a_generator_in_the_study_builds_the_functions_graph(tmp_path: Path, graph: object, expected: object) -> None:
    config = load_study(_study(tmp_path, graph)).workload.config
    assert graph_of(config.graph) == expected
    assert DataflowWorkload(config).plan.graph == expected


def test_a_gpt_generator_takes_the_transformer_model_keys(tmp_path: Path) -> None:
    model = {"layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000}
    config = load_study(_study(tmp_path, {"generator": "gpt", "model": model, "micro_batch": 2})).workload.config
    graph = graph_of(config.graph)
    assert graph.repeat == 2 and graph.training
    assert {"qkv", "mlp up"} <= {k.name for k in graph.kernels}


def test_every_generator_is_listed() -> None:
    assert GENERATORS == ("gpt", "gpt3_1t", "hpl", "hpl_5m", "fft", "fft_1t", "dlrm", "dlrm_793b")


@pytest.mark.parametrize(
    ("graph", "key", "said"),
    [
        ({"generator": "hpx", "n": 8}, "workload.graph", "expected generator to be one of gpt, gpt3_1t, hpl"),
        ({"n": 8}, "workload.graph", "expected generator to be one of"),
        ({"generator": "hpl", "n": 8192, "nb": 1024, "size": 3}, "workload.graph.size", "unknown key"),
        ({"generator": "hpl", "n": 8192, "nb": 1000}, "workload.graph", "argument 'nb': must divide n (8192)"),
        ({"generator": "fft", "points": 1000}, "workload.graph", "argument 'points': must be a power of two"),
        ({"generator": "fft", "points": 2**10, "dtype": "fp16"}, "workload.graph.dtype", "fp32"),
        ({"generator": "hpl", "nb": 1024}, "workload.graph.n", "required"),
        (7, "workload.graph", "expected a graph file or {generator: NAME, ...}"),
    ],
)
def test_a_bad_generator_is_one_problem_naming_its_key(tmp_path: Path, graph: object, key: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_study(_study(tmp_path, graph))
    [(where, message)] = raised.value.problems
    assert where == key and said in message, (where, message)
