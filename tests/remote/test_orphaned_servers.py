"""A spawned server dies with the run that spawned it, however the run ends: SIGKILL leaves neither the server nor
its socket folder behind (the server watches a pipe the run holds open)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT, wait_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="finds the run's children in /proc")

# Some tens of seconds of flit-level simulation: the run is still going when it is killed.
_LONG_RUN = (
    "examples/quickstart.yaml",
    "--set",
    "network.spawn=true",
    "--set",
    "network.backend=flit_level",
    "--set",
    "workload.size=4MiB",
)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not ended, nor a zombie waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path, for the run's temporary files: its socket's path must fit a Unix socket's."""
    folder = Path(tempfile.mkdtemp(prefix="sk", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_spawning_run_killed_with_sigkill_leaves_no_server_and_no_socket_folder(short_tmp: Path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-m", "stratasim", "run", *_LONG_RUN],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(short_tmp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: any(short_tmp.glob("stratasim-*/*.sock")), 60, "the spawned server's socket")
        servers = _children(run.pid)
        assert servers, "the run has no server child"
        run.send_signal(signal.SIGKILL)
        run.wait()
        wait_until(lambda: not any(_running(pid) for pid in servers), 10, "the server to end with its run")
        wait_until(lambda: not any(short_tmp.glob("stratasim-*")), 10, "the socket folder to be removed")
    finally:
        run.kill()
        run.wait()
