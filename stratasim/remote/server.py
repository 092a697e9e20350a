"""Running one layer as a gRPC server: ``serve`` in this process, ``spawn`` in a child process.

``serve`` is what ``stratasim serve <layer> --backend NAME --listen ENDPOINT`` runs; ``spawn`` starts that
command and hands back the endpoint it reports on stdout as ``listening on HOST:PORT``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from contextlib import contextmanager, nullcontext
from typing import IO, Any

import grpc

from stratasim.kernel import registry
from stratasim.kernel.errors import BackendError, RemoteError
from stratasim.remote import _wire
from stratasim.remote.compute_service import ComputeServicer
from stratasim.remote.network_service import NetworkServicer
from stratasim.v1 import compute_pb2_grpc, network_pb2_grpc

__all__ = ["Spawned", "serve", "spawn", "start"]

# A network session holds a worker thread for its whole run; beyond this many, calls fail at once
# (RESOURCE_EXHAUSTED) instead of queueing behind sessions that may last hours.
_WORKERS = 16
_STOP_GRACE_S = 1.0
_KILL_AFTER_S = 5.0
_POLL_S = 0.005
_LISTENING = re.compile(rb"^listening on (\S+)\s*$", re.MULTILINE)
_UNIX = "unix:"
_SOCKET_PATH_MAX = 100  # a Unix-domain socket's path must fit in sockaddr_un (108 bytes on Linux)


def serve(
    layer: str,
    backend: str,
    listen: str,
    *,
    ready: Callable[[str], None] | None = None,
    factories: Mapping[str, Callable[[], Any]] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve ``layer`` with the registered ``backend`` on ``listen`` (``127.0.0.1:0`` picks a free port).

    Once listening, prints ``listening on HOST:PORT`` (flushed) and calls ``ready(endpoint)``; then blocks until
    ``stop`` is set or, when no ``stop`` is given, until SIGTERM or SIGINT (main thread only). ``factories``
    adds ``{name: factory}`` backends ahead of the entry points (tests, embedders). Every network session gets
    a fresh backend; a compute backend is built once and shared by all clients.
    """
    factory = registry.load(layer, backend, extra=factories)
    if stop is None and threading.current_thread() is not threading.main_thread():
        raise ValueError("serve() outside the main thread needs a stop event")
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix=f"stratasim-{layer}"),
        options=_wire.CHANNEL_OPTIONS,
        maximum_concurrent_rpcs=_WORKERS,
    )
    compute: ComputeServicer | None = None
    if layer == "network":
        network_pb2_grpc.add_NetworkServiceServicer_to_server(NetworkServicer(backend, factory), server)
    elif layer == "compute":
        compute = ComputeServicer(backend, factory())
        compute_pb2_grpc.add_ComputeServiceServicer_to_server(compute, server)
    else:
        raise BackendError(f"the {layer} layer has no gRPC service; serve network or compute")
    # Handlers go in before the endpoint is announced: a signal sent as soon as it is must stop us cleanly.
    with _stopped_by_signals() if stop is None else nullcontext(stop) as stopping:
        try:
            endpoint = _listen(server, layer, listen)
            server.start()
            print(f"listening on {endpoint}", flush=True)
            if ready is not None:
                ready(endpoint)
            stopping.wait()
        finally:
            server.stop(grace=_STOP_GRACE_S).wait()
            if compute is not None:
                compute.close()


def _listen(server: grpc.Server, layer: str, listen: str) -> str:
    """Bind ``listen`` (``HOST:PORT`` or ``unix:PATH``) and return the endpoint clients should use (the real port
    when 0 was asked for)."""
    unix = listen.startswith(_UNIX)
    host = listen.rpartition(":")[0]
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError:
        port = 0
    if not host or not port:
        raise RemoteError(f"{layer} layer cannot listen on {listen!r} (expected a free HOST:PORT or unix:PATH)")
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


@contextmanager
def spawn(
    layer: str,
    backend: str,
    *,
    timeout_s: float = 20.0,
    command: Sequence[str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[str]:
    """Run ``stratasim serve layer --backend backend [options]`` in a child process and yield its endpoint.

    The child runs :mod:`stratasim.cli.serve` alone (not the whole command line), so it listens within a fraction
    of a second; it listens on a Unix-domain socket in a private temporary directory (removed afterwards): a round trip
    costs about half what it does over loopback TCP. Waits at most ``timeout_s`` for the child's ``listening on``
    line; if it exits or stays silent, raises RemoteError with the tail of its stderr. On exit the child is
    terminated (killed if it lingers). ``command`` replaces the default command line (tests; servers started
    another way). :func:`start` does the same without waiting, for starting several servers at once.
    """
    with start(layer, backend, timeout_s=timeout_s, command=command, options=options) as server:
        yield server.endpoint()


class Spawned:
    """A server child process started by :func:`start`; :meth:`endpoint` waits for it to listen."""

    def __init__(self, process: subprocess.Popen[bytes], out: IO[bytes], err: IO[bytes], who: str,
                 timeout_s: float) -> None:  # fmt: skip
        self._process = process
        self._out = out
        self._err = err
        self._who = who
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s
        self._endpoint: str | None = None

    def endpoint(self) -> str:
        """Where the server listens, once it does (at most ``timeout_s`` after it was started); see :func:`spawn`."""
        if self._endpoint is None:
            self._endpoint = self._await()
        return self._endpoint

    def terminate(self) -> None:
        """Ask the child to stop now, without waiting: servers stopped together exit together (:func:`start` still
        waits for this one, and kills it if it lingers)."""
        if self._process.poll() is None:
            self._process.terminate()

    def _await(self) -> str:
        """Poll the child's stdout for ``listening on HOST:PORT`` until it appears, the child exits, or time is up."""
        while True:
            found = _LISTENING.search(_read(self._out))
            if found:
                return found.group(1).decode()
            code = self._process.poll()
            if code is not None:
                raise RemoteError(f"{self._who} exited with code {code} before listening{_tail(self._err)}")
            if time.monotonic() > self._deadline:
                raise RemoteError(f"{self._who} did not start listening within {self._timeout_s:g} s{_tail(self._err)}")
            time.sleep(_POLL_S)


@contextmanager
def start(
    layer: str,
    backend: str,
    *,
    timeout_s: float = 20.0,
    command: Sequence[str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[Spawned]:
    """Start the server :func:`spawn` runs, without waiting for it: a run starts all its servers at once, then builds
    its workload while they start up, and asks each for its endpoint when it needs it. Stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="stratasim-") as sockets, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:  # fmt: skip
        socket = os.path.join(sockets, f"{layer}.sock")
        listen = f"{_UNIX}{socket}" if len(socket) < _SOCKET_PATH_MAX else "127.0.0.1:0"
        argv = list(command) if command is not None else [
            sys.executable, "-m", "stratasim.cli.serve", layer, "--backend", backend, "--listen", listen, *options,
        ]  # fmt: skip
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        try:
            yield Spawned(process, out, err, f"{layer} layer server ({backend})", timeout_s)
        finally:
            _stop(process)


def _read(file: IO[bytes]) -> bytes:
    """Everything the child wrote so far; pread leaves the offset the child shares with us untouched."""
    fd = file.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0)


def _tail(err: IO[bytes], lines: int = 5) -> str:
    """The last few non-empty lines of the child's stderr, on one line."""
    text = _read(err).decode(errors="replace")
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return f": {' | '.join(kept)}" if kept else " (nothing on stderr)"


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the child, and kill it if it does not exit soon."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=_KILL_AFTER_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
