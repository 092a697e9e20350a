"""How ``stratasim sweep`` shows its progress on stderr: a rich progress bar (count, rate, time left, best so far)
on a terminal, one line per trial anywhere else (a log, CI), where a redrawn bar would be noise."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from stratasim.explore.ranking import feasible
from stratasim.explore.store import TrialRecord
from stratasim.explore.sweep_file import Sweep

__all__ = ["BarProgress", "LineProgress", "progress_for"]


class _Best:
    """The best feasible trial so far by the sweep's first objective, as text."""

    def __init__(self, sweep: Sweep) -> None:
        self._sweep = sweep
        self._objective = sweep.section.objectives[0]
        self._best: TrialRecord | None = None

    def offer(self, record: TrialRecord) -> None:
        """Keep ``record`` if it is feasible and beats the best so far."""
        if not feasible(self._sweep, record):
            return
        sign = 1.0 if self._objective.goal == "min" else -1.0
        value = sign * record.metrics[self._objective.metric]
        if self._best is None or value < sign * self._best.metrics[self._objective.metric]:
            self._best = record

    def text(self) -> str:
        """``best total_time_ns 1.01e+07 (#17)``, or ``best: none yet``."""
        if self._best is None:
            return "best: none yet"
        return f"best {self._objective.metric} {self._best.metrics[self._objective.metric]:.6g} (#{self._best.number})"


class LineProgress:
    """A line per level (when its first trial ends, or at once if it has none left: a sweep that stops on an
    error before running prints the error alone) and per trial: its number, values, time and, if it failed, why."""

    def __init__(self, sweep: Sweep, stream: IO[str]) -> None:
        self._stream = stream
        self._best = _Best(sweep)
        self._announce = ""

    def level(self, name: str, total: int, done: int) -> None:
        label = f"level {name!r}: " if name else ""
        self._announce = f"{label}{total} trials, {done} in the store already"
        if done >= total:
            self._flush()

    def _flush(self) -> None:
        if self._announce:
            print(self._announce, file=self._stream)
            self._announce = ""

    def trial(self, record: TrialRecord) -> None:
        self._flush()
        self._best.offer(record)
        status = "" if record.status == "done" else f"  failed: {record.error.splitlines()[0]}"
        print(f"trial {record.number}: {record.params} ({record.wall_seconds:.2f} s){status}", file=self._stream)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *_: object) -> None:
        return None


class BarProgress:
    """A rich bar per level: trials done of all, trials per second, time left and the best trial so far."""

    def __init__(self, sweep: Sweep, console: Console) -> None:
        self._best = _Best(sweep)
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[best]}"),
            console=console,
        )
        self._task: TaskID | None = None
        self._started = 0.0
        self._ran = 0

    def level(self, name: str, total: int, done: int) -> None:
        self._task = self._bar.add_task(name or "trials", total=total, completed=done, rate="", best=self._best.text())
        self._started, self._ran = time.perf_counter(), 0

    def trial(self, record: TrialRecord) -> None:
        self._best.offer(record)
        self._ran += 1
        rate = self._ran / max(time.perf_counter() - self._started, 1e-9)
        if self._task is not None:
            self._bar.update(self._task, advance=1, rate=f"{rate:.1f} trials/s", best=self._best.text())

    def __enter__(self) -> BarProgress:
        self._bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._bar.stop()


def progress_for(sweep: Sweep, stream: IO[str] | None = None) -> BarProgress | LineProgress:
    """A bar on a terminal, lines elsewhere (``stream``: stderr by default)."""
    stream = stream or sys.stderr
    if stream.isatty():
        return BarProgress(sweep, Console(file=stream))
    return LineProgress(sweep, stream)
