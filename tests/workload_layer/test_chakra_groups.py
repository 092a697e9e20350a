"""Chakra communicator groups: a collective's ``pg_name`` resolved against ASTRA-sim's communicator groups file or
the trace's own PyTorch ``process_group:init`` records; written back with the groups file beside the traces; each
defect one WorkloadError naming the trace file, the node and the name."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from stratasim.chakra import et_def_pb2 as et
from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.collective import CollectiveWorkload
from stratasim.workload_layer.traces.chakra import ChakraWorkload, read_chakra_graphs, to_graph, write_trace
from stratasim.workload_layer.traces.comm_groups import read_comm_groups
from stratasim.workload_layer.traces.convert import (
    chakra_to_stratasim,
    name_groups,
    read_graphs,
    stratasim_to_chakra,
    write_graphs,
)
from tests.helpers import RunCli
from tests.system_layer.helpers import SWITCH, topology

PG_INIT = "[pytorch|profiler|execution_trace|process_group:init]"


def coll(node_id: int, pg_name: str | None = None, size: int = 1 << 20) -> et.Node:
    """An all-reduce of ``size`` bytes, over the communicator ``pg_name`` if given."""
    node = et.Node(
        id=node_id,
        name=f"ar{node_id}",
        type=et.COMM_COLL_NODE,
        attr=[
            et.AttributeProto(name="comm_type", int64_val=et.ALL_REDUCE),
            et.AttributeProto(name="comm_size", int64_val=size),
        ],
    )
    if pg_name is not None:
        node.attr.append(et.AttributeProto(name="pg_name", string_val=pg_name))
    return node


def pg_init(node_id: int, groups: dict[str, list[int]]) -> et.Node:
    """A METADATA node as Chakra's PyTorch converter writes it: ``str()`` of PyTorch's one JSON input value."""
    records = json.dumps([{"pg_name": name, "pg_desc": "undefined", "ranks": ranks} for name, ranks in groups.items()])
    return et.Node(id=node_id, name=PG_INIT, type=et.METADATA_NODE, inputs=et.IOInfo(values=str([records])))


def trace(directory: Path, ranks: list[list[et.Node]], groups: dict[str, list[int]] | None = None) -> Path:
    """Write ``<directory>/t.<rank>.et`` per rank, and ``t.json`` if ``groups`` is given; return the prefix."""
    for rank, nodes in enumerate(ranks):
        write_trace(directory / f"t.{rank}.et", et.GlobalMetadata(version="0.0.4"), nodes)
    if groups is not None:
        (directory / "t.json").write_text(json.dumps(groups))
    return directory / "t"


def halves(pg_names: tuple[str, str] = ("1", "2")) -> list[list[et.Node]]:
    """Four ranks: 0-1 all-reduce over ``pg_names[0]``, 2-3 over ``pg_names[1]``."""
    return [[coll(1, pg_names[rank // 2])] for rank in range(4)]


def test_groups_file_beside_the_trace_sets_group_and_pg_name(tmp_path: Path) -> None:
    prefix = trace(tmp_path, halves(), {"1": [1, 0], "2": [2, 3]})
    graphs = ChakraWorkload(ChakraWorkload.Config(path=str(prefix))).graphs(4)
    assert [(list(g.nodes[0].group), g.nodes[0].pg_name) for g in graphs] == [
        ([0, 1], "1"),
        ([0, 1], "1"),
        ([2, 3], "2"),
        ([2, 3], "2"),
    ]


def test_comm_groups_key_names_the_file(tmp_path: Path) -> None:
    prefix = trace(tmp_path, halves(("tp0", "tp1")))
    (tmp_path / "groups.json").write_text('{"tp0": [0, 1], "tp1": [2, 3]}')
    config = ChakraWorkload.Config(path=str(prefix), comm_groups=str(tmp_path / "groups.json"))
    assert [list(g.nodes[0].group) for g in ChakraWorkload(config).graphs(4)] == [[0, 1], [0, 1], [2, 3], [2, 3]]


def test_default_and_everyone_groups_stay_empty(tmp_path: Path) -> None:
    # No pg_name, PyTorch's default group "0" (undefined), and a group of every NPU all mean every NPU.
    ranks = [[coll(1), coll(2, "0", 8), coll(3, "all", 8)] for _ in range(2)]
    graphs = read_chakra_graphs(trace(tmp_path, ranks, {"all": [1, 0]}))
    assert [(list(n.group), n.pg_name) for n in graphs[1].nodes] == [([], ""), ([], "0"), ([], "all")]


def test_process_group_records_in_the_trace(tmp_path: Path) -> None:
    # Rank-local PyTorch records win over the file, as in ASTRA-sim, where the metadata node overwrites.
    ranks = [[pg_init(0, {"0": [], "5": [0, 1]}), coll(1, "5"), coll(2, "0")] for _ in range(2)]
    graphs = read_chakra_graphs(trace(tmp_path, ranks + [[coll(1, "5")]], {"5": [2]}))
    assert [list(n.group) for n in graphs[0].nodes] == [[], [0, 1], []]
    assert graphs[0].nodes[0].type == workload_pb2.METADATA_NODE
    assert list(graphs[2].nodes[0].group) == [2]


def test_send_and_receive_keep_their_pg_name() -> None:
    send = et.Node(
        id=1,
        type=et.COMM_SEND_NODE,
        attr=[
            et.AttributeProto(name="comm_dst", int32_val=1),
            et.AttributeProto(name="comm_size", int32_val=64),
            et.AttributeProto(name="pg_name", string_val="pp"),
        ],
    )
    (out,) = to_graph([send], 0, 2).nodes
    assert (out.peer, out.pg_name, list(out.group)) == (1, "pp", [])


def test_two_groups_take_the_time_of_their_size(tmp_path: Path) -> None:
    # Two 1 MiB all-reduces on the halves of a switch of 8 each take as long as one over a switch of 4, less than
    # one over all 8.
    ranks = [[coll(1, "lo" if npu < 4 else "hi")] for npu in range(8)]
    prefix = trace(tmp_path, ranks, {"lo": [0, 1, 2, 3], "hi": [4, 5, 6, 7]})
    native = CollectiveWorkload(CollectiveWorkload.Config(collective="all_reduce", size="1MiB"))

    def total(graphs: Sequence[workload_pb2.ExecutionGraph], size: int) -> int:
        switch = topology((SWITCH, size, 50 * 10**9, 500_000))
        return simulate(graphs, AnalyticalNetwork(), switch, SystemOptions()).total_time_ps

    halves_time = total(read_chakra_graphs(prefix), 8)
    assert halves_time == total(native.graphs(4), 4)
    assert halves_time < total(native.graphs(8), 8)


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"1": [0, 1]}, r"t\.2\.et: node 1: pg_name '2' is not defined by .*t\.json"),
        (None, r"t\.0\.et: node 1: pg_name '1' is not defined: no communicator groups file was found"),
        ({"1": [0, 1], "2": [2, 4]}, r"t\.2\.et: node 1.*pg_name '2' \(.*t\.json\) names NPU 4, but the trace has 4"),
        (
            {"1": [0, 2], "2": [2, 3]},
            r"t\.1\.et: node 1.*pg_name '1' is the group \[0, 2\] \(.*t\.json\), which does not contain NPU 1",
        ),
    ],
)
def test_bad_groups_name_the_trace_file_node_and_pg_name(
    tmp_path: Path, groups: dict[str, list[int]] | None, message: str
) -> None:
    workload = ChakraWorkload(ChakraWorkload.Config(path=str(trace(tmp_path, halves(), groups))))
    with pytest.raises(WorkloadError, match=message):
        workload.graphs(4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"groups\.json: line 1, column 2: invalid JSON: .*"),
        ("[[0, 1]]", r"groups\.json: expected a JSON object mapping communicator names \(pg_name\) .* found a list"),
        ('{"1": "0,1"}', r"groups\.json: group #1 must be a list of NPU ids \(integers from 0\), found a string$"),
        ('{"0": [0], "1": [0, -1]}', r"groups\.json: group #2 must be a list of NPU ids .* a negative integer$"),
        ('{"1": [0, true]}', r"groups\.json: group #1 must be a list of NPU ids .* found a list holding a boolean$"),
        ('{"1": []}', r"groups\.json: group #1 is empty"),
        ('{"1": [0, 1, 0]}', r"groups\.json: group #1 names an NPU twice"),
        ('{"1": [0], "1": [1]}', r"groups\.json: a group is defined twice"),
    ],
)
def test_bad_groups_files_are_one_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "groups.json").write_text(text)
    with pytest.raises(WorkloadError, match=message):
        read_comm_groups(tmp_path / "groups.json")


def test_missing_groups_file_is_an_error(tmp_path: Path) -> None:
    config = ChakraWorkload.Config(path=str(trace(tmp_path, halves())), comm_groups=str(tmp_path / "nope.json"))
    with pytest.raises(WorkloadError, match=r"nope\.json: cannot read the communicator groups"):
        ChakraWorkload(config).graphs(4)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("[{'pg_name': ", "inputs.values is neither JSON nor a list of strings"),
        ("['[{\"pg_name\": 1']", "not valid JSON"),
        ('[{"ranks": [0]}]', "expected a list of records with pg_name and ranks"),
        ('[{"pg_name": "1", "ranks": "all"}]', "group '1' must be a list of NPU ids"),
    ],
)
def test_bad_process_group_records_name_the_node(values: str, message: str) -> None:
    node = et.Node(id=4, name=PG_INIT, type=et.METADATA_NODE, inputs=et.IOInfo(values=values))
    with pytest.raises(WorkloadError, match=f"x.0.et: node 4.*: cannot read its process groups: .*{message}"):
        to_graph([node], 0, 2, "x.0.et")


def test_pg_name_must_be_a_string() -> None:
    node = coll(3)
    node.attr.append(et.AttributeProto(name="pg_name", int64_val=1))
    with pytest.raises(WorkloadError, match="node 3.*attribute pg_name is int64_val, expected string_val"):
        to_graph([node], 0, 2)


def collective(node_id: int, group: list[int], pg_name: str = "") -> workload_pb2.Node:
    return workload_pb2.Node(
        id=node_id,
        name=f"c{node_id}",
        type=workload_pb2.COMM_COLL_NODE,
        comm_type=workload_pb2.ALL_REDUCE,
        comm_bytes=1024,
        group=group,
        pg_name=pg_name,
    )


def ir_graphs() -> list[workload_pb2.ExecutionGraph]:
    """Four NPUs with named and unnamed groups, a point-to-point pair and memory annotations."""
    graphs = []
    for npu in range(4):
        pair = [npu - npu % 2, npu - npu % 2 + 1]
        graph = workload_pb2.ExecutionGraph(npu=npu, resident_bytes={"weights": 1 << 30, "optimizer": 7})
        graph.nodes.extend(
            [
                collective(1, pair, "tp" if npu < 2 else "tp2"),
                collective(2, [], "dp"),
                collective(3, [npu % 2, npu % 2 + 2], "dp" + str(npu % 2)),
                workload_pb2.Node(
                    id=4,
                    name="c",
                    type=workload_pb2.COMP_NODE,
                    duration_ps=3 * 10**6,
                    data_deps=[1],
                    memory_bytes=-4096,
                    milestone=True,
                ),
                workload_pb2.Node(
                    id=5,
                    type=workload_pb2.COMM_SEND_NODE if npu % 2 == 0 else workload_pb2.COMM_RECV_NODE,
                    peer=npu ^ 1,
                    comm_bytes=64,
                    pg_name="pp",
                    memory_bytes=128,
                ),
            ]
        )
        graphs.append(graph)
    return graphs


def test_stratasim_to_chakra_and_back_is_identical(tmp_path: Path) -> None:
    graphs = ir_graphs()
    write_graphs(tmp_path / "ir", graphs)
    written = stratasim_to_chakra(tmp_path / "ir", tmp_path / "et")
    assert written[-1] == tmp_path / "et.json" and len(written) == 5
    assert json.loads((tmp_path / "et.json").read_text()) == {
        "tp": [0, 1],
        "dp": [0, 1, 2, 3],
        "dp0": [0, 2],
        "dp1": [1, 3],
        "tp2": [2, 3],
    }
    assert read_chakra_graphs(tmp_path / "et") == graphs
    chakra_to_stratasim(tmp_path / "et", tmp_path / "back")
    stratasim_to_chakra(tmp_path / "back", tmp_path / "again")
    assert [(tmp_path / f"again.{r}.et").read_bytes() for r in range(4)] == [
        (tmp_path / f"et.{r}.et").read_bytes() for r in range(4)
    ]


def test_unnamed_groups_get_unused_integer_names(tmp_path: Path) -> None:
    graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(4)]
    for graph in graphs:
        npu = graph.npu
        graph.nodes.extend([collective(1, [npu - npu % 2, npu - npu % 2 + 1]), collective(2, [0, 1, 2, 3])])
        graph.nodes.append(collective(3, [0, 1, 2, 3], "1"))
    named, groups = name_groups(graphs, [f"NPU {npu}" for npu in range(4)])
    assert groups == {"2": [0, 1], "1": [0, 1, 2, 3], "3": [2, 3]}
    assert [(n.pg_name, list(n.group)) for n in named[3].nodes] == [("3", [2, 3]), ("", []), ("1", [])]
    write_graphs(tmp_path / "ir", graphs)
    stratasim_to_chakra(tmp_path / "ir", tmp_path / "et")
    assert read_chakra_graphs(tmp_path / "et") == named


def test_one_name_for_two_groups_is_refused() -> None:
    graphs = [workload_pb2.ExecutionGraph(npu=npu, nodes=[collective(7, [npu], "tp")]) for npu in range(2)]
    message = r"b\.pb: node 7: pg_name 'tp' is the group \[1\] here but \[0\] at a\.pb: node 7"
    with pytest.raises(WorkloadError, match=message):
        name_groups(graphs, ["a.pb", "b.pb"])


def test_no_groups_file_without_named_groups(tmp_path: Path) -> None:
    graphs = [workload_pb2.ExecutionGraph(npu=npu, nodes=[collective(1, [0, 1])]) for npu in range(2)]
    write_graphs(tmp_path / "ir", graphs)
    assert [p.name for p in stratasim_to_chakra(tmp_path / "ir", tmp_path / "et")] == ["et.0.et", "et.1.et"]
    everyone = [workload_pb2.ExecutionGraph(npu=npu, nodes=[collective(1, [])]) for npu in range(2)]
    assert read_chakra_graphs(tmp_path / "et") == everyone


def test_a_bad_node_is_named_by_its_id_without_echoing_the_traces_text() -> None:
    """The trace is not the study's own file: its node names stay out of the message (issue 15, no echo)."""
    node = et.Node(
        id=2,
        name="private text of the trace",
        type=et.COMP_NODE,
        attr=[et.AttributeProto(name="milestone", int32_val=1)],
    )
    with pytest.raises(WorkloadError) as raised:
        to_graph([node], 0, 1, "x.0.et")
    assert str(raised.value).startswith("x.0.et: node 2: attribute milestone") and "private" not in str(raised.value)


def test_bad_memory_annotations_are_errors() -> None:
    node = et.Node(id=2, type=et.COMP_NODE, attr=[et.AttributeProto(name="milestone", int32_val=1)])
    with pytest.raises(WorkloadError, match="node 2.*attribute milestone is int32_val, expected bool_val"):
        to_graph([node], 0, 1)
    metadata = et.GlobalMetadata(attr=[et.AttributeProto(name="resident_bytes.weights", string_val="1GB")])
    with pytest.raises(WorkloadError, match="x: metadata attribute resident_bytes.weights must be a non-negative"):
        to_graph([], 0, 1, "x", metadata=metadata)


def test_cli_round_trip_and_bad_groups(run_cli: RunCli, tmp_path: Path) -> None:
    write_graphs(tmp_path / "ir", ir_graphs())
    code, out, _ = run_cli("trace", "convert", str(tmp_path / "ir"), str(tmp_path / "et"), "--to", "chakra")
    assert code == 0 and "wrote 5 files" in out and "et.json" in out
    code, out, _ = run_cli("trace", "convert", str(tmp_path / "et"), str(tmp_path / "back"), "--to", "stratasim")
    assert code == 0 and read_graphs(tmp_path / "back") == ir_graphs()
    (tmp_path / "et.json").write_text('{"tp": [0, 1]}')
    for argv in (
        ("inspect", str(tmp_path / "et")),
        ("convert", str(tmp_path / "et"), str(tmp_path / "x"), "--to", "stratasim"),
    ):
        code, out, err = run_cli("trace", *argv)
        assert code == 2 and not out and err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith("error: ") and "et.0.et: node 2: pg_name 'dp' is not defined by" in err
