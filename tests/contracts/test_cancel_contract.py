"""``cancel``: every backend, in-process and through a real gRPC server, takes a flow's messages off the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import BackendError
from stratasim.v1 import network_pb2
from tests.contracts.test_network_contract import MODES, NAMES, drain, sends, topology

AT_PS = 2_000_000


def _cancellable() -> network_pb2.Topology:
    """The contract's topology, configured so that a cancel may come (``Topology.cancellable``)."""
    configured = topology()
    configured.cancellable = True
    return configured


def two_flows(count: int, first_id: int, start_ps: int) -> network_pb2.SendBatch:
    """The contract suite's mix of sends, every other message flow 1, the rest flow 2."""
    batch = sends(count, first_id, start_ps)
    batch.flow.extend(1 + i % 2 for i in range(len(batch.id)))
    return batch


def delivered(results: list[network_pb2.AdvanceResult]) -> dict[int, int]:
    """Message id -> arrival time, over windows."""
    return {mid: t for result in results for mid, t in zip(result.deliveries.id, result.deliveries.time_ps)}


def cancelled_run(network: NetworkBackend) -> tuple[dict[int, int], list[int], dict[int, int]]:
    """Two flows sent, one window advanced, flow 1 cancelled at AT_PS, the rest drained: (arrivals before the cancel,
    ids taken off, arrivals after)."""
    network.configure(_cancellable())
    network.inject(two_flows(30, 0, 0))
    before = delivered([network.advance(AT_PS // 2)])
    network.inject(two_flows(10, 1_000, AT_PS // 2 + 1))  # buffered by a remote client: they travel with the cancel
    taken = list(network.cancel(1, AT_PS).id)
    return before, taken, delivered(drain(network))


@pytest.fixture(params=[(name, mode) for name in NAMES for mode in MODES], ids="-".join)
def network(request: pytest.FixtureRequest, open_backend: Callable[[str, str, str], Any]) -> NetworkBackend:
    name, mode = request.param
    backend: NetworkBackend = open_backend("network", name, mode)
    return backend


def test_a_cancelled_flow_is_never_delivered_after_the_cancel_and_the_other_flow_is_whole(
    network: NetworkBackend,
) -> None:
    flow = {
        mid: f
        for batch in (two_flows(30, 0, 0), two_flows(10, 1_000, AT_PS // 2 + 1))
        for mid, f in zip(batch.id, batch.flow)
    }
    before, taken, after = cancelled_run(network)
    assert taken == sorted(taken) and {flow[mid] for mid in taken} == {1}
    assert all(t > AT_PS // 2 for t in after.values())
    late = [mid for mid, t in after.items() if flow[mid] == 1 and t > AT_PS]
    assert not late, f"flow 1 delivered after the cancel: {late}"
    assert set(taken).isdisjoint(before) and set(taken).isdisjoint(after)
    assert set(before) | set(after) | set(taken) == set(flow)
    assert {mid for mid in flow if flow[mid] == 2} <= set(before) | set(after)


def test_the_other_flow_arrives_no_later_than_without_the_cancel(
    network: NetworkBackend, open_backend: Callable[[str, str, str], Any], request: pytest.FixtureRequest
) -> None:
    name, mode = request.node.callspec.params["network"]
    before, _, after = cancelled_run(network)
    intact = open_backend("network", name, mode)
    intact.configure(_cancellable())
    intact.inject(two_flows(30, 0, 0))
    intact.inject(two_flows(10, 1_000, AT_PS // 2 + 1))
    whole = delivered(drain(intact))
    later = [(mid, t, whole[mid]) for mid, t in {**before, **after}.items() if t > whole[mid]]
    assert not later, f"(id, with the cancel, without) arriving later for the cancel: {later}"


@pytest.mark.parametrize("name", NAMES)
def test_in_process_and_remote_cancel_alike(name: str, open_backend: Callable[..., Any]) -> None:
    local = cancelled_run(open_backend("network", name, "in-process"))
    remote = cancelled_run(open_backend("network", name, "remote"))
    assert remote == local


@pytest.mark.parametrize("name", NAMES)
def test_a_cancel_before_the_committed_time_is_refused_alike(name: str, open_backend: Callable[..., Any]) -> None:
    messages = []
    for mode in MODES:
        network = open_backend("network", name, mode)
        network.configure(_cancellable())
        network.inject(two_flows(10, 0, 0))
        network.advance(10 * AT_PS)
        with pytest.raises(BackendError, match="before the network's committed time") as raised:
            network.cancel(1, AT_PS)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
