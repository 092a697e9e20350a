"""Flows (``SendBatch.flow``) and the counters they feed cross the wire unchanged: every backend gives the same link
counters, queueing and load by flow in process and through a gRPC server, batches with and without a flow column
mixed in one window included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.v1 import network_pb2
from tests.contracts.test_network_contract import MODES, NAMES, drain, sends, topology


def flowing(count: int, first_id: int, start_ps: int) -> network_pb2.SendBatch:
    """The contract's mix of sends, message i of flow i % 3."""
    batch = sends(count, first_id, start_ps)
    batch.flow.extend(i % 3 for i in range(len(batch.id)))
    return batch


def loaded(network: NetworkBackend) -> network_pb2.LinkCounters:
    """The counters after windows of sends with flows, without, and both in one window."""
    network.configure(topology())
    network.inject(flowing(30, 0, 0))
    network.inject(sends(10, 1_000, 0))  # no flow column: all flow 0, in the same window as flows
    network.advance(-1)
    network.inject(flowing(20, 5_000, 3_000_000))
    drain(network)
    return network.counters()


@pytest.mark.parametrize("name", NAMES)
def test_in_process_and_remote_count_the_same_load_by_flow(name: str, open_backend: Callable[..., Any]) -> None:
    local, remote = (loaded(open_backend("network", name, mode)) for mode in MODES)
    assert remote == local
    assert len(local.queue_ps) in (0, len(local.link))
    if local.flow_link:  # a backend that counts flows counts every link's whole load
        totals = {i: [0, 0, 0] for i in set(local.flow_link)}
        for i, size, messages, queue in zip(
            local.flow_link, local.flow_bytes, local.flow_messages, local.flow_queue_ps
        ):
            totals[i] = [totals[i][0] + size, totals[i][1] + messages, totals[i][2] + queue]
        queue_ps = local.queue_ps or [0] * len(local.link)
        assert totals == {
            i: [local.bytes[i], local.messages[i], queue_ps[i]] for i in range(len(local.link)) if local.messages[i]
        }
        assert set(local.flow) == {0, 1, 2}


def test_the_congestion_aware_network_counts_queueing_and_flows(open_backend: Callable[..., Any]) -> None:
    counters = loaded(open_backend("network", "congestion_aware", "remote"))
    assert len(counters.queue_ps) == len(counters.link) and sum(counters.queue_ps) > 0
    assert counters.flow_link
