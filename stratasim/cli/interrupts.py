"""Ctrl-C and SIGTERM during ``stratasim run`` keep what was simulated: the first signal stops the engine at its
next progress check (or as soon as it starts, when it comes during the build), and the run reports and writes
``--out`` as far as it got, marked incomplete; a second signal abandons the run at once. Elsewhere (a sweep) SIGTERM
stops the command as Ctrl-C does."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from stratasim.kernel.events import Progress, RunStopped

__all__ = ["stoppable", "terminate_as_interrupt"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES = {int(signal.SIGINT): "interrupted (SIGINT)", int(signal.SIGTERM): "terminated (SIGTERM)"}


@contextmanager
def stoppable(progress: Progress) -> Iterator[Progress]:
    """``progress`` wrapped to raise :class:`RunStopped` once SIGINT or SIGTERM arrived, while the context lasts
    (in the main thread; elsewhere signals cannot be caught and ``progress`` is yielded as it is)."""
    received: list[str] = []

    def on_signal(number: int, frame: FrameType | None) -> None:
        if received:
            raise KeyboardInterrupt
        received.append(_NAMES.get(number, f"stopped (signal {number})"))
        print(
            "stopping: reporting what was simulated so far (press Ctrl-C again to abandon the run)",
            file=sys.stderr,
            flush=True,
        )

    def checked(now_ps: int, events: int) -> None:
        if received:
            raise RunStopped(received[0])
        progress(now_ps, events)

    try:
        previous = {number: signal.signal(number, on_signal) for number in _SIGNALS}
    except ValueError:  # not the main thread
        yield progress
        return
    try:
        yield checked
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the context lasts, SIGTERM raises :class:`KeyboardInterrupt` as Ctrl-C does, so that a command stops
    what it started and says so instead of dying at once (in the main thread; elsewhere nothing changes)."""

    def on_signal(number: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, on_signal)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
