"""A stateless network served remotely prices a batch of sends in one ``transit`` round trip, and a client with
``deliver_ahead`` hands the engine every arrival at once: the same (time, id) pairs the windows give."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import BackendError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.remote import NetworkClient
from stratasim.remote.network_service import TRANSIT_CAPABILITY
from stratasim.v1 import network_pb2
from tests.contracts.contract_fakes import factories, served
from tests.contracts.test_network_contract import sends, topology


@pytest.fixture(scope="module")
def analytical_endpoint() -> Iterator[str]:
    with served("network", "analytical") as endpoint:
        yield endpoint


def _pairs(results: list[network_pb2.AdvanceResult]) -> list[tuple[int, int]]:
    return sorted((t, i) for r in results for t, i in zip(r.deliveries.time_ps, r.deliveries.id))


def _windows(network: NetworkBackend, batch: network_pb2.SendBatch) -> list[network_pb2.AdvanceResult]:
    """Inject ``batch`` and advance window by window until nothing is pending."""
    network.inject(batch)
    results = [network.advance(-1)]
    while results[-1].has_next:
        results.append(network.advance(-1))
    return results


def test_one_advance_returns_every_arrival_the_windows_would_give(analytical_endpoint: str) -> None:
    local = AnalyticalNetwork()
    info = local.configure(topology())
    expected = _pairs(_windows(local, sends(40, 1_000, 0)))
    client = NetworkClient(analytical_endpoint, backend="analytical", deliver_ahead=True)
    try:
        assert client.configure(topology()) == info
        client.inject(sends(40, 1_000, 0))
        result = client.advance(info.lookahead_ps - 1)
    finally:
        client.close()
    got = list(zip(result.deliveries.time_ps, result.deliveries.id))
    assert got == expected  # all of them, later ones included, in (time, id) order
    assert not result.has_next and result.window_end_ps == info.lookahead_ps - 1


def test_asked_for_the_next_window_it_ends_a_lookahead_after_the_first_arrival(analytical_endpoint: str) -> None:
    client = NetworkClient(analytical_endpoint, backend="analytical", deliver_ahead=True)
    try:
        lookahead = client.configure(topology()).lookahead_ps
        client.inject(sends(8, 0, 0))
        result = client.advance(-1)
        assert result.window_end_ps == result.deliveries.time_ps[0] + lookahead - 1
        assert client.advance(-1) == network_pb2.AdvanceResult(window_end_ps=result.window_end_ps)  # nothing sent
    finally:
        client.close()


def test_a_message_kind_seen_before_costs_no_round_trip(
    analytical_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = NetworkClient(analytical_endpoint, backend="analytical", deliver_ahead=True)
    asked: list[str] = []
    exchange = client._exchange

    def counted(request: network_pb2.NetworkRequest, expected: str) -> network_pb2.NetworkResponse:
        asked.append(expected)
        return exchange(request, expected)

    monkeypatch.setattr(client, "_exchange", counted)
    try:
        client.configure(topology())
        batch = network_pb2.SendBatch(id=[1, 2], src=[0, 0], dst=[5, 5], bytes=[64, 64], send_time_ps=[0, 0])
        client.inject(batch)
        first = client.advance(-1)
        client.inject(network_pb2.SendBatch(id=[3], src=[0], dst=[5], bytes=[64], send_time_ps=[10_000_000]))
        second = client.advance(-1)
    finally:
        client.close()
    assert asked == ["configured", "transited"]  # one transit for the one kind, asked once
    assert second.deliveries.time_ps[0] - 10_000_000 == first.deliveries.time_ps[0]


def test_a_network_that_cannot_price_on_the_spot_keeps_the_windows() -> None:
    with served("network", "fake", factories("network")) as endpoint:
        local = factories("network")["fake"]()
        local.configure(topology())
        expected = _windows(local, sends(20, 0, 0))
        client = NetworkClient(endpoint, backend="fake", deliver_ahead=True)
        try:
            client.configure(topology())
            assert _windows(client, sends(20, 0, 0)) == expected
        finally:
            client.close()


def test_the_server_announces_transit_only_for_a_network_that_prices_on_the_spot(analytical_endpoint: str) -> None:
    from stratasim.remote import _wire
    from stratasim.v1 import network_pb2_grpc

    with served("network", "fake", factories("network")) as fake_endpoint:
        for endpoint, backend, capable in ((analytical_endpoint, "analytical", True), (fake_endpoint, "fake", False)):
            channel = _wire.open_channel(endpoint)
            try:
                stub = network_pb2_grpc.NetworkServiceStub(channel)
                hello = network_pb2.NetworkRequest(handshake=_wire.hello("network", backend))
                reply = next(stub.Session(iter([hello]), timeout=10))
                assert (TRANSIT_CAPABILITY in reply.handshake.capabilities) is capable
            finally:
                channel.close()


def _transit(endpoint: str, backend: str, request: network_pb2.TransitRequest) -> network_pb2.NetworkResponse:
    """Handshake, configure, one transit request: the server's answer to the last."""
    from stratasim.remote import _wire
    from stratasim.v1 import network_pb2_grpc

    channel = _wire.open_channel(endpoint)
    try:
        stub = network_pb2_grpc.NetworkServiceStub(channel)
        requests = [network_pb2.NetworkRequest(handshake=_wire.hello("network", backend)),
                    network_pb2.NetworkRequest(configure=topology()),
                    network_pb2.NetworkRequest(transit=request)]  # fmt: skip
        return list(stub.Session(iter(requests), timeout=10))[-1]
    finally:
        channel.close()


def _packed(*values: int) -> bytes:
    return np.array(values, dtype="<i8").tobytes()


def test_transit_answers_what_transit_ps_gives_message_by_message(analytical_endpoint: str) -> None:
    local = AnalyticalNetwork()
    local.configure(topology())
    src, dst, size = (0, 3, 7, 2), (5, 1, 0, 6), (0, 64, 1 << 20, 4096)
    answer = _transit(analytical_endpoint, "analytical",
                      network_pb2.TransitRequest(src=_packed(*src), dst=_packed(*dst), bytes=_packed(*size)))  # fmt: skip
    got = np.frombuffer(answer.transited.transit_ps, dtype="<i8").tolist()
    assert got == [local.transit_ps(s, d, b) for s, d, b in zip(src, dst, size)]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (network_pb2.TransitRequest(src=_packed(0, 1), dst=_packed(1), bytes=_packed(8, 8)), "packed int64 columns"),
        (network_pb2.TransitRequest(src=b"\0\0\0", dst=b"\0\0\0", bytes=b"\0\0\0"), "packed int64 columns"),
        (network_pb2.TransitRequest(src=_packed(0), dst=_packed(8), bytes=_packed(8)), "from NPU 0 to NPU 8"),
    ],
    ids=["ragged", "not-int64", "outside"],
)
def test_a_bad_transit_request_gets_one_clear_error(
    analytical_endpoint: str, request_: network_pb2.TransitRequest, message: str
) -> None:
    answer = _transit(analytical_endpoint, "analytical", request_)
    assert answer.WhichOneof("kind") == "error" and message in answer.error.message
    assert answer.error.raised == BackendError.__name__


def test_transit_is_refused_by_a_network_that_cannot_price_on_the_spot() -> None:
    with served("network", "fake", factories("network")) as endpoint:
        request = network_pb2.TransitRequest(src=_packed(0), dst=_packed(1), bytes=_packed(8))
        answer = _transit(endpoint, "fake", request)
    assert answer.WhichOneof("kind") == "error"
    assert "cannot price messages on the spot" in answer.error.message


def test_a_batch_sent_again_arrives_as_it_did_shifted_by_the_send_time(analytical_endpoint: str) -> None:
    local = AnalyticalNetwork()
    local.configure(topology())
    client = NetworkClient(analytical_endpoint, backend="analytical", deliver_ahead=True)
    try:
        client.configure(topology())
        results = []
        for step, start_ps in enumerate((0, 50_000_000, 90_000_000)):  # the same columns each step, later ids
            batch = sends(12, 1_000 * (step + 1), start_ps)
            expected = [(sent + local.transit_ps(s, d, b), i) for i, s, d, b, sent in
                        zip(batch.id, batch.src, batch.dst, batch.bytes, batch.send_time_ps)]  # fmt: skip
            client.inject(batch)
            result = client.advance(-1)
            results.append(list(zip(result.deliveries.time_ps, result.deliveries.id)) == sorted(expected))
    finally:
        client.close()
    assert results == [True, True, True]
