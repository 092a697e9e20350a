"""Every kind of bad input the issue names ends ``stratasim run`` with one clear message and exit code 2,
within seconds, without a traceback. These run the real command in a child process, as a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stratasim.kernel.contracts import PROTOCOL_VERSION
from stratasim.remote import spawn
from tests.helpers import stratasim_process, wait_until
from tests.remote.helpers import refused_endpoint

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "examples" / "quickstart.yaml")


def assert_one_clear_message(code: int, stderr: str, *fragments: str) -> None:
    assert code == 2
    assert "Traceback" not in stderr
    assert stderr.startswith("error: ")
    for fragment in fragments:
        assert fragment in stderr


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("system.spilts=4", ("system.spilts", "did you mean 'splits'")),
        ("network.topology.0.bandwidth=50 parsecs", ("network.topology[0].bandwidth", "unknown bandwidth unit")),
        ("network.topology.1.bandwidth=0GB/s", ("network.topology[1].bandwidth", "positive")),
        ("workload.npus=64", ("workload needs 64 NPUs but the topology has 32",)),
    ],
)
def test_bad_study_input(override: str, fragments: tuple[str, ...]) -> None:
    done = stratasim_process("run", QUICKSTART, "--set", override)
    code, stderr = done.returncode, done.stderr
    assert_one_clear_message(code, stderr, *fragments)


def test_unreachable_endpoint() -> None:
    with refused_endpoint() as endpoint:
        done = stratasim_process("run", QUICKSTART, "--set", f"network.endpoint={endpoint}")
    assert_one_clear_message(done.returncode, done.stderr, f"network layer at {endpoint} is unreachable")


def test_endpoint_of_another_protocol_version() -> None:
    other = PROTOCOL_VERSION + 1
    prelude = f"import stratasim.remote._wire as w; w.PROTOCOL_VERSION = {other}; "
    command = [
        sys.executable,
        "-c",
        f"{prelude}from stratasim.remote import serve; serve('network', 'analytical', '127.0.0.1:0')",
    ]
    with spawn("network", "analytical", command=command) as endpoint:
        done = stratasim_process("run", QUICKSTART, "--set", f"network.endpoint={endpoint}")
    code, stderr = done.returncode, done.stderr
    assert_one_clear_message(
        code,
        stderr,
        f"network layer at {endpoint}",
        "protocol version mismatch",
        f"client speaks {PROTOCOL_VERSION}, server speaks {other}",
    )


# The server a run talks to, its congestion-aware network wrapped to write MARKER on its first window (``advance``):
# the test kills it once the run is in its windows, not after a guessed time.
_SERVER_MARKING_ITS_FIRST_WINDOW = """
import pathlib, sys
from stratasim.cli import main
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
marker, advance = pathlib.Path(sys.argv[1]), CongestionAwareNetwork.advance
def advance_marked(self, until_ps):
    if not marker.exists():
        marker.touch()
    return advance(self, until_ps)
CongestionAwareNetwork.advance = advance_marked
sys.exit(main(["serve", "network", "--backend", "congestion_aware", "--listen", "127.0.0.1:0"]))
"""


def test_server_killed_mid_run(tmp_path: Path) -> None:
    # A 512-NPU ring all-reduce in 32 chunks takes several seconds of windows; the server dies early on. (The
    # network is congestion-aware: an analytical one, stateless, would have priced every kind of message the run
    # sends within its first steps, and not be asked again.)
    marker = tmp_path / "advanced"
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER_MARKING_ITS_FIRST_WINDOW, str(marker)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        endpoint = server.stdout.readline().split()[-1]
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stratasim",
                "run",
                QUICKSTART,
                "--set",
                f"network.endpoint={endpoint}",
                "--set",
                "network.backend=congestion_aware",
                "--set",
                "network.topology=[{kind: ring, size: 512, bandwidth: 50GB/s, latency: 500ns}]",
                "--set",
                "system.splits=32",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        # The run starts (imports, builds its graphs), connects, then asks for its first window.
        wait_until(lambda: marker.exists() or run.poll() is not None, 60, "the run's first window at the server")
        os.kill(server.pid, signal.SIGKILL)
        _, stderr = run.communicate(timeout=30)  # ends, rather than waiting for a server that is gone
        assert_one_clear_message(run.returncode, stderr, f"network layer at {endpoint} went away", "at simulated time")
    finally:
        server.kill()
        server.wait()


def test_spawned_layers_give_the_in_process_result_for_the_training_loop() -> None:
    from stratasim.config.study_file import load_study
    from stratasim.study.run import run_study

    study = ROOT / "examples" / "training_loop.yaml"
    local = run_study(load_study(study)).to_dict()
    remote = run_study(load_study(study, ["network.spawn=true", "compute.spawn=true"])).to_dict()
    for report in (local, remote):
        # In-process the analytical network prices each message as it is sent (no time windows), so the
        # engine processes fewer events; every simulated figure must agree.
        del report["wall_seconds"], report["backends"], report["events_processed"]
    assert local == remote


def test_an_algorithm_that_does_not_fit_its_dimension_fails_check_and_run() -> None:
    override = ("--set", "system.algorithm=halving_doubling", "--set", "network.topology.0.size=6")
    for command in ("check", "run"):
        done = stratasim_process(command, QUICKSTART, *override)
        code, stderr = done.returncode, done.stderr
        assert_one_clear_message(code, stderr, "halving_doubling needs a power of two", "lines of 6 NPUs")


def test_an_unknown_algorithm_is_named() -> None:
    done = stratasim_process("check", QUICKSTART, "--set", "system.algorithm=butterfly")
    code, stderr = done.returncode, done.stderr
    assert_one_clear_message(code, stderr, "system.algorithm", "unknown algorithm 'butterfly'")


def test_splits_must_be_positive() -> None:
    done = stratasim_process("check", QUICKSTART, "--set", "system.splits=0")
    code, stderr = done.returncode, done.stderr
    assert_one_clear_message(code, stderr, "system.splits", "greater than or equal to 1")


def test_a_group_naming_npus_outside_the_topology() -> None:
    from stratasim.kernel.errors import WorkloadError
    from stratasim.system_layer import SystemOptions, validate
    from stratasim.v1 import network_pb2, workload_pb2

    graph = workload_pb2.ExecutionGraph(
        nodes=[
            workload_pb2.Node(
                id=3, name="tp", type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, group=[0, 9]
            )
        ]
    )
    topo = network_pb2.Topology(dimensions=[network_pb2.Dimension(kind=1, size=4, bandwidth_bytes_per_s=1e9)])
    with pytest.raises(WorkloadError, match=r"NPU 0 node 3 \('tp'\): group names NPU 9, but there are only 4 NPUs"):
        validate([graph] * 4, topo, SystemOptions())


def test_a_reader_that_stops_early_is_not_an_error() -> None:
    # `true` exits without reading, long before the report is printed: the write meets a closed pipe.
    done = subprocess.run(
        f"{sys.executable} -m stratasim run examples/quickstart.yaml | true",
        shell=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == ""


def test_the_serve_entry_of_spawned_servers_loads_only_what_serving_needs() -> None:
    # What spawn runs (python -m stratasim.remote.serve_main) must not pay for study files, the engine, the
    # command line or gRPC before it serves.
    code = (
        "import sys; import stratasim.remote.serve_main; "
        "print(sorted(m for m in sys.modules if m.startswith(('stratasim.config', 'stratasim.system_layer', "
        "'stratasim.study', 'stratasim.cli', 'pydantic', 'grpc'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("network", "--backend", "analytical", "--listen", "nowhere"), "or unix:PATH, got 'nowhere'"),
        (("network", "--backend", "analytical", "--profile", "times.csv"), "--profile is read by the profile"),
        (("network", "--backend", "warp", "--listen", "127.0.0.1:0"), "no network backend named 'warp'"),
    ],
    ids=["listen", "profile", "backend"],
)
def test_the_serve_entry_of_spawned_servers_refuses_bad_input(args: tuple[str, ...], fragment: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stratasim.cli.serve", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr and fragment in done.stderr


def test_grpc_core_log_lines_stay_off_the_error_output() -> None:
    # A bind that fails makes gRPC's C core log an "E... add_port.cc" line before the exception; the command line
    # keeps the core quiet, so its one error line comes first (as under a memory limit, where the core may complain
    # about epoll).
    done = stratasim_process("serve", "compute", "--backend", "roofline", "--listen", "256.0.0.1:1")
    code, stderr = done.returncode, done.stderr
    assert_one_clear_message(code, stderr, "cannot listen on '256.0.0.1:1'")
    assert stderr.startswith("error: ")
