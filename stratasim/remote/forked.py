"""A layer's server forked from the engine's process, when that is safe: no interpreter to start, nothing to import
again that the engine has imported already (numpy, the kernel, the wire messages — some 0.1 s of a fresh server's
0.2 s start-up); the child imports gRPC and the backends it serves, serves, and exits.

Forking is safe only before gRPC is first imported here (its core starts threads that a child cannot inherit) and
while this process runs no other Python thread; :func:`can_fork` says whether both hold, on Linux. Otherwise
:func:`~stratasim.remote.launch.start` runs ``python -m stratasim.remote.serve_main``: the two give the same server.
"""

from __future__ import annotations

import gc
import importlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from stratasim.remote.serve_options import ServeOptions

__all__ = ["ForkedServer", "can_fork", "fork_server"]

_POLL_S = 0.001
# What importing gRPC imports from the standard library, none of it starting a thread: imported before forking, once
# for both processes, as the engine imports gRPC right after anyway (asyncio alone is some 15 ms of the child's boot).
_IMPORTED_AHEAD = ("asyncio", "concurrent.futures", "logging", "ssl", "importlib.metadata")


def can_fork() -> bool:
    """Whether a server may be forked from this process now (Linux, gRPC not imported, one Python thread)."""
    return sys.platform == "linux" and "grpc" not in sys.modules and threading.active_count() == 1


class ForkedServer:
    """The forked child, seen through the part of :class:`subprocess.Popen` a started server needs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The child's exit code once it has exited (reaping it), else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to exit, at most ``timeout`` seconds (then raise ``subprocess.TimeoutExpired``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"server process {self.pid}", timeout or 0.0)
            self._sleep_until_exit(left)
        return code

    def _sleep_until_exit(self, at_most: float | None) -> None:
        """Sleep until the child exits (woken by a pidfd the moment it does, where Linux has them) or ``at_most``
        seconds pass; a short nap where there is no pidfd."""
        try:
            handle = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # Python or kernel without pidfds
            time.sleep(_POLL_S if at_most is None else min(_POLL_S, at_most))
            return
        try:
            select.select([handle], [], [], at_most)
        finally:
            os.close(handle)

    def terminate(self) -> None:
        """SIGTERM: the server stops cleanly."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, for a child that lingers."""
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


def fork_server(
    options: ServeOptions,
    out: IO[bytes],
    err: IO[bytes],
    env: Mapping[str, str] | None = None,
    *,
    stdin: int | None = None,
    close: int | None = None,
) -> ForkedServer:
    """Fork a child serving as ``options`` say (:func:`stratasim.remote.serve_main.run`), with ``env`` added to its
    environment, its stdin reading the descriptor ``stdin`` (default: nothing), its stdout and stderr going to
    ``out`` and ``err``, and the descriptor ``close`` closed in it; :func:`can_fork` must hold."""
    for module in _IMPORTED_AHEAD:
        importlib.import_module(module)
    pid = os.fork()
    if pid == 0:
        os.environ.update(env or {})
        if close is not None:
            os.close(close)
        _serve_in_child(options, out, err, stdin)
    return ForkedServer(pid)


def _serve_in_child(options: ServeOptions, out: IO[bytes], err: IO[bytes], stdin: int | None) -> NoReturn:
    """The child's whole life: serve as ``python -m stratasim.remote.serve_main`` would, then exit at once — never
    returning into the code of the run that forked it, nor running its clean-up."""
    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY) if stdin is None else stdin, 0)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        # Fresh streams: the parent's may hold output it has not flushed yet, which is its own to write.
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the child
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        gc.freeze()  # what the parent built stays shared, untouched by the collector
        gc.enable()  # the run may have forked with it paused
        from stratasim.remote import serve_main

        code = serve_main.run(options)
    except BaseException:  # reported on stderr, where the parent reads why the server ended
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)
