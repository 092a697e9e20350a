"""Wait nodes (``WAIT_NODE``): done ``duration_ps`` after they become ready, occupying nothing; the compute stream's
idle time they cause is the NPU's ``waiting_ps``, neither compute nor exposed communication (which stays the time
neither computing nor waiting, split by kind as before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.chakra import et_def_pb2 as et
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.graph_blocks import unrolled
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.trace import WAITING_TRACK
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.traces.chakra import WAIT_ATTR, to_graph
from stratasim.workload_layer.traces.convert import from_graph, write_graphs
from tests.helpers import RunCli
from tests.system_layer.helpers import COLLECTIVES, RING, ser, topology

BW, LAT = 50 * 10**9, 500_000
COMPUTE, WAIT = 10_000_000, 4_000_000
ALL_REDUCE_PS = 2 * (ser(1 << 19, BW) + LAT)  # a ring all-reduce of 1 MiB on 2 NPUs: 2 steps of half the buffer


def _graph(*nodes: dict[str, object]) -> workload_pb2.ExecutionGraph:
    """Nodes in a chain (each on the one before), as ``(type, fields)`` dictionaries."""
    graph = workload_pb2.ExecutionGraph()
    for index, fields in enumerate(nodes):
        graph.nodes.add(id=index, data_deps=[index - 1] if index else [], **fields)  # type: ignore[arg-type]
    return graph


def _compute(duration: int = COMPUTE) -> dict[str, object]:
    return {"type": workload_pb2.COMP_NODE, "duration_ps": duration}


def _wait(duration: int = WAIT) -> dict[str, object]:
    return {"type": workload_pb2.WAIT_NODE, "duration_ps": duration, "name": "waiting for requests"}


def _all_reduce() -> dict[str, object]:
    return {
        "type": workload_pb2.COMM_COLL_NODE,
        "comm_type": COLLECTIVES["all_reduce"],
        "comm_bytes": 1 << 20,
        "pg_name": "tp",
    }


def _run(graph: workload_pb2.ExecutionGraph, npus: int = 2, **options: object) -> SimulationResult:
    ring = topology((RING, npus, BW, LAT))
    return simulate([graph] * npus, AnalyticalNetwork(), ring, SystemOptions(**options), record_trace=True)


def test_a_wait_between_computes_is_waiting_not_compute_nor_exposed_communication() -> None:
    result = _run(_graph(_compute(), _wait(), _compute()))
    for npu in result.per_npu:
        assert npu.finish_ps == 2 * COMPUTE + WAIT == result.total_time_ps
        assert (npu.compute_ps, npu.waiting_ps, npu.exposed_comm_ps) == (2 * COMPUTE, WAIT, 0)
        assert npu.exposed_comm_ps_by_kind == ()


def test_a_wait_after_a_collective_splits_the_idle_time_between_them() -> None:
    # compute, the all-reduce (exposed, charged to tp), the wait (waiting), compute: the idle walk goes back from
    # the wait to the all-reduce that readied it.
    result = _run(_graph(_compute(), _all_reduce(), _wait(), _compute()))
    for npu in result.per_npu:
        assert npu.finish_ps == 2 * COMPUTE + ALL_REDUCE_PS + WAIT
        assert (npu.compute_ps, npu.waiting_ps, npu.exposed_comm_ps) == (2 * COMPUTE, WAIT, ALL_REDUCE_PS)
        assert npu.exposed_comm_ps_by_kind == (("tp", ALL_REDUCE_PS),)


def test_a_wait_occupies_nothing_so_compute_runs_beside_it() -> None:
    # Two roots, a wait of 25 us and a compute of 10 us, both before a last compute: the wait does not queue on the
    # compute stream; the stream is idle 15 us because of it.
    graph = _graph(_wait(25_000_000), _compute())
    graph.nodes[1].ClearField("data_deps")
    graph.nodes.add(id=2, type=workload_pb2.COMP_NODE, duration_ps=COMPUTE, data_deps=[0, 1])
    result = _run(graph)
    for npu in result.per_npu:
        assert npu.finish_ps == 25_000_000 + COMPUTE
        assert (npu.compute_ps, npu.waiting_ps, npu.exposed_comm_ps) == (2 * COMPUTE, 15_000_000, 0)


def test_a_wait_is_not_slowed_with_the_compute() -> None:
    graph = _graph(_compute(), _wait(), _compute())
    slowed = _run(graph, slowdown=[{"npus": "0-1", "factor": 2.0}])
    for npu in slowed.per_npu:
        assert (npu.compute_ps, npu.waiting_ps) == (4 * COMPUTE, WAIT)


def test_stand_ins_and_every_npu_simulated_agree_on_waits() -> None:
    graph = _graph(_compute(), _all_reduce(), _wait(), _compute())
    together = _run(graph, npus=4)
    apart = _run(graph, npus=4, aggregate=False)
    assert together.per_npu == apart.per_npu and together.total_time_ps == apart.total_time_ps


def test_a_trace_shows_waits_on_their_own_track() -> None:
    result = _run(_graph(_compute(), _wait(), _compute()))
    spans = [(span.npu, span.track, span.name, span.start_ps, span.end_ps) for span in result.spans]
    assert (0, WAITING_TRACK, "waiting for requests", COMPUTE, COMPUTE + WAIT) in spans
    assert [span for span in spans if span[0] == 0 and span[1] == "compute"] == [
        (0, "compute", "node 0", 0, COMPUTE),
        (0, "compute", "node 2", COMPUTE + WAIT, 2 * COMPUTE + WAIT),
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"duration_ps": -1}, r"NPU 0 node 1 \('w'\): a WAIT_NODE waits duration_ps, which must not be negative"),
        (
            {"duration_ps": 5, "op": compute_pb2.OperatorDesc(name="gemm")},
            r"NPU 0 node 1 \('w'\): a WAIT_NODE waits a fixed duration_ps and prices no operator",
        ),
    ],
)
def test_a_bad_wait_node_is_refused_naming_it(fields: dict[str, object], message: str) -> None:
    graph = _graph(_compute(), {"type": workload_pb2.WAIT_NODE, "name": "w", **fields})
    with pytest.raises(WorkloadError, match=message):
        _run(graph)


def test_chakra_has_no_wait_node_so_it_travels_as_marked_compute_and_comes_back() -> None:
    graph = _graph(_compute(), _wait(3_500_000), _compute())
    nodes = from_graph(graph, exact_durations=True)
    assert nodes[1].type == et.COMP_NODE and nodes[1].duration_micros == 4  # other readers: compute, as long
    assert [attr.name for attr in nodes[1].attr] == ["duration_ps", WAIT_ATTR]
    back = to_graph(nodes, 0, 2)
    assert back.nodes[1].type == workload_pb2.WAIT_NODE and back.nodes[1].duration_ps == 3_500_000
    assert back == _with_npu(graph, 0)
    with pytest.raises(WorkloadError, match="node 1: duration 3500000 ps is not a whole number of microseconds"):
        from_graph(graph)


def _with_npu(graph: workload_pb2.ExecutionGraph, npu: int) -> workload_pb2.ExecutionGraph:
    copy = workload_pb2.ExecutionGraph()
    copy.CopyFrom(graph)
    copy.npu = npu
    return copy


def test_a_wait_inside_a_block_runs_as_in_the_unrolled_graph() -> None:
    # A block (compute, wait, all-reduce) run twice: a block holding a wait is never run whole (macros), it is
    # inlined node for node, so it times exactly as the unrolled graph.
    graph = workload_pb2.ExecutionGraph()
    block = graph.blocks.add(name="layer")
    for index, fields in enumerate((_compute(), _wait(), _all_reduce())):
        block.nodes.add(id=index, data_deps=[index - 1] if index else [], **fields)  # type: ignore[arg-type]
    graph.nodes.add(id=0, type=workload_pb2.BLOCK_NODE, block=0, name="first")
    graph.nodes.add(id=1, type=workload_pb2.BLOCK_NODE, block=0, name="second", data_deps=[0])
    with_blocks, plain = _run(graph), _run(unrolled(graph))
    assert with_blocks.per_npu == plain.per_npu and with_blocks.total_time_ps == plain.total_time_ps
    assert with_blocks.per_npu[0].waiting_ps == 2 * WAIT


def test_a_trace_with_a_negative_wait_is_one_message_and_a_failed_run(run_cli: RunCli, tmp_path: Path) -> None:
    graphs = [_graph(_compute(), _wait(-5)) for _ in range(2)]
    graphs[1].npu = 1
    write_graphs(tmp_path / "t", graphs)
    study = tmp_path / "s.yaml"
    study.write_text(
        f"workload: {{kind: stratasim_trace, path: {tmp_path / 't'}}}\n"
        "network: {topology: [{kind: ring, size: 2, bandwidth: 50GB/s, latency: 500ns}]}\n"
    )
    code, _, err = run_cli("run", str(study))
    assert code != 0 and "Traceback" not in err
    assert "node 1: a WAIT_NODE waits duration_ps, which must not be negative (it is -5 ps)" in err
