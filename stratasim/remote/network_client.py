"""The generic gRPC client of the network contract: a :class:`NetworkBackend` forwarding to ``NetworkService``.

One bidirectional ``Session`` stream carries the whole simulation. ``inject`` only buffers (batches are merged
column by column) and the buffered sends travel with the next ``advance``, so a time window costs exactly one
round trip however many messages it holds.
"""

from __future__ import annotations

import queue

import grpc

from stratasim.kernel.errors import RemoteError
from stratasim.remote import _wire
from stratasim.v1 import network_pb2, network_pb2_grpc

__all__ = ["NetworkClient"]

_LAYER = "network"


class NetworkClient:
    """Runs the network backend named ``backend`` served at ``endpoint`` (``HOST:PORT``).

    Connecting and the handshake are bounded by ``connect_timeout_s``, every later answer by ``timeout_s``; any
    failure of the peer
    raises :class:`~stratasim.kernel.errors.RemoteError` naming the layer and the endpoint. Errors the backend raises
    (e.g. :class:`~stratasim.kernel.errors.TopologyError`) come back as the same class with the same message; those
    of ``inject`` surface at the following ``advance``, which is when the sends reach the backend.
    """

    name: str

    def __init__(
        self, endpoint: str, *, backend: str, timeout_s: float = 30.0, connect_timeout_s: float = 5.0
    ) -> None:
        self._endpoint = endpoint
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._failure: str | None = None
        self._connected = False
        self._pending = network_pb2.NetworkRequest()
        self._channel = _wire.open_channel(endpoint)
        self._requests: queue.SimpleQueue[network_pb2.NetworkRequest | None] = queue.SimpleQueue()
        stub = network_pb2_grpc.NetworkServiceStub(self._channel)
        self._call = stub.Session(iter(self._requests.get, None), wait_for_ready=True)
        self._watchdog = _wire.Watchdog(timeout_s, self._call.cancel)
        try:
            reply = self._exchange(network_pb2.NetworkRequest(handshake=_wire.hello(_LAYER, backend)), "handshake")
            _wire.check_reply(reply.handshake, _LAYER, backend, endpoint)
        except BaseException:
            self.close()
            raise
        self._connected = True
        self.name = reply.handshake.backend

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        """Build the remote network; its TopologyError is re-raised here unchanged."""
        return self._exchange(network_pb2.NetworkRequest(configure=topology), "configured").configured

    def inject(self, sends: network_pb2.SendBatch) -> None:
        """Buffer ``sends`` until the next ``advance`` (the columnar fields are extended, not copied per message)."""
        self._pending.advance.sends.MergeFrom(sends)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        """Ship the buffered sends and run to ``until_ps`` (negative: the next window) in one round trip."""
        request = self._pending
        request.advance.until_ps = until_ps
        self._pending = network_pb2.NetworkRequest()
        return self._exchange(request, "advanced").advanced

    def counters(self) -> network_pb2.LinkCounters:
        """The remote network's link counters, in one round trip."""
        request = network_pb2.NetworkRequest(counters=network_pb2.CountersRequest())
        return self._exchange(request, "counters").counters

    def close(self) -> None:
        """End the session (the server closes its backend) and the channel; safe to call more than once."""
        if self._failure is None:
            self._failure = f"{_LAYER} layer at {self._endpoint}: client is closed"
        self._requests.put(None)
        self._watchdog.stop()
        self._channel.close()

    def _exchange(self, request: network_pb2.NetworkRequest, expected: str) -> network_pb2.NetworkResponse:
        """Send one request and read its one response within the deadline, mapping every failure."""
        if self._failure is not None:
            raise RemoteError(self._failure)
        self._requests.put(request)
        self._watchdog.arm(None if self._connected else self._connect_timeout_s)
        try:
            response: network_pb2.NetworkResponse = next(self._call)
        except grpc.RpcError as exc:
            raise self._fail(exc) from None
        except StopIteration:
            raise self._fail(None) from None
        finally:
            self._watchdog.disarm()
        kind = response.WhichOneof("kind")
        if kind == expected:
            return response
        if kind == "error":
            _wire.raise_error(response.error, _LAYER, self._endpoint)
        raise self._broken(f"{_LAYER} layer at {self._endpoint} broke the protocol: sent {kind} for {expected}")

    def _fail(self, exc: grpc.RpcError | None) -> RemoteError:
        """The error for a stream that ended; every later call fails the same way, at once."""
        if self._watchdog.fired:
            if self._connected:
                return self._broken(str(_wire.deadline_error(_LAYER, self._endpoint, self._timeout_s)))
            return self._broken(str(_wire.unreachable_error(_LAYER, self._endpoint, self._connect_timeout_s)))
        if exc is None:
            return self._broken(f"{_LAYER} layer at {self._endpoint} went away")
        return self._broken(str(_wire.rpc_error(exc, _LAYER, self._endpoint, self._timeout_s)))

    def _broken(self, message: str) -> RemoteError:
        """Remember that the session is unusable and why."""
        self._failure = message
        return RemoteError(message)
