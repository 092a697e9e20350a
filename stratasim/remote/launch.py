"""Starting a layer's server as a child process, on a Unix-domain socket: forked from this process when that is safe
(:mod:`stratasim.remote.forked`), else ``python -m stratasim.remote.serve_main``; either runs
:func:`stratasim.remote.serve_main.run` on the same :class:`~stratasim.remote.serve_options.ServeOptions`.

Nothing here imports gRPC, so a run can start its servers before it pays for that import itself (about 50 ms), and
fork them while that is still safe: the servers boot while the engine imports and builds.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING

from stratasim.kernel.errors import RemoteError
from stratasim.remote.forked import ForkedServer, can_fork, fork_server
from stratasim.remote.serve_options import TOKEN_ENV, ServeOptions

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["TOKEN_ENV", "Spawned", "new_token", "spawn", "start"]

_KILL_AFTER_S = 5.0
_POLL_S = 0.001  # how often a starting server's stdout is read for its endpoint: a millisecond's wait at most
_LISTENING = re.compile(rb"^listening on (\S+)\s*$", re.MULTILINE)
_UNIX = "unix:"
_SOCKET_PATH_MAX = 100  # a Unix-domain socket's path must fit in sockaddr_un (108 bytes on Linux)
_Child = subprocess.Popen[bytes] | ForkedServer


def new_token() -> str:
    """A random bearer token for a spawned server and its clients (256 bits)."""
    return secrets.token_urlsafe(32)


@contextmanager
def spawn(
    layer: str,
    backend: str,
    *,
    timeout_s: float = 20.0,
    command: Sequence[str] | None = None,
    section: BackendSection | None = None,
    token: str | None = None,
) -> Iterator[str]:
    """Serve ``layer`` with ``backend`` in a child process, as ``stratasim serve layer --backend backend`` does, and
    yield its endpoint; ``section``: what the compute backend served is built with (None: its defaults).

    The child runs :mod:`stratasim.remote.serve_main` alone (not the whole command line), so it listens within a
    fraction of a second; it listens on a Unix-domain socket in a private temporary directory (removed afterwards):
    a round trip costs about half what it does over loopback TCP. Waits at most ``timeout_s`` for the child's ``listening on``
    line; if it exits or stays silent, raises RemoteError with the tail of its stderr. On exit the child is
    terminated (killed if it lingers). ``command`` replaces the default command line (tests; servers started
    another way). :func:`start` does the same without waiting, for starting several servers at once. ``token``:
    the bearer token the server asks of every call (handed over in its environment, never on its command line).
    """
    with start(layer, backend, timeout_s=timeout_s, command=command, section=section, token=token) as server:
        yield server.endpoint()


class Spawned:
    """A server child process started by :func:`start`; :meth:`endpoint` waits for it to listen."""

    def __init__(
        self, process: _Child, out: IO[bytes], err: IO[bytes], who: str, timeout_s: float, token: str | None = None
    ) -> None:
        self.token = token
        """The bearer token the server asks of every call, if any."""
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
    section: BackendSection | None = None,
    also: tuple[str, str] | None = None,
    token: str | None = None,
) -> Iterator[Spawned]:
    """Start the server :func:`spawn` runs, without waiting for it: a run starts all its servers at once, then builds
    its workload while they start up, and asks each for its endpoint when it needs it. Stopped on exit.

    ``also``: the other layer and its backend, served by the same child on the same endpoint (``--also``): one
    interpreter, one import of gRPC and one socket for a run that spawns both its network and its compute layer.
    ``token``: as :func:`spawn` takes it (:func:`new_token` makes one).
    """
    env = {} if token is None else {TOKEN_ENV: token}
    layers, backends = (layer, backend) if also is None else (f"{layer}+{also[0]}", f"{backend}, {also[1]}")
    with (
        tempfile.TemporaryDirectory(prefix="stratasim-") as sockets,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        socket = os.path.join(sockets, f"{layers}.sock")
        listen = f"{_UNIX}{socket}" if len(socket) < _SOCKET_PATH_MAX else "127.0.0.1:0"
        options = ServeOptions(layer, backend, listen, also, section, spawned_in=sockets)
        # The child's stdin: a pipe this process holds open while the server should live (serve_main watches it).
        watched, holding = os.pipe()
        try:
            process = _started(options, command, watched, holding, out, err, env)
        finally:
            os.close(watched)
        try:
            who = f"{layers.replace('+', ' and ')} layer server ({backends})"
            yield Spawned(process, out, err, who, timeout_s, token)
        finally:
            _stop(process)
            os.close(holding)


def _started(
    options: ServeOptions,
    command: Sequence[str] | None,
    stdin: int,
    holding: int,
    out: IO[bytes],
    err: IO[bytes],
    env: dict[str, str],
) -> _Child:
    """The child serving as ``options`` say (forked when that is safe), ``stdin`` its standard input; ``holding``,
    the pipe's other end, stays this process's alone."""
    if command is None and can_fork():
        return fork_server(options, out, err, env, stdin=stdin, close=holding)
    argv = list(command or [sys.executable, "-m", "stratasim.remote.serve_main", options.to_json()])
    return subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, env={**os.environ, **env})


def _read(file: IO[bytes]) -> bytes:
    """Everything the child wrote so far; pread leaves the offset the child shares with us untouched."""
    fd = file.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0)


def _tail(err: IO[bytes], lines: int = 5) -> str:
    """The last few non-empty lines of the child's stderr, on one line."""
    text = _read(err).decode(errors="replace")
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return f": {' | '.join(kept)}" if kept else " (nothing on stderr)"


def _stop(process: _Child) -> None:
    """Terminate the child, and kill it if it does not exit soon."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=_KILL_AFTER_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
