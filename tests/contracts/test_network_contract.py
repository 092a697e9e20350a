"""The network contract: every backend, in-process and through a real gRPC server, behaves the same way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import TopologyError
from stratasim.v1 import network_pb2
from tests.contracts.contract_fakes import backend_names

NAMES = backend_names("network")
MODES = ("in-process", "remote")
Dim = network_pb2.Dimension


def topology() -> network_pb2.Topology:
    """8 NPUs: a ring of 4 inside, a switch of 2 outside."""
    return network_pb2.Topology(
        dimensions=[
            Dim(kind=Dim.RING, size=4, bandwidth_bytes_per_s=50e9, latency_ps=500_000),
            Dim(kind=Dim.SWITCH, size=2, bandwidth_bytes_per_s=25e9, latency_ps=1_000_000),
        ]
    )


def sends(count: int, first_id: int, start_ps: int) -> network_pb2.SendBatch:
    """A deterministic mix: every NPU pair kind, sizes from 0 B to 1 MiB, ids not in send order, some ties."""
    batch = network_pb2.SendBatch()
    for i in range(count):
        src = (i * 3) % 8
        dst = (src + 1 + (i * 5) % 7) % 8
        batch.id.append(first_id + (count - i) * 7)
        batch.src.append(src)
        batch.dst.append(dst)
        batch.bytes.append([0, 1, 4096, 1 << 20][i % 4])
        batch.send_time_ps.append(start_ps + (i // 2) * 250_000)  # pairs share a send time
    # Two identical messages but for their ids: they arrive together and must come back in id order.
    batch.MergeFrom(
        network_pb2.SendBatch(
            id=[first_id + 3, first_id + 1], src=[0, 0], dst=[5, 5], bytes=[64, 64], send_time_ps=[start_ps, start_ps]
        )
    )
    return batch


def drain(network: NetworkBackend) -> list[network_pb2.AdvanceResult]:
    """Advance window by window (negative until_ps) until nothing is pending."""
    results = [network.advance(-1)]
    while results[-1].has_next:
        results.append(network.advance(-1))
        assert len(results) < 10_000, "the network never runs dry"
    return results


def scenario(network: NetworkBackend) -> list[Any]:
    """Configure, inject in several batches per window, mix fixed and next-window advances, drain."""
    info = network.configure(topology())
    out: list[Any] = [info.npus, info.lookahead_ps]
    network.inject(sends(20, 1_000, 0))
    network.inject(sends(10, 5_000, 100_000))
    out.append(network.advance(info.lookahead_ps - 1))
    out.append(network.advance(-1))
    end = out[-1].window_end_ps
    network.inject(sends(15, 9_000, end + 1))
    out.append(network.advance(end + 3 * info.lookahead_ps))
    return out + drain(network)


@pytest.fixture(params=[(name, mode) for name in NAMES for mode in MODES], ids="-".join)
def network(request: pytest.FixtureRequest, open_backend: Callable[[str, str, str], Any]) -> NetworkBackend:
    name, mode = request.param
    backend: NetworkBackend = open_backend("network", name, mode)
    return backend


def test_implements_the_protocol(network: NetworkBackend) -> None:
    assert isinstance(network, NetworkBackend)
    assert network.name


def test_configure_reports_npus_and_lookahead(network: NetworkBackend) -> None:
    info = network.configure(topology())
    assert info.npus == 4 * 2
    assert info.lookahead_ps >= 1


def test_every_send_is_delivered_once_in_order_and_not_too_early(network: NetworkBackend) -> None:
    lookahead = network.configure(topology()).lookahead_ps
    batch = sends(40, 0, 0)
    network.inject(batch)
    sent_at = dict(zip(batch.id, batch.send_time_ps))
    delivered: list[tuple[int, int]] = []
    previous_end = -1
    for result in drain(network):
        window = list(zip(result.deliveries.time_ps, result.deliveries.id))
        assert window == sorted(window), "deliveries of a window must be in (time, id) order"
        assert all(previous_end < t <= result.window_end_ps for t, _ in window)
        previous_end = result.window_end_ps
        delivered += window
    assert Counter(mid for _, mid in delivered) == Counter(batch.id)
    early = [(mid, t, sent_at[mid]) for t, mid in delivered if t < sent_at[mid] + lookahead]
    assert not early, f"(id, time, sent) delivered before send time + lookahead {lookahead} ps: {early}"
    assert delivered == sorted(delivered)


def test_fixed_windows_deliver_exactly_up_to_until(network: NetworkBackend) -> None:
    lookahead = network.configure(topology()).lookahead_ps
    batch = sends(24, 0, 0)
    network.inject(batch)
    until, seen = -1, 0
    while True:
        previous, until = until, until + lookahead
        result = network.advance(until)
        assert result.window_end_ps == until
        assert all(previous < t <= until for t in result.deliveries.time_ps)
        seen += len(result.deliveries.id)
        if not result.has_next:
            break
        assert result.next_event_ps > until
    assert seen == len(batch.id)


def test_advance_before_the_next_event_returns_nothing(network: NetworkBackend) -> None:
    lookahead = network.configure(topology()).lookahead_ps
    network.inject(network_pb2.SendBatch(id=[7], src=[0], dst=[5], bytes=[1000], send_time_ps=[1_000_000]))
    early = network.advance(1_000_000 + lookahead - 1)
    assert not early.deliveries.id
    assert early.has_next and early.next_event_ps > early.window_end_ps == 1_000_000 + lookahead - 1


def test_negative_until_runs_the_next_window(network: NetworkBackend) -> None:
    lookahead = network.configure(topology()).lookahead_ps
    network.inject(network_pb2.SendBatch(id=[7], src=[0], dst=[5], bytes=[1000], send_time_ps=[1_000_000]))
    probe = network.advance(999_999)
    assert probe.has_next and not probe.deliveries.id
    window = network.advance(-1)
    assert window.window_end_ps == probe.next_event_ps + lookahead - 1
    assert all(t <= window.window_end_ps for t in window.deliveries.time_ps)
    rest = drain(network) if window.has_next else []
    assert [i for r in [window, *rest] for i in r.deliveries.id] == [7]


@pytest.mark.parametrize("name", NAMES)
def test_in_process_and_remote_results_are_identical(name: str, open_backend: Callable[..., Any]) -> None:
    local = scenario(open_backend("network", name, "in-process"))
    remote = scenario(open_backend("network", name, "remote"))
    assert remote == local


def _invalid(change: Callable[[network_pb2.Topology], None]) -> network_pb2.Topology:
    bad = topology()
    change(bad)
    return bad


INVALID = {
    "size-0": lambda t: setattr(t.dimensions[1], "size", 0),
    "bandwidth-0": lambda t: setattr(t.dimensions[0], "bandwidth_bytes_per_s", 0.0),
    "kind-unspecified": lambda t: setattr(t.dimensions[1], "kind", Dim.KIND_UNSPECIFIED),
}


@pytest.mark.parametrize("case", sorted(INVALID))
@pytest.mark.parametrize("name", NAMES)
def test_invalid_topology_raises_the_same_topology_error(
    name: str, case: str, open_backend: Callable[..., Any]
) -> None:
    messages = []
    for mode in MODES:
        with pytest.raises(TopologyError) as raised:
            open_backend("network", name, mode).configure(_invalid(INVALID[case]))
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert messages[0]


def test_link_counters_are_columns_of_equal_length(network: NetworkBackend) -> None:
    network.configure(topology())
    network.inject(sends(20, 0, 0))
    for _ in drain(network):
        pass
    counters = network.counters()
    assert len(counters.link) == len(counters.busy_ps) == len(counters.bytes) == len(counters.messages)
    assert all(busy >= 0 for busy in counters.busy_ps)
