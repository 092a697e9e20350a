"""The generic gRPC client of the network contract: a :class:`NetworkBackend` forwarding to ``NetworkService``.

One bidirectional ``Session`` stream carries the whole simulation. ``inject`` only buffers (batches are merged
column by column) and the buffered sends travel with the next ``advance``, so a time window costs exactly one
round trip however many messages it holds. A server whose network prices messages on the spot is used through a
:class:`DirectNetworkClient` instead (:func:`open_network` picks): the engine then runs as with the network
in-process, with no windows, and asks for the transit times of the kinds of message not priced yet (one
``transit`` round trip per batch, packed columns).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from itertools import repeat
from typing import Any

import grpc
import numpy as np

from stratasim.kernel.errors import RemoteError
from stratasim.remote import _wire
from stratasim.remote.network_service import TRANSIT_CAPABILITY
from stratasim.remote.security import ClientSecurity
from stratasim.v1 import network_pb2, network_pb2_grpc

__all__ = ["DirectNetworkClient", "NetworkClient", "open_network"]

_LAYER = "network"
_INT64 = np.dtype("<i8")  # the packed columns of the transit request and its answer
_KEPT_KINDS = 1 << 20  # transit times kept at most, by kind of message (a few tens of MB)
_KEPT_BATCH_BYTES = 64 << 20  # whole batches kept at most (their sorted columns and transit times)
_CALLS = {"configured": "configure", "advanced": "advance", "transited": "transit", "cancelled": "cancel"}


class NetworkClient:
    """Runs the network backend named ``backend`` served at ``endpoint`` (``HOST:PORT``).

    Connecting and the handshake are bounded by ``connect_timeout_s``, every later answer by ``timeout_s``; any
    failure of the peer raises :class:`~stratasim.kernel.errors.RemoteError` naming the layer, the endpoint and the
    stage (connect, handshake, or the call). ``security``: the server's TLS root certificate and token. Errors the backend raises
    (e.g. :class:`~stratasim.kernel.errors.TopologyError`) come back as the same class with the same message; those
    of ``inject`` surface at the following ``advance``, which is when the sends reach the backend.
    """

    name: str

    def __init__(
        self,
        endpoint: str,
        *,
        backend: str,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        security: ClientSecurity | None = None,
    ) -> None:
        security = security or ClientSecurity()
        self._endpoint = endpoint
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._failure: str | None = None
        self._connected = False
        self._pending = network_pb2.NetworkRequest()
        self._channel = _wire.open_channel(endpoint, security)
        self._requests: queue.SimpleQueue[network_pb2.NetworkRequest | None] = queue.SimpleQueue()
        stub = network_pb2_grpc.NetworkServiceStub(self._channel)
        self._call = stub.Session(iter(self._requests.get, None), wait_for_ready=True, metadata=security.metadata())
        self._watchdog = _wire.Watchdog(timeout_s, self._call.cancel)
        try:
            reply = self._exchange(network_pb2.NetworkRequest(handshake=_wire.hello(_LAYER, backend)), "handshake")
            _wire.check_reply(reply.handshake, _LAYER, backend, endpoint)
        except BaseException:
            self.close()
            raise
        self._connected = True
        self.name = reply.handshake.backend
        self._can_transit = TRANSIT_CAPABILITY in reply.handshake.capabilities

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        """Build the remote network; its TopologyError is re-raised here unchanged."""
        return self._exchange(network_pb2.NetworkRequest(configure=topology), "configured").configured

    def inject(self, sends: network_pb2.SendBatch) -> None:
        """Buffer ``sends`` until the next ``advance`` (the columnar fields are extended, not copied per message;
        the flow column, which a batch may leave empty for all flow 0, is padded to one per message when batches
        mix)."""
        pending = self._pending.advance.sends
        if sends.flow and not pending.flow:
            pending.flow.extend(repeat(0, len(pending.id)))
        unflowed = bool(pending.flow) and not sends.flow
        pending.MergeFrom(sends)
        if unflowed:
            pending.flow.extend(repeat(0, len(sends.id)))

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        """Ship the buffered sends and run to ``until_ps`` (negative: the next window) in one round trip."""
        request = self._pending
        request.advance.until_ps = until_ps
        self._pending = network_pb2.NetworkRequest()
        return self._exchange(request, "advanced").advanced

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Ship the buffered sends and take ``flow``'s messages off the remote network at ``at_ps``, in one round
        trip."""
        request = network_pb2.NetworkRequest()
        request.cancel.sends.CopyFrom(self._pending.advance.sends)
        request.cancel.flow = flow
        request.cancel.at_ps = at_ps
        self._pending = network_pb2.NetworkRequest()
        return self._exchange(request, "cancelled").cancelled

    def _ask_transits(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """One ``transit`` round trip: the transit time of each message described by the columns."""
        request = network_pb2.NetworkRequest(
            transit=network_pb2.TransitRequest(
                src=src.astype(_INT64).tobytes(), dst=dst.astype(_INT64).tobytes(), bytes=sizes.astype(_INT64).tobytes()
            )
        )
        transits = np.frombuffer(self._exchange(request, "transited").transited.transit_ps, _INT64)
        if len(transits) != len(src):
            raise self._broken(
                f"{_LAYER} layer at {self._endpoint} broke the protocol: {len(transits)} transit "
                f"times for {len(src)} messages"
            )
        return transits.astype(np.int64)

    @property
    def prices_on_the_spot(self) -> bool:
        """Whether the server announced the ``transit`` capability: its network answers transit requests once
        configured stateless."""
        return self._can_transit

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
            raise self._fail(exc, expected) from None
        except StopIteration:
            raise self._fail(None, expected) from None
        finally:
            self._watchdog.disarm()
        kind = response.WhichOneof("kind")
        if kind == expected:
            return response
        if kind == "error":
            _wire.raise_error(response.error, _LAYER, self._endpoint, self._stage(expected))
        raise self._broken(f"{_LAYER} layer at {self._endpoint} broke the protocol: sent {kind} for {expected}")

    def _stage(self, expected: str) -> str:
        """The stage an exchange expecting ``expected`` is: the handshake, or a call (``call advance``, ...)."""
        return "handshake" if not self._connected else f"call {_CALLS.get(expected, expected)}"

    def _fail(self, exc: grpc.RpcError | None, expected: str) -> RemoteError:
        """The error for a stream that ended; every later call fails the same way, at once."""
        stage = self._stage(expected)
        if self._watchdog.fired:
            if self._connected:
                return self._broken(str(_wire.deadline_error(_LAYER, self._endpoint, self._timeout_s, stage)))
            why = _wire.unreachable_error(_LAYER, self._endpoint, self._connect_timeout_s, self._channel)
            return self._broken(str(why))
        if exc is None:
            return self._broken(_wire.staged(f"{_LAYER} layer at {self._endpoint} went away", stage))
        return self._broken(str(_wire.rpc_error(exc, _LAYER, self._endpoint, self._timeout_s, stage)))

    def _broken(self, message: str) -> RemoteError:
        """Remember that the session is unusable and why."""
        self._failure = message
        return RemoteError(message)


class DirectNetworkClient:
    """A :class:`NetworkClient` whose server prices messages on the spot (handshake capability ``transit``), as a
    :class:`~stratasim.kernel.contracts.DirectNetwork` too.

    When the network it configures is stateless, the engine then runs exactly as with that network in-process —
    arrivals scheduled as messages are sent, lock-step phases a line of NPUs at a time, repeated blocks run whole —
    and the server is asked only for the transit times of kinds of message never seen (one round trip per batch,
    :class:`_Transits`), so a spawned network costs about what an in-process one does. The times are the same: the
    server's backend computes them. A stateful network is run by windows, as :class:`NetworkClient` runs it.
    """

    name: str

    def __init__(self, client: NetworkClient) -> None:
        self._client = client
        self.name = client.name
        self._transits = _Transits(client._ask_transits)
        self._known = self._transits.known

    def transit_ps(self, src: int, dst: int, size: int) -> int:
        """Picoseconds from sending ``size`` bytes at ``src`` to their arrival at ``dst``: kept, or asked for."""
        known = self._known.get((src, dst, size))
        return self._transits.one(src, dst, size) if known is None else known

    def transits_ps(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """:meth:`transit_ps` of many messages (int64 columns), asking at most once, for the kinds never seen."""
        return self._transits.columns(src, dst, sizes)

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        """See :meth:`NetworkClient.configure`."""
        return self._client.configure(topology)

    def inject(self, sends: network_pb2.SendBatch) -> None:
        """See :meth:`NetworkClient.inject`."""
        self._client.inject(sends)

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        """See :meth:`NetworkClient.advance`."""
        return self._client.advance(until_ps)

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """See :meth:`NetworkClient.cancel`."""
        return self._client.cancel(flow, at_ps)

    def counters(self) -> network_pb2.LinkCounters:
        """See :meth:`NetworkClient.counters`."""
        return self._client.counters()

    def close(self) -> None:
        """See :meth:`NetworkClient.close`."""
        self._client.close()


def open_network(endpoint: str, *, backend: str, **options: Any) -> NetworkClient | DirectNetworkClient:
    """A session with the network ``backend`` served at ``endpoint`` (``options`` as :class:`NetworkClient` takes
    them): a :class:`DirectNetworkClient` when the server prices messages on the spot."""
    client = NetworkClient(endpoint, backend=backend, **options)
    return DirectNetworkClient(client) if client.prices_on_the_spot else client


class _Transits:
    """A stateless network's transit times, kept: its delays depend on a message's source, destination and size
    alone, so only a kind of message never seen costs a round trip (one for all of a batch's). A batch holding the
    same messages as an earlier one, in any order (each step of a collective sends what the step before did), is
    answered whole from its sorted columns, with no work per message."""

    def __init__(self, ask: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> None:
        self._ask = ask
        self.known: dict[tuple[int, int, int], int] = {}  # cleared, never replaced: a reference stays valid
        self._by_batch: dict[bytes, np.ndarray] = {}
        self._batch_bytes = 0

    def one(self, src: int, dst: int, size: int) -> int:
        """The transit time of one message (a round trip only if its kind was never seen)."""
        known = self.known.get((src, dst, size))
        if known is None:
            known = int(self._by_kinds([src], [dst], [size])[0])
        return known

    def columns(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """The transit time of each message the int64 columns describe, in their order."""
        order = np.lexsort((sizes, dst, src))
        columns = np.stack((src[order], dst[order], sizes[order]))
        batch = columns.tobytes()
        known = self._by_batch.get(batch)
        if known is None:
            known = self._by_kinds(*columns.tolist())
            self._batch_bytes += len(batch) + known.nbytes
            if self._batch_bytes > _KEPT_BATCH_BYTES:
                self._by_batch.clear()
                self._batch_bytes = len(batch) + known.nbytes
            self._by_batch[batch] = known
        transits = np.empty_like(known)
        transits[order] = known
        return transits

    def _by_kinds(self, src: list[int], dst: list[int], sizes: list[int]) -> np.ndarray:
        """Message by message from the kinds known, asking once for those never seen."""
        kinds = list(zip(src, dst, sizes))
        by_kind = self.known
        transits = list(map(by_kind.get, kinds))
        if None in transits:
            unseen = list(dict.fromkeys(kind for kind, transit in zip(kinds, transits) if transit is None))
            asked = self._ask(*(np.array(column, dtype=np.int64) for column in zip(*unseen)))
            if len(by_kind) + len(unseen) > _KEPT_KINDS:
                by_kind.clear()
            by_kind.update(zip(unseen, asked.tolist()))
            transits = [by_kind[kind] for kind in kinds]
        return np.array(transits, dtype=np.int64)
