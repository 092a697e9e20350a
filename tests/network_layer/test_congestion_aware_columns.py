"""The congestion-aware network's fast paths give what its protobuf path and an unbounded route cache give.

In-process, the engine hands the network each window's sends and takes its deliveries as plain columns
(:class:`~stratasim.kernel.contracts.ColumnarNetwork`); remote sessions and wrapped networks go through
``inject``/``advance`` and protobuf messages. Routes are cached up to a bound; beyond it they are built and not
kept. Neither may move a number: each is run here against the other way on small random studies.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.kernel.contracts import ColumnarNetwork
from stratasim.network_layer import congestion_aware
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import network_pb2, workload_pb2
from tests.system_layer.helpers import COLLECTIVES, FC, RING, SWITCH, topology

KINDS = st.sampled_from([RING, FC, SWITCH])


class _ProtobufOnly:
    """A congestion-aware network seen only through the contract every backend has, as a remote one is."""

    name = "congestion_aware"

    def __init__(self) -> None:
        self._inner = CongestionAwareNetwork()

    def configure(self, topo: network_pb2.Topology) -> network_pb2.NetworkInfo:
        return self._inner.configure(topo)

    def inject(self, sends: network_pb2.SendBatch) -> None:
        self._inner.inject(sends)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        return self._inner.advance(until_ps)

    def counters(self) -> network_pb2.LinkCounters:
        return self._inner.counters()

    def close(self) -> None:
        self._inner.close()


def _graph(
    npu: int, npus: int, collectives: list[tuple[str, int]], sends: list[tuple[int, int]]
) -> workload_pb2.ExecutionGraph:
    """A chain of collectives, then point-to-point messages: each (offset, bytes) sent to an NPU that many ahead
    (another NPU) and received from the one as many behind, all at once (they contend for links with each other)."""
    graph = workload_pb2.ExecutionGraph()
    for i, (kind, size) in enumerate(collectives):
        graph.nodes.add(
            id=i,
            type=workload_pb2.COMM_COLL_NODE,
            comm_type=COLLECTIVES[kind],
            comm_bytes=size,
            ctrl_deps=[i - 1] if i else [],
        )
    last = [len(collectives) - 1] if collectives else []
    for j, (ahead, size) in enumerate(sends):
        offset = ahead % (npus - 1) + 1  # another NPU
        base = len(collectives) + 2 * j
        graph.nodes.add(
            id=base,
            type=workload_pb2.COMM_SEND_NODE,
            peer=(npu + offset) % npus,
            comm_bytes=size,
            tag=j,
            ctrl_deps=last,
        )
        graph.nodes.add(
            id=base + 1,
            type=workload_pb2.COMM_RECV_NODE,
            peer=(npu - offset) % npus,
            comm_bytes=size,
            tag=j,
            ctrl_deps=last,
        )
    return graph


def _compared(result: SimulationResult) -> tuple[object, ...]:
    """What the run simulated (not its count of events: in-process, lock-step lines are decided as arrays, see
    tests/network_layer/test_congestion_aware_lines.py)."""
    return (
        result.total_time_ps,
        result.collectives,
        result.per_npu,
        result.links,
        result.link_busy,
    )


STUDIES = st.fixed_dictionaries(
    {
        "dims": st.lists(
            st.tuples(KINDS, st.integers(2, 4), st.integers(1, 400), st.integers(1, 5000)), min_size=1, max_size=2
        ),
        "collectives": st.lists(
            st.tuples(
                st.sampled_from(["all_reduce", "all_to_all", "all_gather", "reduce_scatter"]), st.integers(1, 1 << 20)
            ),
            max_size=3,
        ),
        "sends": st.lists(st.tuples(st.integers(1, 3), st.integers(0, 1 << 18)), max_size=3),
        "algorithm": st.sampled_from(["ring", "direct"]),
        "splits": st.integers(1, 3),
        "active_chunks": st.integers(1, 2),
        "endpoint_delay": st.integers(0, 20_000),
        "store_and_forward": st.booleans(),
        "record_link_busy": st.booleans(),
    }
)


def _run(study: dict, network: object) -> SimulationResult:
    topo = topology(*[(kind, n, gbps * 10**9 / 8, lat) for kind, n, gbps, lat in study["dims"]])
    topo.store_and_forward = study["store_and_forward"]
    topo.record_link_busy = study["record_link_busy"]
    npus = 1
    for dim in topo.dimensions:
        npus *= dim.size
    graphs = [_graph(npu, npus, study["collectives"], study["sends"]) for npu in range(npus)]
    options = SystemOptions(
        algorithm=study["algorithm"],
        splits=study["splits"],
        active_chunks=study["active_chunks"],
        endpoint_delay=f"{study['endpoint_delay']}ns",
        aggregate=False,
    )
    return simulate(graphs, network, topo, options)  # type: ignore[arg-type]


def test_the_in_process_network_takes_columns_and_a_wrapped_one_does_not() -> None:
    assert isinstance(CongestionAwareNetwork(), ColumnarNetwork)
    assert not isinstance(_ProtobufOnly(), ColumnarNetwork)


@settings(max_examples=80, deadline=None)
@given(study=STUDIES)
def test_columns_and_protobuf_messages_give_the_same_run(study: dict) -> None:
    assert _compared(_run(study, CongestionAwareNetwork())) == _compared(_run(study, _ProtobufOnly()))


@settings(max_examples=50, deadline=None)
@given(study=STUDIES, bound=st.integers(1, 12))
def test_routes_beyond_the_cache_are_built_afresh_alike(study: dict, bound: int) -> None:
    unbounded = _compared(_run(study, CongestionAwareNetwork()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(congestion_aware, "_ROUTE_CACHE", bound)
        network = CongestionAwareNetwork()
        assert _compared(_run(study, network)) == unbounded
        assert len(network._routes) <= bound
