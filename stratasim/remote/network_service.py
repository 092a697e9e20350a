"""The generic gRPC servicer of the network contract: any :class:`NetworkBackend` behind ``NetworkService``.

One ``Session`` stream is one simulation: the client's handshake, then ``configure`` and one ``advance`` per
time window (carrying the window's sends), and a ``cancel`` (carrying the sends buffered since) when a job fails.
Each session gets a fresh backend from the factory, so one server serves any number of sequential (or concurrent)
runs, and closes it when the stream ends.

A backend that prices messages on the spot (:class:`~stratasim.kernel.contracts.DirectNetwork`) is announced with
the handshake capability :data:`TRANSIT_CAPABILITY`; once configured stateless, it answers ``transit`` requests:
the transit time of every message of a batch, packed columns in and out, as an in-process engine would ask.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import grpc
import numpy as np

from stratasim.kernel.contracts import PROTOCOL_VERSION, DirectNetwork, NetworkBackend
from stratasim.kernel.errors import BackendError
from stratasim.remote import _wire
from stratasim.remote.limits import Limits, SessionSlots, Ticket, check_topology
from stratasim.v1 import common_pb2, network_pb2, network_pb2_grpc

__all__ = ["TRANSIT_CAPABILITY", "NetworkServicer"]

TRANSIT_CAPABILITY = "transit"
_LAYER = "network"
_INT64 = np.dtype("<i8")  # the packed columns of TransitRequest and TransitResult
_Code = common_pb2.Error.Code


class NetworkServicer(network_pb2_grpc.NetworkServiceServicer):
    """Serves the backend registered as ``backend``; ``factory()`` builds one instance per session, within
    ``limits``: at most ``max_sessions`` at once (one idle for longer than ``idle_timeout_s`` gives its place to a
    new client), each topology checked for size before the backend sees it."""

    def __init__(self, backend: str, factory: Callable[[], NetworkBackend], limits: Limits | None = None) -> None:
        self._backend = backend
        self._factory = factory
        self._limits = limits or Limits()
        self._slots = SessionSlots(self._limits.max_sessions, self._limits.idle_timeout_s)

    def Session(  # noqa: N802 - the name is fixed by the generated servicer
        self,
        request_iterator: Iterator[network_pb2.NetworkRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[network_pb2.NetworkResponse]:
        """Handshake first; then answer every configure or advance with exactly one response. A session beyond the
        limit is refused (RESOURCE_EXHAUSTED) unless a session idle for longer than the idle timeout gives it its
        place (that session is cancelled)."""
        ticket = self._slots.take(context.cancel)
        if ticket is None:
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"server busy: all {self._slots.limit} sessions are in use and none has been idle for "
                f"{self._limits.idle_timeout_s:g} s (its --max-sessions, --idle-timeout); "
                "try again later",
            )
            return
        try:
            yield from self._session(_watched(request_iterator, ticket))
        finally:
            self._slots.give_back(ticket)

    def _session(self, request_iterator: Iterator[network_pb2.NetworkRequest]) -> Iterator[network_pb2.NetworkResponse]:
        first = next(request_iterator, None)
        if first is None:
            return
        problem = _hello_problem(first, self._backend)
        if problem is not None:
            yield network_pb2.NetworkResponse(error=problem)
            return
        try:
            backend = self._factory()
        except Exception as exc:  # the backend's own failure goes back to the client, not into grpc's logs
            yield network_pb2.NetworkResponse(error=_wire.error_from_exception(exc))
            return
        session = _Session(backend, self._limits)
        try:
            yield network_pb2.NetworkResponse(handshake=_wire.hello(_LAYER, self._backend, session.capabilities))
            for request in request_iterator:
                yield session.answer(request)
        finally:
            backend.close()


def _watched(requests: Iterator[network_pb2.NetworkRequest], ticket: Ticket) -> Iterator[network_pb2.NetworkRequest]:
    """``requests``, the ``ticket`` saying since when the session waits for each (idle), none while it is answered."""
    while True:
        ticket.idle_since = time.monotonic()
        request = next(requests, None)
        ticket.idle_since = None
        if request is None:
            return
        yield request


def _hello_problem(request: network_pb2.NetworkRequest, backend: str) -> common_pb2.Error | None:
    """Why the session's first message is not an acceptable handshake, or None."""
    if request.WhichOneof("kind") != "handshake":
        return common_pb2.Error(
            code=common_pb2.Error.Code.FAILED_PRECONDITION, message="a session must begin with a handshake"
        )
    return _wire.check_hello(request.handshake, _LAYER, backend)


class _Session:
    """One session's backend, and whether it may answer ``transit`` requests (a stateless direct network)."""

    def __init__(self, backend: NetworkBackend, limits: Limits) -> None:
        self._backend = backend
        self._limits = limits
        self._direct = backend if isinstance(backend, DirectNetwork) else None
        self._stateless = False
        self.capabilities = [TRANSIT_CAPABILITY] if self._direct is not None else []

    def answer(self, request: network_pb2.NetworkRequest) -> network_pb2.NetworkResponse:
        """Run one request against the backend; its exceptions become a structured error response."""
        backend = self._backend
        kind = request.WhichOneof("kind")
        try:
            if kind == "advance":
                advance = request.advance
                if advance.sends.id:
                    _check_columns(advance.sends)
                    backend.inject(advance.sends)
                return network_pb2.NetworkResponse(advanced=backend.advance(advance.until_ps))
            if kind == "transit":
                return network_pb2.NetworkResponse(transited=self._transit(request.transit))
            if kind == "cancel":
                if not callable(getattr(backend, "cancel", None)):
                    return network_pb2.NetworkResponse(error=_no_cancel(backend))
                cancel = request.cancel
                if cancel.sends.id:
                    _check_columns(cancel.sends)
                    backend.inject(cancel.sends)
                return network_pb2.NetworkResponse(cancelled=backend.cancel(cancel.flow, cancel.at_ps))
            if kind == "configure":
                check_topology(request.configure, self._limits)
                info = backend.configure(request.configure)
                self._stateless = info.stateless
                return network_pb2.NetworkResponse(configured=info)
            if kind == "counters":
                return network_pb2.NetworkResponse(counters=backend.counters())
        except Exception as exc:
            return network_pb2.NetworkResponse(error=_wire.error_from_exception(exc))
        return network_pb2.NetworkResponse(
            error=common_pb2.Error(
                code=_Code.FAILED_PRECONDITION, message=f"unexpected {kind or 'empty'} request mid-session"
            )
        )

    def _transit(self, request: network_pb2.TransitRequest) -> network_pb2.TransitResult:
        """Every message's transit time, from the packed columns of the request."""
        if self._direct is None or not self._stateless:
            raise BackendError(
                "transit asked of a network that cannot price messages on the spot (it is not stateless)"
            )
        columns = [request.src, request.dst, request.bytes]
        if any(len(column) % _INT64.itemsize for column in columns) or len({len(column) for column in columns}) != 1:
            raise BackendError("transit: src, dst and bytes must be packed int64 columns of one length")
        src, dst, sizes = (np.frombuffer(column, dtype=_INT64) for column in columns)
        transits = self._direct.transits_ps(src, dst, sizes)
        return network_pb2.TransitResult(transit_ps=np.asarray(transits, dtype=_INT64).tobytes())


def _no_cancel(backend: NetworkBackend) -> common_pb2.Error:
    """The error for a cancel asked of a backend written against an older network contract."""
    return common_pb2.Error(
        code=_Code.UNSUPPORTED,
        message=f"network backend {backend.name!r} has no cancel (the network contract of protocol version "
        f"{PROTOCOL_VERSION}): it cannot take a failed job's messages off the network",
    )


def _check_columns(sends: network_pb2.SendBatch) -> None:
    """A batch whose columns describe the same messages: one length for all (``flow`` may be left empty)."""
    lengths = {
        "id": len(sends.id),
        "src": len(sends.src),
        "dst": len(sends.dst),
        "bytes": len(sends.bytes),
        "send_time_ps": len(sends.send_time_ps),
    }
    if sends.flow:
        lengths["flow"] = len(sends.flow)
    if len(set(lengths.values())) != 1:
        said = ", ".join(f"{name} {length}" for name, length in lengths.items())
        raise BackendError(
            f"advance: a SendBatch's columns must describe the same messages, one length each; got {said}"
        )
