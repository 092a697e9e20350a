"""ASTRA-sim 1.0 text workloads: the graphs equal Chakra's converted traces and reproduce ASTRA-sim's figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stratasim.cli.commands import main
from stratasim.config.study_file import parse_study
from stratasim.importers.astra import import_astra
from stratasim.kernel.errors import WorkloadError
from stratasim.study.run import run_study
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.astra_text import AstraTextConfig, AstraTextWorkload, build_graph, read_astra_text
from stratasim.workload_layer.traces.chakra import read_trace, to_graph
from stratasim.workload_layer.traces.convert import astra_text_to, read_graphs
from tests.data import ASTRA_INPUTS

TEXTS = ASTRA_INPUTS / "workload" / "text_workloads"

LINE = "conv1 -1 13003 NONE 0 12864 NONE 0 32291 ALLREDUCE 37632 3229"


def _canonical(graph: workload_pb2.ExecutionGraph) -> list[tuple[Any, ...]]:
    """The nodes in file order, with dependencies as positions instead of ids."""
    position = {node.id: index for index, node in enumerate(graph.nodes)}
    return [
        (
            node.name,
            node.type,
            node.duration_ps,
            node.comm_type,
            node.comm_bytes,
            [position[dep] for dep in node.data_deps],
            [position[dep] for dep in node.ctrl_deps],
        )
        for node in graph.nodes
    ]


def _run(text: str) -> Any:
    study = import_astra(ASTRA_INPUTS / "network" / "Ring_8npus.yml", ASTRA_INPUTS / "system" / "Ring_4chunks.json")
    study["workload"] = {"kind": "astra_text", "path": str(TEXTS / f"{text}.txt"), "npus": 8}
    return run_study(parse_study(study, "x"))


@pytest.mark.parametrize(
    ("text", "converted", "counts"),
    [
        (
            "Resnet50_DataParallel",
            "Resnet50_DataParallel_8npus",
            {workload_pb2.COMP_NODE: 161, workload_pb2.COMM_COLL_NODE: 54},
        ),
        (
            "DLRM_HybridParallel",
            "DLRM_HybridParallel_8npus",
            {workload_pb2.COMP_NODE: 23, workload_pb2.COMM_COLL_NODE: 9},
        ),
    ],
)
def test_graphs_equal_the_converted_traces(text: str, converted: str, counts: dict[int, int]) -> None:
    model = read_astra_text(TEXTS / f"{text}.txt")
    for rank in range(8):
        trace = read_trace(ASTRA_INPUTS / "workload" / "e2e_text_converted" / converted / f"{text}.{rank}.et")[1]
        ours = build_graph(model, rank)
        assert ours.npu == rank
        assert _canonical(ours) == _canonical(to_graph(trace, rank, 8))
    assert {kind: sum(node.type == kind for node in ours.nodes) for kind in counts} == counts


def test_resnet_reproduces_astra_sim() -> None:
    report = _run("Resnet50_DataParallel")
    assert report.total_time_ps == 1082479776 * 1000
    assert report.compute_time_ns == 1082450000
    assert report.exposed_comm_ns == 29776


def test_dlrm_reproduces_astra_sim() -> None:
    report = _run("DLRM_HybridParallel")
    assert report.total_time_ns == 51378000
    assert report.exposed_comm_ns == 0


@pytest.mark.parametrize(("text", "nodes"), [("MLP_HybridParallel_Data_Model", 35), ("MLP_ModelParallel", 29)])
def test_mlp_workloads_parse_and_run(text: str, nodes: int) -> None:
    model = read_astra_text(TEXTS / f"{text}.txt")
    assert len(build_graph(model, 0).nodes) == nodes
    assert len(build_graph(model, 0, passes=2).nodes) == 2 * nodes
    report = _run(text)
    assert (
        report.compute_time_ns
        == sum(layer.forward.compute + layer.input_grad.compute + layer.weight_grad.compute for layer in model.layers)
        * 1000
    )
    assert report.total_time_ns > report.compute_time_ns


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "w.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_data_parallel_wiring_over_two_passes(tmp_path: Path) -> None:
    path = _write(tmp_path, "DATA", "2", LINE, LINE.replace("conv1", "fc"))
    graph = build_graph(read_astra_text(path), 3, passes=2)
    names = [node.name.removeprefix("COMP_NODE_").removeprefix("COMM_COLL_NODE_") for node in graph.nodes[:7]]
    assert names == ["conv1_FWD", "fc_FWD", "fc_BWD_WG", "fc_ALLREDUCE", "fc_BWD_IG", "conv1_BWD_WG", "conv1_ALLREDUCE"]
    assert [list(node.data_deps) for node in graph.nodes[:7]] == [[], [0], [1], [2], [2], [4], [5]]
    # the second pass: each forward node waits for its layer's all-reduce of the first pass
    assert [list(node.data_deps) for node in graph.nodes[7:9]] == [[6], [7, 3]]
    assert graph.nodes[0].duration_ps == 13003 * 10**6
    assert graph.nodes[3].comm_bytes == 37632


def test_none_collective_is_a_zero_compute_node(tmp_path: Path) -> None:
    path = _write(tmp_path, "MODEL", "1", LINE)
    graph = build_graph(read_astra_text(path), 0)
    forward_comm = graph.nodes[1]
    assert forward_comm.type == workload_pb2.COMP_NODE
    assert forward_comm.duration_ps == 0
    assert list(graph.nodes[2].data_deps) == [1]


def test_micro_is_independent_collectives(tmp_path: Path) -> None:
    path = _write(tmp_path, "MICRO", "2", LINE, LINE.replace("ALLREDUCE", "REDUCESCATTER"))
    graph = build_graph(read_astra_text(path), 0)
    assert [node.comm_type for node in graph.nodes] == [workload_pb2.ALL_REDUCE, workload_pb2.REDUCE_SCATTER]
    assert not any(node.data_deps for node in graph.nodes)


def test_workload_class_builds_one_graph_per_npu(tmp_path: Path) -> None:
    path = _write(tmp_path, "DATA", "1", LINE, "")
    workload = AstraTextWorkload(AstraTextConfig(path=str(path), npus=4))
    assert workload.npus_required() == 4
    assert [graph.npu for graph in workload.graphs(4)] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (("PIPELINE", "1", LINE), r":1: expected a parallelism kind .*found another word"),
        ((), r":1: expected a parallelism kind .*found nothing"),
        (("DATA 3", "1", LINE), r":1: expected only DATA, found 2 fields"),
        (("HYBRID_DLRM", "3", LINE, LINE, LINE), r":1: expected HYBRID_DLRM and the index of the last bottom"),
        (("HYBRID_DLRM 2", "3", LINE, LINE, LINE), r":1: the last bottom-MLP layer must be between 1 and 1, got 2"),
        (("HYBRID_DLRM 1", "2", LINE, LINE), r":2: HYBRID_DLRM needs at least 3 layers \(the embedding, a bottom"),
        (("HYBRID_DLRM 1", "3", LINE, LINE, LINE), r":3: HYBRID_DLRM expects the first layer's forward .*ALLTOALL"),
        (("DATA", "2", LINE), r":2: announces 2 layers but 1 layer lines follow"),
        (("DATA", "two", LINE), r":2: the number of layers must be an integer$"),
        (("DATA", "0"), r":2: the number of layers must be at least 1, got 0"),
        (("DATA", "1", "conv1 -1 13003 NONE 0"), r":3: a layer line has 12 fields \(name, .*\), found 5"),
        (("DATA", "1", LINE.replace("13003", "13e3")), r":3: forward compute time must be an integer$"),
        (("DATA", "1", LINE.replace("37632", "-5")), r":3: WG size must be at least 0, got -5"),
        (("DATA", "1", LINE.replace("3229", "x")), r":3: the update time must be an integer$"),
        (("DATA", "1", LINE.replace("ALLREDUCE", "BROADCAST")), r":3: an unknown WG collective; expected"),
    ],
)
def test_bad_input_is_one_error_naming_file_and_line(tmp_path: Path, lines: tuple[str, ...], message: str) -> None:
    path = _write(tmp_path, *lines)
    with pytest.raises(WorkloadError, match=str(path) + message):
        read_astra_text(path)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"nope\.txt: cannot read the ASTRA-sim text workload"):
        AstraTextWorkload(AstraTextConfig(path=str(tmp_path / "nope.txt"), npus=2)).graphs(2)


def test_cli_converts_text_to_the_converted_chakra_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dlrm"
    assert (
        main(["trace", "convert", str(TEXTS / "DLRM_HybridParallel.txt"), str(out), "--to", "chakra", "--npus", "8"])
        == 0
    )
    assert "wrote 8 files" in capsys.readouterr().out
    reference = ASTRA_INPUTS / "workload" / "e2e_text_converted" / "DLRM_HybridParallel_8npus" / "DLRM_HybridParallel"
    for rank in range(8):
        ours = to_graph(read_trace(f"{out}.{rank}.et")[1], rank, 8)
        assert _canonical(ours) == _canonical(to_graph(read_trace(f"{reference}.{rank}.et")[1], rank, 8))


def test_cli_converts_text_to_stratasim_over_passes(tmp_path: Path) -> None:
    path = _write(tmp_path, "HYBRID_MODEL_DATA", "1", LINE)
    written = astra_text_to(path, tmp_path / "t", "stratasim", npus=2, passes=3)
    assert [file.name for file in written] == ["t.0.pb", "t.1.pb"]
    graphs = read_graphs(tmp_path / "t")
    assert [len(graph.nodes) for graph in graphs] == [5 * 3, 5 * 3]


def test_cli_text_conversion_needs_npus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "DATA", "1", LINE)
    assert main(["trace", "convert", str(path), str(tmp_path / "o"), "--to", "chakra"]) != 0
    assert "needs the number of NPUs (--npus)" in capsys.readouterr().err
