"""Progress while a run takes long: the engine reports how far it got; ``stratasim run`` shows it on a terminal
only, after a second, never on stdout, and not with ``--quiet``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from stratasim.cli import run_progress
from stratasim.cli.commands import main
from stratasim.kernel.events import EventQueue

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_queue_reports_every_256_event_times() -> None:
    queue = EventQueue()
    for time_ps in range(1000):
        queue.schedule(time_ps * 10, lambda _: None)
    told: list[tuple[int, int]] = []
    queue.run(lambda now, events: told.append((now, events)))
    assert told == [(2550, 256), (5110, 512), (7670, 768)]


def test_a_terminal_sees_the_simulated_time_after_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 0.5, 1.0, 1.5, 1.6, 2.0])
    monkeypatch.setattr(run_progress.time, "monotonic", lambda: next(clock))
    screen = _Terminal()
    with run_progress.RunProgress(screen) as progress:  # started at 0.0
        progress(1_000_000, 10)  # 0.5 s: too soon
        progress(2_000_000, 20)  # 1.0 s: shown
        progress(3_000_000, 30)  # 1.5 s: shown, 20 events in 0.5 s
        progress(4_000_000, 40)  # 1.6 s: within a quarter second of the last, skipped
    shown = screen.getvalue()
    assert "1 us simulated" not in shown and "2 us simulated, 20 events (starting), 1.0 s elapsed" in shown
    assert "3 us simulated, 30 events (20/s), 1.5 s elapsed" in shown and "4 us" not in shown


@pytest.mark.parametrize("quiet", [True, False])
def test_nothing_off_a_terminal_or_when_quiet(quiet: bool) -> None:
    stream = _Terminal() if quiet else io.StringIO()
    with run_progress.RunProgress(stream, quiet=quiet) as progress:
        progress(1, 1)
    assert stream.getvalue() == ""


def test_run_takes_quiet_and_keeps_stdout_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(QUICKSTART), "--json", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.lstrip().startswith("{") and out.rstrip().endswith("}")
