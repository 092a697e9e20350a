"""A stateless network served remotely prices a batch of sends in one ``transit`` round trip, with the times it gives
in-process; a network that cannot is run by windows."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import BackendError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.remote import DirectNetworkClient, NetworkClient, open_network
from stratasim.remote.network_service import TRANSIT_CAPABILITY
from stratasim.v1 import network_pb2
from tests.contracts.contract_fakes import factories, served
from tests.contracts.test_network_contract import sends, topology


@pytest.fixture(scope="module")
def analytical_endpoint() -> Iterator[str]:
    with served("network", "analytical") as endpoint:
        yield endpoint


def _windows(network: NetworkBackend, batch: network_pb2.SendBatch) -> list[network_pb2.AdvanceResult]:
    """Inject ``batch`` and advance window by window until nothing is pending."""
    network.inject(batch)
    results = [network.advance(-1)]
    while results[-1].has_next:
        results.append(network.advance(-1))
    return results


def test_a_network_that_cannot_price_on_the_spot_keeps_the_windows() -> None:
    with served("network", "fake", factories("network")) as endpoint:
        local = factories("network")["fake"]()
        local.configure(topology())
        expected = _windows(local, sends(20, 0, 0))
        client = open_network(endpoint, backend="fake")
        try:
            assert type(client) is NetworkClient
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
        requests = [
            network_pb2.NetworkRequest(handshake=_wire.hello("network", backend)),
            network_pb2.NetworkRequest(configure=topology()),
            network_pb2.NetworkRequest(transit=request),
        ]
        return list(stub.Session(iter(requests), timeout=10))[-1]
    finally:
        channel.close()


def _packed(*values: int) -> bytes:
    return np.array(values, dtype="<i8").tobytes()


def test_transit_answers_what_transit_ps_gives_message_by_message(analytical_endpoint: str) -> None:
    local = AnalyticalNetwork()
    local.configure(topology())
    src, dst, size = (0, 3, 7, 2), (5, 1, 0, 6), (0, 64, 1 << 20, 4096)
    answer = _transit(
        analytical_endpoint,
        "analytical",
        network_pb2.TransitRequest(src=_packed(*src), dst=_packed(*dst), bytes=_packed(*size)),
    )
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


def test_a_batch_asked_again_in_any_order_is_answered_without_a_round_trip(
    analytical_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = AnalyticalNetwork()
    local.configure(topology())
    client = open_network(analytical_endpoint, backend="analytical")
    assert isinstance(client, DirectNetworkClient)
    asked: list[str] = []
    exchange = client._client._exchange

    def counted(request: network_pb2.NetworkRequest, expected: str) -> network_pb2.NetworkResponse:
        asked.append(expected)
        return exchange(request, expected)

    monkeypatch.setattr(client._client, "_exchange", counted)
    batch = sends(12, 1_000, 0)
    src, dst, size = (np.array(column, dtype=np.int64) for column in (batch.src, batch.dst, batch.bytes))
    expected = [local.transit_ps(s, d, b) for s, d, b in zip(batch.src, batch.dst, batch.bytes)]
    try:
        client.configure(topology())
        first = client.transits_ps(src, dst, size).tolist()
        order = np.arange(len(src))[::-1]
        again = client.transits_ps(src[order], dst[order], size[order]).tolist()
    finally:
        client.close()
    assert first == expected and again == [expected[i] for i in order]
    assert asked == ["configured", "transited"]
