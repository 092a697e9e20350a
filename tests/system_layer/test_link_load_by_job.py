"""The engine tags each message with its sender's job (``ExecutionGraph.job``) so that networks that model links
report each job's load on a shared link; a single-job run sends no tags and its results do not change."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import BackendError
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.remote import NetworkClient
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import network_pb2, workload_pb2
from tests.contracts.contract_fakes import served
from tests.system_layer.helpers import RING, ser, topology

B, ALPHA, S = 50 * 10**9, 500_000, 1 << 20
TOPO = topology((RING, 4, B, ALPHA))
SEND, RECV = workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE


def two_jobs(job_of_npu1: int = 1) -> list[workload_pb2.ExecutionGraph]:
    """NPU 0 (job 0) sends to NPU 2 over 0->1->2; NPU 1 (``job_of_npu1``) sends to NPU 2 over 1->2: both at 0
    (the remote path sends them as a SendBatch, the in-process one as columns)."""
    send0 = workload_pb2.Node(id=1, type=SEND, peer=2, comm_bytes=S, tag=1)
    send1 = workload_pb2.Node(id=1, type=SEND, peer=2, comm_bytes=S, tag=2)
    receive = [
        workload_pb2.Node(id=1, type=RECV, peer=0, comm_bytes=S, tag=1),
        workload_pb2.Node(id=2, type=RECV, peer=1, comm_bytes=S, tag=2),
    ]
    return [
        workload_pb2.ExecutionGraph(nodes=[send0], job=0),
        workload_pb2.ExecutionGraph(nodes=[send1], job=job_of_npu1),
        workload_pb2.ExecutionGraph(nodes=receive, job=job_of_npu1),
        workload_pb2.ExecutionGraph(job=job_of_npu1),
    ]


def run(graphs: list[workload_pb2.ExecutionGraph], network: NetworkBackend | None = None) -> SimulationResult:
    return simulate(graphs, network or CongestionAwareNetwork(), TOPO, SystemOptions())


def test_each_job_has_its_bytes_on_the_link_the_two_share() -> None:
    links = {link.link: link for link in run(two_jobs()).links}
    shared = links["dim 0: 1->2"]
    assert shared.bytes_by_job == ((0, S), (1, S))
    assert shared.messages_by_job == ((0, 1), (1, 1))
    # NPU 1's message starts on 1->2 at once; NPU 0's head reaches it one latency later and waits for the rest.
    assert shared.queue_ps == ser(S, B) - ALPHA
    assert shared.queue_ps_by_job == ((0, ser(S, B) - ALPHA), (1, 0))
    assert links["dim 0: 0->1"].bytes_by_job == ((0, S),)


def test_a_single_job_run_is_untagged_and_unchanged() -> None:
    one = run(two_jobs(job_of_npu1=0))
    two = run(two_jobs())
    assert all(not link.bytes_by_job and not link.queue_ps_by_job for link in one.links)
    assert one.total_time_ps == two.total_time_ps
    assert [(link.link, link.bytes, link.queue_ps) for link in one.links] == [
        (link.link, link.bytes, link.queue_ps) for link in two.links
    ]


@pytest.fixture
def remote_network() -> Iterator[Callable[[], NetworkBackend]]:
    """Clients of a congestion-aware gRPC server (started for the test, stopped after it)."""
    with served("network", "congestion_aware") as endpoint:
        yield lambda: NetworkClient(endpoint, backend="congestion_aware", timeout_s=10.0)


def test_a_remote_network_reports_the_same_load_by_job(remote_network: Callable[[], NetworkBackend]) -> None:
    client = remote_network()
    try:
        assert run(two_jobs(), client).links == run(two_jobs()).links
    finally:
        client.close()


class _BrokenCounters(CongestionAwareNetwork):
    """A network whose load by flow names a link it does not have (as a faulty remote peer might)."""

    def counters(self) -> network_pb2.LinkCounters:
        counters = super().counters()
        counters.flow_link.append(len(counters.link))
        counters.flow.append(1)
        counters.flow_bytes.append(1)
        counters.flow_messages.append(1)
        counters.flow_queue_ps.append(0)
        return counters


def test_load_by_flow_naming_a_link_the_network_lacks_is_refused() -> None:
    with pytest.raises(BackendError, match="the network's load by flow names link 2 of 2"):
        run(two_jobs(), _BrokenCounters())
