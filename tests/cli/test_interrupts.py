"""Ctrl-C or SIGTERM during a run keeps what was simulated (issue 15): the engine stops at its next progress check,
and the report, ``--out``'s report.json and trace.json say how far it got, marked incomplete; a benchmark keeps its
finished rows."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from stratasim.cli import bench
from stratasim.cli.interrupts import stoppable
from stratasim.config.study_file import load_study, parse_study
from stratasim.kernel.events import RunStopped
from stratasim.study.budget import DEFAULT_BUDGET, Budget
from stratasim.study.run import run_study
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]

# Every NPU of a 4096-NPU torus simulated one by one: about a minute on the project machine, so a signal sent once
# the engine is simulating always lands mid-run.
SLOW = """name: slow
workload: {kind: collective, collective: all_reduce, size: 1GiB}
system: {algorithm: ring, aggregate: false, splits: 64}
network:
  backend: analytical
  topology:
    - {kind: ring, size: 64, bandwidth: 50GB/s, latency: 500ns}
    - {kind: ring, size: 64, bandwidth: 25GB/s, latency: 1us}
"""
SMALL = {
    "name": "small",
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "64MiB"},
    "system": {"algorithm": "ring", "aggregate": False, "splits": 64},
    "network": {
        "backend": "analytical",
        "topology": [
            {"kind": "ring", "size": 16, "bandwidth": "50GB/s", "latency": "500ns"},
            {"kind": "ring", "size": 8, "bandwidth": "25GB/s", "latency": "1us"},
        ],
    },
}


def _stop_after(calls: int) -> Any:
    """A progress that stops the run at its ``calls``-th call."""
    seen = []

    def progress(now_ps: int, events: int) -> None:
        seen.append(now_ps)
        if len(seen) == calls:
            raise RunStopped("interrupted (SIGINT)")

    return progress


def test_a_stopped_run_reports_how_far_it_got() -> None:
    study = parse_study(SMALL, "test")
    whole = run_study(study)
    stopped = run_study(study, record_trace=True, progress=_stop_after(5))
    result = stopped.result
    assert result.stopped_at_ps is not None and 0 < result.stopped_at_ps < whole.total_time_ps
    assert result.total_time_ps == result.stopped_at_ps and result.unfinished_collectives == 1
    assert stopped.warnings[0].startswith("incomplete: the run was interrupted (SIGINT) at simulated time ")
    data = stopped.to_dict()
    assert data["incomplete"] == {
        "stopped_at_ps": result.stopped_at_ps,
        "reason": "interrupted (SIGINT)",
        "unfinished_collectives": 1,
    }
    (collective,) = data["collectives"]
    assert collective["end_ns"] * 1000 == pytest.approx(result.stopped_at_ps)  # in flight: it ran until the stop
    assert stopped.to_text().startswith("warning: incomplete")
    assert "incomplete" not in whole.to_dict()


def test_a_stopped_training_run_gives_no_throughput() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "transformer.yaml"
    stopped = run_study(load_study(example, ["system.aggregate=false"]), progress=_stop_after(3))
    assert stopped.result.stopped_at_ps is not None
    assert stopped.training is None  # samples per second of half an iteration would mislead


def test_the_second_signal_abandons_the_run() -> None:
    shown: list[int] = []
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN in a job a shell started in the background
    with stoppable(lambda now, events: shown.append(now)) as progress:
        progress(1, 1)
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(RunStopped, match="interrupted"):
            progress(2, 2)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert shown == [1]
    # Outside the context the handler it replaced is back.
    assert signal.getsignal(signal.SIGINT) is before


# ``stratasim ARGV`` with the progress the engine calls wrapped to write MARKER on its first call: the test signals
# the run once the engine is simulating, not after a guessed time.
_RUN_MARKING_ITS_FIRST_PROGRESS = """
import pathlib, sys
from stratasim.cli import main
from stratasim.cli.run_progress import RunProgress
marker, shown = pathlib.Path(sys.argv[1]), RunProgress.__call__
def shown_marked(self, now_ps, events):
    if not marker.exists():
        marker.touch()
    shown(self, now_ps, events)
RunProgress.__call__ = shown_marked
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_leaves_a_valid_partial_report_and_trace(tmp_path: Path, sent: signal.Signals) -> None:
    study = tmp_path / "slow.yaml"
    study.write_text(SLOW, encoding="utf-8")
    out, marker = tmp_path / "out", tmp_path / "simulating"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _RUN_MARKING_ITS_FIRST_PROGRESS,
            str(marker),
            *("run", str(study), "--quiet", "--out", str(out), "--no-pictures"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: marker.exists() or process.poll() is not None, 120, "the engine's first progress call")
    process.send_signal(sent)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "stopping: reporting what was simulated so far" in stderr
    reason = "interrupted (SIGINT)" if sent == signal.SIGINT else "terminated (SIGTERM)"
    assert stdout.startswith(f"warning: incomplete: the run was {reason} at simulated time ")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["incomplete"]["reason"] == reason and report["total_time_ps"] == report["incomplete"]["stopped_at_ps"]
    trace = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    assert trace["traceEvents"] and all("ph" in event for event in trace["traceEvents"])


def test_an_interrupted_benchmark_prints_the_rows_it_finished(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = iter([{"wall_s": 1.0}])

    def run_study_file(path: str, timeout_s: float, memory_bytes: int, budget: Budget) -> dict[str, Any]:
        try:
            return next(figures)
        except StopIteration:
            raise KeyboardInterrupt from None

    monkeypatch.setattr("stratasim.bench.studies.run_study_file", run_study_file)
    code = bench._run_studies(["a.yaml", "b.yaml", "c.yaml"], 10.0, 1 << 30, DEFAULT_BUDGET, as_json=True)
    out, err = capsys.readouterr()
    assert code == 130 and "interrupted: 1 of 3 cases finished" in err
    assert json.loads(out) == [{"study": "a.yaml", "wall_s": 1.0}]


def test_ctrl_c_while_the_command_line_imports_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Start-up imports take a second or more: Ctrl-C then is said as later, one line and 130 (issue 27)."""
    from stratasim.cli import main

    class Interrupting:
        def find_spec(self, name: str, *args: object) -> None:
            if name == "stratasim.cli.commands":
                raise KeyboardInterrupt

    importlib.import_module("stratasim.cli.commands")  # in sys.modules, to be taken out until the test ends
    monkeypatch.delitem(sys.modules, "stratasim.cli.commands")
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    assert main(["run", "study.yaml"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


# 24 trials of a few seconds each, so a signal sent once the first finished lands while others run.
SLOW_SWEEP = f"""study:
{textwrap.indent(SLOW.replace("size: 1GiB", "size: 64MiB").replace("size: 64, bandwidth: 25", "size: 8, bandwidth: 25"), "  ")}
space: {{system.splits: [4, 8, 16, 32, 64, 128], system.active_chunks: [1, 2, 3, 4]}}
objectives: [{{metric: total_time_ns, goal: min}}]
search: {{method: grid}}
"""


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_sweep_stops_its_workers_and_says_so(tmp_path: Path, sent: signal.Signals) -> None:
    (tmp_path / "sweep.yaml").write_text(SLOW_SWEEP, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "stratasim", "sweep", "sweep.yaml", "--workers", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives it: Ctrl-C reaches the workers too
    )
    assert process.stderr is not None
    lines = []
    while not any(line.startswith("trial ") for line in lines) and process.poll() is None:
        lines.append(process.stderr.readline())
    os.killpg(process.pid, sent) if sent == signal.SIGINT else process.send_signal(sent)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "semaphore" not in stderr, stderr
    assert "stopped: the sweep's workers were stopped" in stderr
    wait_until(lambda: _group_is_gone(process.pid), 30, "the sweep's workers to end")


def _group_is_gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_disk_is_one_error(tmp_path: Path) -> None:
    """``validate`` and ``results --json`` on a full disk (stdout on /dev/full): one error line, exit code 2."""
    sweep = ROOT / "examples" / "explore" / "quickstart_sweep.yaml"
    store = tmp_path / "s.db"
    stratasim = [sys.executable, "-m", "stratasim"]
    subprocess.run(
        [*stratasim, "sweep", str(sweep), "--db", str(store), "--workers", "1"], check=True, capture_output=True
    )
    for command in (["validate"], ["results", str(store), "--json"]):
        with open("/dev/full", "w", encoding="utf-8") as full:
            done = subprocess.run([*stratasim, *command], stdout=full, stderr=subprocess.PIPE, text=True)
        assert done.returncode == 2, done.stderr
        assert done.stderr == "error: writing the output: No space left on device\n", done.stderr
