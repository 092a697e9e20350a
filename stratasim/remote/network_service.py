"""The generic gRPC servicer of the network contract: any :class:`NetworkBackend` behind ``NetworkService``.

One ``Session`` stream is one simulation: the client's handshake, then ``configure`` and one ``advance`` per
time window (carrying the window's sends). Each session gets a fresh backend from the factory, so one server
serves any number of sequential (or concurrent) runs, and closes it when the stream ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc

from stratasim.kernel.contracts import NetworkBackend
from stratasim.remote import _wire
from stratasim.v1 import common_pb2, network_pb2, network_pb2_grpc

__all__ = ["NetworkServicer"]

_LAYER = "network"


class NetworkServicer(network_pb2_grpc.NetworkServiceServicer):
    """Serves the backend registered as ``backend``; ``factory()`` builds one instance per session."""

    def __init__(self, backend: str, factory: Callable[[], NetworkBackend]) -> None:
        self._backend = backend
        self._factory = factory

    def Session(  # noqa: N802 - the name is fixed by the generated servicer
        self,
        request_iterator: Iterator[network_pb2.NetworkRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[network_pb2.NetworkResponse]:
        """Handshake first; then answer every configure or advance with exactly one response."""
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
        try:
            yield network_pb2.NetworkResponse(handshake=_wire.hello(_LAYER, self._backend))
            for request in request_iterator:
                yield _answer(backend, request)
        finally:
            backend.close()


def _hello_problem(request: network_pb2.NetworkRequest, backend: str) -> common_pb2.Error | None:
    """Why the session's first message is not an acceptable handshake, or None."""
    if request.WhichOneof("kind") != "handshake":
        return common_pb2.Error(
            code=common_pb2.Error.Code.FAILED_PRECONDITION, message="a session must begin with a handshake"
        )
    return _wire.check_hello(request.handshake, _LAYER, backend)


def _answer(backend: NetworkBackend, request: network_pb2.NetworkRequest) -> network_pb2.NetworkResponse:
    """Run one request against the backend; its exceptions become a structured error response."""
    kind = request.WhichOneof("kind")
    try:
        if kind == "advance":
            advance = request.advance
            if advance.sends.id:
                backend.inject(advance.sends)
            return network_pb2.NetworkResponse(advanced=backend.advance(advance.until_ps))
        if kind == "configure":
            return network_pb2.NetworkResponse(configured=backend.configure(request.configure))
        if kind == "counters":
            return network_pb2.NetworkResponse(counters=backend.counters())
    except Exception as exc:
        return network_pb2.NetworkResponse(error=_wire.error_from_exception(exc))
    return network_pb2.NetworkResponse(
        error=common_pb2.Error(
            code=common_pb2.Error.Code.FAILED_PRECONDITION, message=f"unexpected {kind or 'empty'} request mid-session"
        )
    )
