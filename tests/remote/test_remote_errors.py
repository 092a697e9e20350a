"""Every failure of the wire is one RemoteError naming the layer and endpoint; backend errors keep their class."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from stratasim.kernel.contracts import PROTOCOL_VERSION
from stratasim.kernel.errors import BackendError, RemoteError, TopologyError, WorkloadError
from stratasim.remote import ComputeClient, NetworkClient, spawn
from stratasim.system_layer.engine.coordinator import Coordinator
from stratasim.v1 import common_pb2, compute_pb2, network_pb2, network_pb2_grpc
from tests.contracts.contract_fakes import FakeCompute, FakeNetwork, served
from tests.remote.helpers import refused_endpoint, serve_command, stub_server

OTHER_VERSION = PROTOCOL_VERSION + 98
TOPOLOGY = network_pb2.Topology(
    dimensions=[
        network_pb2.Dimension(kind=network_pb2.Dimension.RING, size=4, bandwidth_bytes_per_s=1e9, latency_ps=1000)
    ]
)


@pytest.mark.parametrize("client", [NetworkClient, ComputeClient])
def test_unreachable_endpoint_fails_within_the_timeout(client: type) -> None:
    with refused_endpoint() as endpoint, pytest.raises(RemoteError, match=f"layer at {endpoint} is unreachable"):
        started = time.monotonic()
        client(endpoint, backend="fake", connect_timeout_s=0.5)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("client", [NetworkClient, ComputeClient])
def test_unreachable_endpoint_fails_within_seconds_by_default(client: type) -> None:
    with refused_endpoint() as endpoint, pytest.raises(RemoteError, match=r"unreachable \(no handshake within 5 s\)"):
        started = time.monotonic()
        client(endpoint, backend="fake")
    assert time.monotonic() - started < 8


@pytest.mark.parametrize("layer", ["network", "compute"])
def test_server_of_another_protocol_version_is_refused(layer: str) -> None:
    patch = f"import stratasim.remote._wire as w; w.PROTOCOL_VERSION = {OTHER_VERSION}; "
    client = NetworkClient if layer == "network" else ComputeClient
    with spawn(layer, "fake", command=serve_command(layer, "fake", prelude=patch)) as endpoint:
        with pytest.raises(RemoteError) as raised:
            client(endpoint, backend="fake", timeout_s=5)
    message = str(raised.value)
    assert f"{layer} layer at {endpoint}" in message
    assert f"client speaks {PROTOCOL_VERSION}, server speaks {OTHER_VERSION}" in message


def test_server_answers_version_mismatch_with_a_structured_error(network_endpoint: str) -> None:
    with grpc.insecure_channel(network_endpoint) as channel:
        hello = common_pb2.Handshake(protocol_version=OTHER_VERSION, layer="network", backend="fake")
        (reply,) = network_pb2_grpc.NetworkServiceStub(channel).Session(
            iter([network_pb2.NetworkRequest(handshake=hello)]), timeout=5
        )
    assert reply.error.code == common_pb2.Error.VERSION_MISMATCH
    assert f"client speaks {OTHER_VERSION}, server speaks {PROTOCOL_VERSION}" in reply.error.message


class _OldNetwork(network_pb2_grpc.NetworkServiceServicer):
    """A server that skips the version check and answers with a handshake of its own version."""

    def Session(
        self, request_iterator: Iterator[network_pb2.NetworkRequest], context: object
    ) -> Iterator[network_pb2.NetworkResponse]:
        for _request in request_iterator:
            reply = common_pb2.Handshake(protocol_version=OTHER_VERSION, layer="network", backend="fake")
            yield network_pb2.NetworkResponse(handshake=reply)


def test_client_checks_the_version_the_server_answers_with() -> None:
    with stub_server(lambda s: network_pb2_grpc.add_NetworkServiceServicer_to_server(_OldNetwork(), s)) as ep:
        with pytest.raises(RemoteError, match=f"client speaks {PROTOCOL_VERSION}, server speaks {OTHER_VERSION}"):
            NetworkClient(ep, backend="fake", timeout_s=5)


def test_protocol_version_5_refuses_a_version_4_peer_either_way(network_endpoint: str) -> None:
    # Version 5 adds SendBatch.reductions (a switch that reduces), which a version 4 server would ignore silently
    # (each contribution taken for an ordinary message to its sender): the two cannot talk.
    assert PROTOCOL_VERSION == 5
    with grpc.insecure_channel(network_endpoint) as channel:
        hello = common_pb2.Handshake(protocol_version=4, layer="network", backend="fake")
        stream = network_pb2_grpc.NetworkServiceStub(channel).Session(
            iter([network_pb2.NetworkRequest(handshake=hello)]), timeout=5
        )
        reply = next(stream)
    assert reply.error.code == common_pb2.Error.Code.VERSION_MISMATCH
    assert reply.error.message == "protocol version mismatch: client speaks 4, server speaks 5"

    class _Version4(network_pb2_grpc.NetworkServiceServicer):
        def Session(self, request_iterator: Any, context: object) -> Any:  # noqa: N802
            next(request_iterator)
            yield network_pb2.NetworkResponse(
                handshake=common_pb2.Handshake(protocol_version=4, layer="network", backend="fake")
            )

    with stub_server(lambda s: network_pb2_grpc.add_NetworkServiceServicer_to_server(_Version4(), s)) as ep:
        with pytest.raises(RemoteError) as refused:
            NetworkClient(ep, backend="fake", timeout_s=5)
    assert str(refused.value) == (
        f"network layer at {ep}: protocol version mismatch: client speaks 5, server speaks 4 (stage: handshake)"
    )


def test_wrong_backend_name_is_refused(network_endpoint: str, compute_endpoint: str) -> None:
    with pytest.raises(RemoteError, match=f"network layer at {network_endpoint}: .*'flit'.*'fake'"):
        NetworkClient(network_endpoint, backend="flit", timeout_s=5)
    with pytest.raises(RemoteError, match=f"compute layer at {compute_endpoint}: .*'timeloop'.*'fake'"):
        ComputeClient(compute_endpoint, backend="timeloop", timeout_s=5)


def test_wrong_layer_is_refused(network_endpoint: str, compute_endpoint: str) -> None:
    with pytest.raises(RemoteError, match=f"compute layer at {network_endpoint}: .*not implement"):
        ComputeClient(network_endpoint, backend="fake", timeout_s=5)
    with pytest.raises(RemoteError, match=f"network layer at {compute_endpoint}: .*not implement"):
        NetworkClient(compute_endpoint, backend="fake", timeout_s=5)


class _FaultyNetwork(FakeNetwork):
    """Raises a StrataSim error for an empty advance window and a plain bug for a negative one."""

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        if until_ps == 0:
            raise WorkloadError("message 3 names NPU 9 of 4")
        if until_ps < 0:
            raise RuntimeError("boom")
        return super().advance(until_ps)


def test_backend_errors_keep_their_class_and_the_session_survives() -> None:
    with served("network", "faulty", {"faulty": _FaultyNetwork}) as endpoint:
        network = NetworkClient(endpoint, backend="faulty", timeout_s=5)
        try:
            with pytest.raises(TopologyError) as bad:
                network.configure(network_pb2.Topology())
            assert str(bad.value) == "topology.dimensions: the topology has no dimensions"
            assert network.configure(TOPOLOGY).npus == 4
            with pytest.raises(WorkloadError) as raised:
                network.advance(0)
            assert str(raised.value) == "message 3 names NPU 9 of 4"
            with pytest.raises(BackendError, match=f"network layer at {endpoint} failed: INTERNAL: RuntimeError: boom"):
                network.advance(-1)
            assert network.advance(10).window_end_ps == 10
        finally:
            network.close()


class _OlderContractNetwork:
    """A network written against the contract before version 4: everything but ``cancel``."""

    name = "older"

    def __init__(self) -> None:
        self._fake = FakeNetwork()
        self.configure, self.inject, self.advance = self._fake.configure, self._fake.inject, self._fake.advance
        self.counters, self.close = self._fake.counters, self._fake.close


def test_a_cancel_asked_of_a_backend_without_one_is_refused_naming_it() -> None:
    """In-process the engine says so; served, the server answers UNSUPPORTED and the session goes on."""
    expected = "network backend 'older' has no cancel (the network contract of protocol version 5)"
    with pytest.raises(BackendError, match=re.escape(expected)):
        Coordinator(_OlderContractNetwork(), 1).cancel(1)  # type: ignore[arg-type]
    with served("network", "older", {"older": _OlderContractNetwork}) as endpoint:
        network = NetworkClient(endpoint, backend="older", timeout_s=5)
        try:
            network.configure(TOPOLOGY)
            with pytest.raises(RemoteError, match=re.escape(expected) + r".*\(stage: call cancel\)"):
                network.cancel(1, 10)
            assert network.advance(10).window_end_ps == 10
        finally:
            network.close()


class _FaultyCompute(FakeCompute):
    """Raises a StrataSim error for one device and a plain bug for another."""

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        if request.device == "raises":
            raise BackendError("device 'raises' is out of order")
        if request.device == "bug":
            raise ZeroDivisionError("division by zero")
        return super().estimate(request)


def test_compute_backend_errors_keep_their_class() -> None:
    with served("compute", "faulty", {"faulty": _FaultyCompute}) as endpoint:
        compute = ComputeClient(endpoint, backend="faulty", timeout_s=5)
        try:
            with pytest.raises(BackendError) as raised:
                compute.estimate(compute_pb2.EstimateRequest(device="raises"))
            assert str(raised.value) == "device 'raises' is out of order"
            with pytest.raises(BackendError, match="INTERNAL: ZeroDivisionError: division by zero"):
                compute.estimate(compute_pb2.EstimateRequest(device="bug"))
            assert compute.estimate(compute_pb2.EstimateRequest(device="fake-npu")) == compute_pb2.EstimateResponse()
        finally:
            compute.close()


class _HangingNetwork(FakeNetwork):
    """Never answers an advance until the test releases it."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self._release = release

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        self._release.wait()
        return super().advance(until_ps)


class _HangingCompute(FakeCompute):
    """Never answers an estimate until the test releases it."""

    def __init__(self, release: threading.Event) -> None:
        self._release = release

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        self._release.wait()
        return super().estimate(request)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown, so a hung backend lets its server stop."""
    event = threading.Event()
    yield event
    event.set()


def test_a_hung_network_server_hits_the_deadline(release: threading.Event) -> None:
    with served("network", "hung", {"hung": lambda: _HangingNetwork(release)}) as endpoint:
        network = NetworkClient(endpoint, backend="hung", timeout_s=0.5)
        try:
            network.configure(TOPOLOGY)
            started = time.monotonic()
            with pytest.raises(RemoteError, match=f"network layer at {endpoint} did not answer within 0.5 s"):
                network.advance(-1)
            assert time.monotonic() - started < 3
            with pytest.raises(RemoteError, match="did not answer"):
                network.advance(-1)  # the session is over: fails at once
        finally:
            release.set()
            network.close()


def test_a_hung_compute_server_hits_the_deadline(release: threading.Event) -> None:
    with served("compute", "hung", {"hung": lambda: _HangingCompute(release)}) as endpoint:
        compute = ComputeClient(endpoint, backend="hung", timeout_s=0.5)
        try:
            started = time.monotonic()
            with pytest.raises(RemoteError, match=f"compute layer at {endpoint} did not answer within 0.5 s"):
                compute.estimate(compute_pb2.EstimateRequest(device="fake-npu"))
            assert time.monotonic() - started < 3
        finally:
            release.set()
            compute.close()


def test_a_server_killed_mid_session_is_reported_at_once() -> None:
    with spawn("network", "crashing", command=serve_command("network", "crashing")) as endpoint:
        network = NetworkClient(endpoint, backend="crashing", timeout_s=10)
        try:
            network.configure(TOPOLOGY)
            network.advance(100)
            started = time.monotonic()
            with pytest.raises(RemoteError, match=rf"^network layer at {endpoint} went away \(stage: call advance\)$"):
                network.advance(200)  # the server SIGKILLs itself here
            with pytest.raises(RemoteError, match="went away"):
                network.advance(300)
            assert time.monotonic() - started < 3
        finally:
            network.close()


def test_a_server_stopped_mid_session_is_reported_at_once() -> None:
    with served("network", "fake", {"fake": FakeNetwork}) as endpoint:
        network = NetworkClient(endpoint, backend="fake", timeout_s=10)
        network.configure(TOPOLOGY)
    try:
        started = time.monotonic()
        with pytest.raises(RemoteError, match=f"network layer at {endpoint} went away"):
            network.advance(-1)
        assert time.monotonic() - started < 3
    finally:
        network.close()


def test_a_closed_client_refuses_calls(network_endpoint: str, compute_endpoint: str) -> None:
    network = NetworkClient(network_endpoint, backend="fake", timeout_s=5)
    network.close()
    network.close()
    with pytest.raises(RemoteError, match="closed"):
        network.configure(TOPOLOGY)
    compute = ComputeClient(compute_endpoint, backend="fake", timeout_s=5)
    compute.close()
    compute.close()
    with pytest.raises(RemoteError):
        compute.estimate(compute_pb2.EstimateRequest(device="fake-npu"))
