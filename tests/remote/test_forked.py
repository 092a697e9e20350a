"""A run's servers are forked from its own process when that is safe (a fresh process: gRPC not imported, one
thread), and give what ``python -m stratasim.remote.serve_main`` gives: the same results, the same errors, no child
left."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from stratasim.remote.forked import can_fork

ROOT = Path(__file__).resolve().parents[2]


def _fresh(script: str) -> dict[str, object]:
    """Run ``script`` in a fresh interpreter (where forking is safe); what it printed last, as JSON."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_not_once_grpc_is_imported_or_another_thread_runs() -> None:
    import grpc  # noqa: F401 - imported by the client tests anyway; forking now could hang the child

    assert not can_fork()
    blocker = threading.Event()
    thread = threading.Thread(target=blocker.wait)
    thread.start()
    try:
        assert not can_fork()
    finally:
        blocker.set()
        thread.join()


@pytest.mark.skipif(sys.platform != "linux", reason="servers are forked on Linux only")
def test_a_forked_server_runs_a_study_as_in_process() -> None:
    result = _fresh(
        "import json, os\n"
        "from stratasim.config.study_file import load_study\n"
        "from stratasim.remote import forked\n"
        "from stratasim.study.run import run_study\n"
        "before = forked.can_fork()\n"
        "pids = []\n"
        "import stratasim.remote.launch as launch\n"
        "def fork_server(*arguments, **keywords):\n"
        "    child = forked.fork_server(*arguments, **keywords)\n"
        "    pids.append(child.pid)\n"
        "    return child\n"
        "launch.fork_server = fork_server\n"
        "path = 'examples/transformer.yaml'\n"
        "spawned = run_study(load_study(path, ['network.spawn=true', 'compute.spawn=true'])).to_dict()\n"
        "local = run_study(load_study(path)).to_dict()\n"
        "for report in (local, spawned): del report['wall_seconds'], report['backends']\n"
        "def gone(pid):\n"
        "    try: os.kill(pid, 0)\n"
        "    except ProcessLookupError: return True\n"
        "    return False\n"
        "print(json.dumps({'before': before, 'forked': len(pids), 'same': local == spawned,\n"
        "                  'gone': all(gone(pid) for pid in pids)}))\n"
    )
    assert result == {"before": True, "forked": 1, "same": True, "gone": True}


@pytest.mark.skipif(sys.platform != "linux", reason="servers are forked on Linux only")
def test_a_forked_server_that_fails_is_one_clear_error() -> None:
    result = _fresh(
        "import json\n"
        "from stratasim.kernel.errors import RemoteError\n"
        "from stratasim.remote import start, forked\n"
        "assert forked.can_fork()\n"
        "try:\n"
        "    with start('network', 'analytical', also=('compute', 'nope')) as server: server.endpoint()\n"
        "except RemoteError as exc: print(json.dumps({'error': str(exc)}))\n"
    )
    error = str(result["error"])
    assert error.startswith(
        "network and compute layer server (analytical, nope) exited with code 2 before "
        "listening: error: no compute backend named 'nope'; available: "
    )
    assert "Traceback" not in error
