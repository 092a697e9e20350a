"""Chakra traces: the reference ``.et`` files decode and map onto the IR; writing round-trips; every defect of a
file is one WorkloadError naming it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stratasim.chakra import et_def_pb2 as et
from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.collective import CollectiveWorkload
from stratasim.workload_layer.traces.chakra import ChakraWorkload, read_trace, to_graph, trace_files, write_trace
from stratasim.workload_layer.traces.convert import chakra_to_stratasim, from_graph, read_graphs, stratasim_to_chakra
from tests.data import ASTRA_INPUTS
from tests.system_layer.helpers import RING, topology

WORKLOADS = ASTRA_INPUTS / "workload"

MICRO = {
    "all_reduce": workload_pb2.ALL_REDUCE,
    "all_gather": workload_pb2.ALL_GATHER,
    "reduce_scatter": workload_pb2.REDUCE_SCATTER,
    "all_to_all": workload_pb2.ALL_TO_ALL,
}
CUSTOM = "custom_collective_ring_allreduce_8npus_1MB/custom_allreduce"
RESNET = "e2e_text_converted/Resnet50_DataParallel_8npus/Resnet50_DataParallel"
DLRM = "e2e_text_converted/DLRM_HybridParallel_8npus/DLRM_HybridParallel"


def coll(node_id: int = 0, **attrs: int) -> et.Node:
    node = et.Node(id=node_id, name=f"n{node_id}", type=et.COMM_COLL_NODE)
    node.attr.extend(et.AttributeProto(name=name, int64_val=value) for name, value in attrs.items())
    return node


def test_every_reference_trace_decodes() -> None:
    files = sorted(WORKLOADS.rglob("*.et"))
    assert len(files) == 56
    for path in files:
        metadata, nodes = read_trace(path)
        assert nodes, path


def test_resnet_has_the_readme_node_counts() -> None:
    for path in trace_files(WORKLOADS / RESNET):
        _, nodes = read_trace(path)
        assert len(nodes) == 215
        assert Counter(node.type for node in nodes) == {et.COMP_NODE: 161, et.COMM_COLL_NODE: 54}


@pytest.mark.parametrize("name", sorted(MICRO))
def test_microbenchmarks_map_to_one_collective(name: str) -> None:
    workload = ChakraWorkload(
        ChakraWorkload.Config(path=str(WORKLOADS / "microbenchmarks" / f"{name}_8npus_1MB" / name))
    )
    assert workload.npus_required() == 8
    graphs = workload.graphs(8)
    assert [graph.npu for graph in graphs] == list(range(8))
    for graph in graphs:
        (node,) = graph.nodes
        assert node.type == workload_pb2.COMM_COLL_NODE
        assert node.comm_type == MICRO[name] and node.comm_bytes == 1048576


def test_custom_collective_maps_sends_and_receives_to_ring_neighbours() -> None:
    graphs = ChakraWorkload(ChakraWorkload.Config(path=str(WORKLOADS / CUSTOM), npus=8)).graphs(8)
    for npu, graph in enumerate(graphs):
        sends = [n for n in graph.nodes if n.type == workload_pb2.COMM_SEND_NODE]
        recvs = [n for n in graph.nodes if n.type == workload_pb2.COMM_RECV_NODE]
        assert len(sends) == len(recvs) == 14
        assert {n.peer for n in sends} == {(npu + 1) % 8}
        assert {n.peer for n in recvs} == {(npu - 1) % 8}
        assert {n.comm_bytes for n in sends + recvs} == {131072}
        comps = [n for n in graph.nodes if n.type == workload_pb2.COMP_NODE]
        assert comps and all(n.duration_ps == 7 * 10**6 for n in comps)


def test_traces_simulate_like_their_native_equivalents() -> None:
    ring = topology((RING, 8, 50 * 10**9, 500_000))
    chakra = ChakraWorkload(
        ChakraWorkload.Config(path=str(WORKLOADS / "microbenchmarks/all_reduce_8npus_1MB/all_reduce"))
    )
    native = CollectiveWorkload(CollectiveWorkload.Config(collective="all_reduce", size="1048576B"))
    times = [simulate(w.graphs(8), AnalyticalNetwork(), ring, SystemOptions()).total_time_ps for w in (chakra, native)]
    assert times[0] == times[1]
    resnet = ChakraWorkload(ChakraWorkload.Config(path=str(WORKLOADS / RESNET))).graphs(8)
    total = simulate(resnet, AnalyticalNetwork(), ring, SystemOptions()).total_time_ps
    assert 1082450000 * 1000 <= total <= 1082479776 * 1000  # ASTRA-sim: compute 1082450000 ns, wall 1082479776 ns


def test_resnet_keeps_dependencies_and_durations() -> None:
    path = trace_files(WORKLOADS / RESNET)[0]
    _, nodes = read_trace(path)
    graph = to_graph(nodes, 0, 8)
    assert [n.data_deps for n in graph.nodes] == [n.data_deps for n in nodes]
    assert graph.nodes[0].duration_ps == nodes[0].duration_micros * 10**6 == 13003 * 10**6


def test_convert_round_trips_through_stratasim_files(tmp_path: Path) -> None:
    for prefix in (DLRM, CUSTOM):
        chakra_to_stratasim(WORKLOADS / prefix, tmp_path / "ir")
        stratasim_to_chakra(tmp_path / "ir", tmp_path / "back")
        for original, back in zip(trace_files(WORKLOADS / prefix), trace_files(tmp_path / "back"), strict=True):
            assert to_graph(read_trace(original)[1], 0, None) == to_graph(read_trace(back)[1], 0, None)
        assert len(read_graphs(tmp_path / "ir")) == 8


def test_write_then_read_is_identity(tmp_path: Path) -> None:
    metadata = et.GlobalMetadata(version="0.0.4", attr=[et.AttributeProto(name="schema", string_val="x")])
    cpu_op = et.AttributeProto(name="is_cpu_op", bool_val=True)
    io = et.IOInfo(values="v", shapes="[[2]]", types="f")
    nodes = [
        et.Node(id=1, name="a", type=et.COMP_NODE, duration_micros=5, attr=[cpu_op]),
        coll(2, comm_type=0, comm_size=1 << 30),
        et.Node(id=3, type=et.MEM_LOAD_NODE, ctrl_deps=[1], data_deps=[2], inputs=io, outputs=io),
        et.Node(id=300, name="big" * 100, type=et.COMP_NODE, data_deps=[1, 2], start_time_micros=2**40),
    ]
    path = tmp_path / "t.0.et"
    write_trace(path, metadata, nodes)
    assert read_trace(path) == (metadata, nodes)


def test_empty_metadata_record_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "t.0.et"
    write_trace(path, et.GlobalMetadata(), [coll(comm_type=0, comm_size=8)])
    assert read_trace(path)[0] == et.GlobalMetadata()


def test_attributes_are_read_from_any_integer_variant() -> None:
    node = et.Node(
        id=4,
        type=et.COMM_SEND_NODE,
        attr=[
            et.AttributeProto(name="comm_dst", uint32_val=3),
            et.AttributeProto(name="comm_size", sfixed64_val=64),
            et.AttributeProto(name="comm_tag", sint32_val=9),
            et.AttributeProto(name="comm_priority", double_val=1.0),
        ],
    )
    (out,) = to_graph([node], 0, 4).nodes
    assert (out.peer, out.comm_bytes, out.tag) == (3, 64, 9)


def test_memory_nodes_keep_their_size() -> None:
    node = et.Node(id=1, type=et.MEM_STORE_NODE, attr=[et.AttributeProto(name="tensor_size", uint64_val=4096)])
    (out,) = to_graph([node], 0, 1).nodes
    assert out.type == workload_pb2.MEM_STORE_NODE and out.comm_bytes == 4096


def garbage(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "bad.0.et"
    path.write_bytes(data)
    return path


def valid_bytes(tmp_path: Path) -> bytes:
    """A metadata record (bytes 0-7) and one node record (from byte 8)."""
    path = tmp_path / "ok.0.et"
    write_trace(path, et.GlobalMetadata(version="0.0.4"), [coll(1, comm_type=0, comm_size=1024)])
    return path.read_bytes()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda ok: ok[:-3], "truncated record at byte 8"),
        (lambda ok: ok + b"\xff\xff", "truncated record at byte"),
        (lambda ok: b"", "no GlobalMetadata"),
        (lambda ok: b"\x04\xff\xff\xff\xff", "not a GlobalMetadata message"),
        (lambda ok: ok + b"\x03\xff\xff\xff", "not a Node message"),
        (lambda ok: ok[8:], "no GlobalMetadata record: the first record is a node"),
        (lambda ok: ok + ok[8:], "node id 1 is used twice"),
    ],
)
def test_defects_are_one_error_naming_the_file(tmp_path: Path, make: object, message: str) -> None:
    assert callable(make)
    path = garbage(tmp_path, make(valid_bytes(tmp_path)))
    with pytest.raises(WorkloadError, match=message) as info:
        read_trace(path)
    assert str(path) in str(info.value)


def test_unknown_node_type_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.0.et"
    write_trace(path, et.GlobalMetadata(), [et.Node(id=1, name="x", type=42)])  # type: ignore[arg-type]
    with pytest.raises(WorkloadError, match=f"{path}: node 1 .* unknown type value 42"):
        read_trace(path)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="nope.0.et: cannot read the trace"):
        read_trace(tmp_path / "nope.0.et")


@pytest.mark.parametrize("attrs", [{"comm_type": 0}, {"comm_size": 8}])
def test_collective_without_type_or_size_names_file_and_node(tmp_path: Path, attrs: dict[str, int]) -> None:
    write_trace(tmp_path / "t.0.et", et.GlobalMetadata(), [coll(7, **attrs)])
    workload = ChakraWorkload(ChakraWorkload.Config(path=str(tmp_path / "t")))
    missing = "comm_size" if "comm_type" in attrs else "comm_type"
    with pytest.raises(WorkloadError, match=f"t.0.et: node 7: COMM_COLL_NODE without the attribute {missing}"):
        workload.graphs(1)


def test_wrong_attribute_kind_and_bad_peer_are_errors() -> None:
    node = coll(1, comm_size=8)
    node.attr.append(et.AttributeProto(name="comm_type", string_val="all_reduce"))
    with pytest.raises(WorkloadError, match="attribute comm_type is string_val, expected an integer"):
        to_graph([node], 0, 2)
    recv = et.Node(
        id=2,
        type=et.COMM_RECV_NODE,
        attr=[et.AttributeProto(name="comm_src", int32_val=5), et.AttributeProto(name="comm_size", int32_val=5)],
    )
    with pytest.raises(WorkloadError, match="comm_src 5 is not another NPU of the 4"):
        to_graph([recv], 0, 4)


def test_rank_files_must_be_contiguous(tmp_path: Path) -> None:
    for rank in (0, 1, 3):
        write_trace(tmp_path / f"t.{rank}.et", et.GlobalMetadata(), [coll(comm_type=0, comm_size=8)])
    with pytest.raises(WorkloadError, match=r"t\.2\.et is missing"):
        ChakraWorkload(ChakraWorkload.Config(path=str(tmp_path / "t"))).npus_required()
    with pytest.raises(WorkloadError, match=r"no Chakra traces match .*other\.<rank>\.et"):
        ChakraWorkload(ChakraWorkload.Config(path=str(tmp_path / "other"))).npus_required()


def test_relative_prefix_and_npus_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rank in (0, 1):
        write_trace(tmp_path / f"t.{rank}.et", et.GlobalMetadata(), [coll(comm_type=0, comm_size=8)])
    monkeypatch.chdir(tmp_path)
    assert ChakraWorkload(ChakraWorkload.Config(path="t")).npus_required() == 2
    with pytest.raises(WorkloadError, match="workload.npus is 4 but 2 Chakra traces match t"):
        ChakraWorkload(ChakraWorkload.Config(path="t", npus=4)).npus_required()
    with pytest.raises(WorkloadError, match="has 2 ranks, not 3"):
        ChakraWorkload(ChakraWorkload.Config(path="t")).graphs(3)


def test_from_graph_refuses_what_chakra_cannot_express() -> None:
    graph = workload_pb2.ExecutionGraph(npu=0)
    graph.nodes.add(id=1, type=workload_pb2.COMP_NODE, duration_ps=1500)
    with pytest.raises(WorkloadError, match="node 1: .*not a whole number of microseconds"):
        from_graph(graph)
    graph.nodes[0].duration_ps = 0
    graph.nodes[0].group.append(1)
    graph.nodes[0].pg_name = "tp"
    with pytest.raises(WorkloadError, match="cannot express group without a pg_name, pg_name outside communication"):
        from_graph(graph)
    graph.nodes[0].type = workload_pb2.COMM_COLL_NODE
    assert [attr.name for attr in from_graph(graph)[0].attr] == ["comm_type", "comm_size", "pg_name"]
    graph.nodes.add(id=2, type=workload_pb2.MEM_LOAD_NODE, duration_ps=1_000_000)  # a host-link copy it priced
    with pytest.raises(WorkloadError, match="node 2: Chakra traces cannot express a memory node's duration_ps"):
        from_graph(graph)
