"""Running one layer as a gRPC server in this process: what ``stratasim serve <layer> --backend NAME --listen
ENDPOINT`` runs (:mod:`stratasim.remote.launch` starts that command as a child process).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol, cast

import grpc

from stratasim.kernel import registry
from stratasim.kernel.errors import BackendError, RemoteError
from stratasim.remote import _wire
from stratasim.remote.compute_service import ComputeServicer
from stratasim.remote.limits import Limits
from stratasim.remote.network_service import NetworkServicer
from stratasim.remote.security import ServerSecurity, warn_if_exposed
from stratasim.remote.serving_oracle import StudyOpener
from stratasim.remote.serving_service import ServingServicer
from stratasim.v1 import compute_pb2_grpc, network_pb2_grpc, serving_pb2_grpc

__all__ = ["serve"]

# A network session holds a worker thread for its whole run (at most Limits.max_sessions of them); these few more
# answer compute calls and refuse sessions beyond the limit, at once, instead of queueing them behind sessions that
# may last hours.
_SPARE_WORKERS = 4
_STOP_GRACE_S = 1.0
_SIGNAL_POLL_S = 0.02
_UNIX = "unix:"


def _grpc_server(layers: Sequence[str], security: ServerSecurity, limits: Limits) -> grpc.Server:
    """A gRPC server with a worker per session allowed (and spares), the request size limit and the security
    interceptors."""
    workers = limits.max_sessions + _SPARE_WORKERS
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"stratasim-{'-'.join(layers)}"),
        options=_wire.channel_options(receive_bytes=limits.max_request_bytes),
        maximum_concurrent_rpcs=workers,
        interceptors=security.interceptors(),
    )


def serve(
    layer: str,
    backend: str,
    listen: str,
    *,
    ready: Callable[[str], None] | None = None,
    factories: Mapping[str, Callable[[], Any]] | None = None,
    stop: threading.Event | None = None,
    also: Sequence[tuple[str, str]] = (),
    security: ServerSecurity | None = None,
    limits: Limits | None = None,
    study_root: Path | None = None,
) -> None:
    """Serve ``layer`` with the registered ``backend`` on ``listen`` (``127.0.0.1:0`` picks a free port), and each
    ``(layer, backend)`` of ``also`` on the same endpoint: one process and one socket for a run's network and
    compute layers, each layer at most once.

    Once listening, prints ``listening on HOST:PORT`` (flushed) and calls ``ready(endpoint)``; then blocks until
    ``stop`` is set or, when no ``stop`` is given, until SIGTERM or SIGINT (main thread only). ``factories``
    adds ``{name: factory}`` backends ahead of the entry points (tests, embedders). Every network session gets
    a fresh backend; a compute backend is built once and shared by all clients.

    ``security``: TLS and the token every call must carry; a server listening beyond loopback without both warns
    on stderr. ``limits``: sessions at once, idle timeout, topology and request sizes (:class:`Limits`).

    The ``serving`` layer (the pricing oracle, :mod:`stratasim.remote.serving_service`) has no registry: its
    ``backend`` names the study opener given in ``factories`` (``stratasim serve serving`` gives it), which reads
    study files under ``study_root`` only (None: none).
    """
    security = security or ServerSecurity()
    limits = limits or Limits()
    served = [(layer, backend), *also]
    layers = [name for name, _ in served]
    if len(set(layers)) < len(layers):
        raise BackendError(f"one server serves each layer once; asked for {', '.join(layers)}")
    if stop is None and threading.current_thread() is not threading.main_thread():
        raise ValueError("serve() outside the main thread needs a stop event")
    server = _grpc_server(layers, security, limits)
    closing: list[_Closable] = []
    try:
        for name, chosen in served:
            closing += _add_service(server, name, chosen, factories, limits, study_root)
        # Handlers go in before the endpoint is announced: a signal sent as soon as it is must stop us cleanly.
        with _stopped_by_signals() if stop is None else nullcontext(stop) as stopping:
            try:
                endpoint = _listen(server, "/".join(layers), listen, security)
                warn_if_exposed(endpoint, security)
                server.start()
                print(f"listening on {endpoint}", flush=True)
                if ready is not None:
                    ready(endpoint)
                # Wake now and then, so a stopping signal's Python handler runs promptly whatever thread caught it.
                while not stopping.wait(_SIGNAL_POLL_S):
                    pass
            finally:
                server.stop(grace=_STOP_GRACE_S).wait()
    finally:
        for servicer in closing:
            servicer.close()


def _add_service(
    server: grpc.Server,
    layer: str,
    backend: str,
    factories: Mapping[str, Callable[[], Any]] | None,
    limits: Limits,
    study_root: Path | None,
) -> list[_Closable]:
    """Put ``layer``'s service with the registered ``backend`` on ``server``; the servicer to be closed after,
    if it is one (compute's, serving's)."""
    if layer == "serving":
        opener = cast("StudyOpener | None", (factories or {}).get(backend))
        if opener is None:
            raise BackendError(f"the serving layer's backend {backend!r} is not given; serve it with stratasim serve")
        serving = ServingServicer(backend, opener, study_root, limits)
        serving_pb2_grpc.add_ServingPricerServicer_to_server(serving, server)
        return [serving]
    if layer not in ("network", "compute"):
        raise BackendError(f"the {layer} layer has no gRPC service; serve network, compute or serving")
    factory = registry.load(layer, backend, extra=factories)
    if layer == "network":
        network_pb2_grpc.add_NetworkServiceServicer_to_server(NetworkServicer(backend, factory, limits), server)
        return []
    compute = ComputeServicer(backend, factory(), limits)
    compute_pb2_grpc.add_ComputeServiceServicer_to_server(compute, server)
    return [compute]


class _Closable(Protocol):
    """A servicer holding backends, closed once the server has stopped."""

    def close(self) -> None: ...


def _listen(server: grpc.Server, layer: str, listen: str, security: ServerSecurity) -> str:
    """Bind ``listen`` (``HOST:PORT`` or ``unix:PATH``; with TLS when ``security`` has it) and return the endpoint
    clients should use (the real port when 0 was asked for)."""
    unix = listen.startswith(_UNIX)
    host = listen.rpartition(":")[0]
    try:
        if security.tls:
            port = server.add_secure_port(listen, security.credentials())
        else:
            port = server.add_insecure_port(listen)
    except RuntimeError:
        port = 0
    if not host or not port:
        tls = "; or the TLS certificate and key do not belong together" if security.tls else ""
        raise RemoteError(f"{layer} layer cannot listen on {listen!r} (expected a free HOST:PORT or unix:PATH{tls})")
    return listen if unix else f"{host}:{port}"


@contextmanager
def _stopped_by_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT while the context lasts; the previous handlers are put back after."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
