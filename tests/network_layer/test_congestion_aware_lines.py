"""Lock-step lines on the congestion-aware network: a phase's crossings decided as arrays give what sending every
message gives.

In-process, when every NPU does one thing at a time, the engine lets the network decide a lock-step phase's
crossings for whole lines at once (:mod:`stratasim.network_layer.congestion_aware_lines`). A message that later
reaches one of those links first makes the engine run the simulation again message by message. Either way, nothing
simulated may move: each is run here against the message-by-message engine (the network behind the protobuf contract
only) on small random studies, NPUs starting apart, collectives mixed.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.kernel.contracts import LineConflict, LineNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.network_layer.congestion_aware_lines import LineSession
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import workload_pb2
from tests.network_layer.test_congestion_aware_columns import _ProtobufOnly
from tests.system_layer.helpers import COLLECTIVES, FC, RING, SWITCH, topology


def _compared(result: SimulationResult) -> tuple[object, ...]:
    return (result.total_time_ps, result.collectives, result.per_npu, result.links, result.npus)


def _graph(start: int, collectives: list[tuple[str, int]]) -> workload_pb2.ExecutionGraph:
    """A compute node of ``start`` ps (so NPUs start apart), then a chain of collectives on every NPU."""
    graph = workload_pb2.ExecutionGraph()
    graph.nodes.add(id=0, type=workload_pb2.COMP_NODE, duration_ps=start)
    for i, (kind, size) in enumerate(collectives, start=1):
        graph.nodes.add(
            id=i, type=workload_pb2.COMM_COLL_NODE, comm_type=COLLECTIVES[kind], comm_bytes=size, ctrl_deps=[i - 1]
        )
    return graph


STUDIES = st.fixed_dictionaries(
    {
        "dims": st.lists(
            st.tuples(
                st.sampled_from([RING, FC, SWITCH]), st.integers(2, 5), st.integers(1, 400), st.integers(1, 5000)
            ),
            min_size=1,
            max_size=2,
        ),
        "collectives": st.lists(
            st.tuples(
                st.sampled_from(["all_reduce", "all_to_all", "all_gather", "reduce_scatter"]), st.integers(1, 1 << 20)
            ),
            min_size=1,
            max_size=3,
        ),
        "starts": st.lists(st.integers(0, 3_000_000), min_size=1, max_size=4),
        "algorithm": st.sampled_from(["ring", "direct", "ring_bidirectional"]),
        "all_to_all": st.sampled_from(["ring", "direct"]),
        "endpoint_delay": st.integers(0, 20_000),
        "store_and_forward": st.booleans(),
    }
)


def _run(study: dict, network: object) -> SimulationResult:
    topo = topology(*[(kind, n, gbps * 10**9 / 8, lat) for kind, n, gbps, lat in study["dims"]])
    topo.store_and_forward = study["store_and_forward"]
    npus = int(np.prod([dim.size for dim in topo.dimensions]))
    starts = study["starts"]
    graphs = [_graph(starts[npu % len(starts)], study["collectives"]) for npu in range(npus)]
    options = SystemOptions(
        algorithm={"*": (study["algorithm"],), "all_to_all": (study["all_to_all"],)},
        endpoint_delay=f"{study['endpoint_delay']}ns",
        aggregate=False,
    )
    return simulate(graphs, network, topo, options)  # type: ignore[arg-type]


def test_the_in_process_network_decides_lines() -> None:
    assert isinstance(CongestionAwareNetwork(), LineNetwork)
    assert not isinstance(_ProtobufOnly(), LineNetwork)


@settings(max_examples=80, deadline=None)
@given(study=STUDIES)
def test_lines_decided_as_arrays_give_every_message_s_run(study: dict) -> None:
    assert _compared(_run(study, CongestionAwareNetwork())) == _compared(_run(study, _ProtobufOnly()))


def test_a_ring_all_reduce_is_decided_line_by_line() -> None:
    """Every message of a ring all-reduce crosses one link of its own: no message goes through the event loop."""
    study = {
        "dims": [(RING, 8, 400, 500)],
        "collectives": [("all_reduce", 1 << 20)],
        "starts": [0],
        "algorithm": "ring",
        "all_to_all": "ring",
        "endpoint_delay": 0,
        "store_and_forward": False,
    }
    with mock.patch.object(CongestionAwareNetwork, "inject_columns") as inject:
        lines = _run(study, CongestionAwareNetwork())
    assert not inject.called
    assert _compared(lines) == _compared(_run(study, _ProtobufOnly()))
    assert lines.events_processed < _run(study, _ProtobufOnly()).events_processed


def test_a_run_whose_lines_conflict_starts_over_message_by_message() -> None:
    study = {
        "dims": [(RING, 4, 8, 500), (FC, 2, 16, 900)],
        "collectives": [("all_reduce", 1 << 16), ("all_to_all", 1 << 16)],
        "starts": [0, 0, 0, 2_000_000],
        "algorithm": "ring",
        "all_to_all": "direct",
        "endpoint_delay": 0,
        "store_and_forward": False,
    }
    network = CongestionAwareNetwork()
    decide = LineSession.arrivals
    calls = []

    def conflicting(session: LineSession, route: object, sent: np.ndarray) -> np.ndarray:
        calls.append(sent)
        if len(calls) == 3:
            raise LineConflict("forced")
        return decide(session, route, sent)  # type: ignore[arg-type]

    with (
        mock.patch.object(LineSession, "arrivals", conflicting),
        mock.patch.object(network, "line_reset", wraps=network.line_reset) as reset,
    ):
        result = _run(study, network)
    assert reset.call_count == 1 and len(calls) == 3  # lines were decided until the conflict, then none
    assert _compared(result) == _compared(_run(study, _ProtobufOnly()))


def _claimed(network: CongestionAwareNetwork, sent: int) -> None:
    """A line's message from NPU 0 to 1 (over their link), sent at ``sent``."""
    session = network.line_session()
    assert session is not None
    route = session.route(np.array([0]), np.array([1]), np.array([100]))
    session.arrivals(route, np.array([sent]))
    session.close()


def test_a_message_reaching_a_link_no_later_than_a_line_did_conflicts() -> None:
    network = CongestionAwareNetwork()
    network.configure(topology((RING, 4, 10**9, 1000)))
    _claimed(network, 5000)
    network.inject_columns([0], [3], [1], [100], [4000])  # 3 -> 0 -> 1: on the link at 5000
    with pytest.raises(LineConflict):
        network.advance_columns(20_000)


def test_a_line_sending_over_a_link_before_an_earlier_line_conflicts() -> None:
    network = CongestionAwareNetwork()
    network.configure(topology((RING, 4, 10**9, 1000)))
    _claimed(network, 5000)
    _claimed(network, 5000)  # the same sender again at the same time: in order
    session = network.line_session()
    assert session is not None
    with pytest.raises(LineConflict):
        session.arrivals(session.route(np.array([0]), np.array([1]), np.array([100])), np.array([4999]))


def test_lines_need_links_of_their_own() -> None:
    network = CongestionAwareNetwork()
    network.configure(topology((SWITCH, 4, 10**9, 1000)))
    session = network.line_session()
    assert session is not None
    assert session.route(np.array([0]), np.array([1]), np.array([100])) is None  # up and down: two links
    network.configure(topology((RING, 4, 10**9, 1000)))
    session = network.line_session()
    assert session is not None
    assert session.route(np.array([0, 1]), np.array([2, 2]), np.array([100, 100])) is None  # two hops
    assert session.route(np.array([0, 0]), np.array([1, 1]), np.array([1, 1])) is None  # one link twice


def test_no_lines_where_links_change_or_are_recorded() -> None:
    network = CongestionAwareNetwork()
    topo = topology((RING, 4, 10**9, 1000))
    topo.record_link_busy = True
    network.configure(topo)
    assert network.line_session() is None
