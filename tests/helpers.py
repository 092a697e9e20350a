"""Helpers every test folder shares: the type of the ``run_cli`` fixture (``tests/conftest.py``), ``python -m
stratasim`` in a child process as a user runs it, and waiting on a condition with a deadline instead of sleeping for
a guessed time."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["ROOT", "RunCli", "stratasim_process", "wait_until"]

ROOT = Path(__file__).resolve().parents[1]

RunCli = Callable[..., tuple[int, str, str]]
"""The ``run_cli`` fixture: ``run_cli(*argv)`` gives the exit code, stdout and stderr of ``stratasim ARGV``."""
_POLL_S = 0.05


# A child's first statements: cap its address space, then run the command line as ``python -m stratasim`` does.
_LIMITED = (
    "import resource, runpy, sys; limit = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); sys.argv[0] = 'stratasim'; "
    "runpy.run_module('stratasim', run_name='__main__')"
)


def stratasim_process(
    *args: str, timeout: float = 60, check: bool = False, address_space: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m stratasim ARGS`` run from the repository root in a child process, its output captured as text.

    ``timeout`` in seconds; ``check`` raises on a non-zero exit; ``address_space``, in bytes, caps the child's
    memory. The child sets the cap itself once it runs, not in a ``preexec_fn`` between fork and exec: a forked copy
    of a test process whose gRPC threads are running can abort there (gRPC's fork handlers, an ``epoll_wait`` error).
    """
    prefix = ["-m", "stratasim"] if address_space is None else ["-c", _LIMITED, str(address_space)]
    return subprocess.run(
        [sys.executable, *prefix, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=check,
    )


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Return as soon as ``condition()`` holds; fail naming ``what`` if it still does not after ``timeout_s``.

    The condition is polled every few tens of milliseconds: a readiness the test can observe (a file written, a line
    printed, a connection made), never a guess at how long something takes.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(_POLL_S)
