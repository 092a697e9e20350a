"""An all-to-all-v in which every sender splits its buffer alike (a mixture of experts' dispatch and combine) is
priced as the even all-to-all whose every message is the busiest peer's
(:func:`~stratasim.kernel.collective_types.uneven_all_to_all_bytes`). Checked here against the all-to-all-v itself,
sent as point-to-point messages of the uneven sizes: equal to the picosecond with the direct algorithm on the
analytical network, and on the congestion-aware one where the busiest receiver's link sets the time."""

from __future__ import annotations

from fractions import Fraction
from math import ceil

import pytest

from stratasim.kernel.collective_types import uneven_all_to_all_bytes
from stratasim.kernel.contracts import NetworkBackend
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.system_layer.serving.graphs import add_collective, add_message
from stratasim.v1 import workload_pb2
from tests.system_layer.helpers import FC, SWITCH, topology

N, BUFFER = 4, 4_000_000
SHARES = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 8), Fraction(1, 8))
US = 1_000_000  # ps


def _padded(network: NetworkBackend, kind: int, options: SystemOptions) -> int:
    graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(N)]
    for graph in graphs:
        add_collective(graph, "a2a", workload_pb2.ALL_TO_ALL, uneven_all_to_all_bytes(BUFFER, SHARES), range(N), "ep")
    return simulate(graphs, network, topology((kind, N, 100e9, US)), options).total_time_ps


def _messages(network: NetworkBackend, kind: int, options: SystemOptions) -> int:
    """The all-to-all-v itself: NPU ``r`` sends ``BUFFER x SHARES[q]`` bytes to every other NPU ``q``."""
    graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(N)]
    for sender in range(N):
        for peer in (q for q in range(N) if q != sender):
            send, receive = ceil(BUFFER * SHARES[peer]), ceil(BUFFER * SHARES[sender])
            add_message(graphs[sender], "send", workload_pb2.COMM_SEND_NODE, peer, 0, send, "ep")
            add_message(graphs[sender], "receive", workload_pb2.COMM_RECV_NODE, peer, 0, receive, "ep")
    return simulate(graphs, network, topology((kind, N, 100e9, US)), options).total_time_ps


def test_even_shares_leave_the_buffer_as_it_is() -> None:
    assert uneven_all_to_all_bytes(BUFFER, (Fraction(1, N),) * N) == BUFFER
    assert uneven_all_to_all_bytes(BUFFER, SHARES) == 2 * BUFFER  # 4 messages of the busiest peer's half


@pytest.mark.parametrize("kind", [SWITCH, FC])
@pytest.mark.parametrize("delay", ["0ns", "10ns"])
def test_on_the_analytical_network_the_busiest_peer_sets_the_time_exactly(kind: int, delay: str) -> None:
    """Every message flies at once: the largest, 2 MB at 100 GB/s = 20 us, and its latency (two hops through a
    switch) set the time, whatever the others carry."""
    options = SystemOptions(algorithm="direct", endpoint_delay=delay)
    padded = _padded(AnalyticalNetwork(), kind, options)
    assert padded == _messages(AnalyticalNetwork(), kind, options)
    hops = 2 if kind == SWITCH else 1
    assert padded == 20 * US + hops * US + (10_000 if delay == "10ns" else 0)


@pytest.mark.parametrize(("kind", "expected"), [(SWITCH, 60 * US + 2 * US), (FC, 20 * US + US)])
def test_where_links_are_shared_the_busiest_receivers_link_sets_the_time(kind: int, expected: int) -> None:
    """On the congestion-aware network the messages to NPU 0 (2 MB from each of its 3 peers) queue on its switch
    link, 6 MB at 100 GB/s = 60 us, as the padded all-to-all's do; fully connected, each pair has its own link and
    the largest message sets the time again."""
    options = SystemOptions(algorithm="direct")
    padded = _padded(CongestionAwareNetwork(), kind, options)
    assert padded == _messages(CongestionAwareNetwork(), kind, options) == expected
