"""What ``stratasim run`` shows on stderr while a run takes more than a second, on a terminal: the simulated time
reached, events per second and the time elapsed (rich), gone once the run is done. Nothing in a log, nothing
with ``--quiet``, and never on stdout. rich is imported only when the line is first drawn: most runs end within
the second."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import IO, TYPE_CHECKING

from stratasim.kernel.units import format_time_ps

if TYPE_CHECKING:
    from rich.live import Live

__all__ = ["RunProgress"]

_QUIET_S = 1.0  # a run shorter than this shows nothing
_REFRESH_S = 0.25


class RunProgress:
    """A one-line live display fed by the engine's :data:`~stratasim.kernel.events.Progress` calls."""

    def __init__(self, stream: IO[str] | None = None, *, quiet: bool = False) -> None:
        self._stream = stream or sys.stderr
        self._on = not quiet and self._stream.isatty()
        self._live: Live | None = None
        self._started = time.monotonic()
        self._next = self._started + _QUIET_S
        self._first: tuple[float, int] | None = None  # when the display began, and the events then

    def __call__(self, now_ps: int, events: int) -> None:
        """The engine reached ``now_ps`` having processed ``events``: redraw, at most every quarter second."""
        if not self._on:
            return
        clock = time.monotonic()
        if clock < self._next:
            return
        self._next = clock + _REFRESH_S
        if self._first is None:
            self._first = clock, events
        since, before = self._first
        rate = f"{(events - before) / (clock - since):,.0f}/s" if clock > since else "starting"
        from rich.text import Text  # rich, once there is a line to show (imported once: later calls find it loaded)

        line = Text(
            f"simulating: {format_time_ps(now_ps)} simulated, {events:,} events ({rate}), "
            f"{clock - self._started:.1f} s elapsed"
        )
        if self._live is None:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(line, console=Console(file=self._stream), transient=True, auto_refresh=False)
            self._live.start()
        self._live.update(line, refresh=True)

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.stop()
