"""``serve`` runs a backend behind its gRPC service; ``spawn`` runs one in a child process and cleans it up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stratasim.kernel import registry
from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.errors import BackendError, RemoteError
from stratasim.remote import ComputeClient, NetworkClient, serve, spawn, start
from stratasim.v1 import compute_pb2, network_pb2
from tests.contracts.contract_fakes import FakeNetwork, factories, served
from tests.remote.helpers import serve_command

TOPOLOGY = network_pb2.Topology(
    dimensions=[
        network_pb2.Dimension(kind=network_pb2.Dimension.SWITCH, size=8, bandwidth_bytes_per_s=1e10, latency_ps=2000)
    ]
)
SENDS = network_pb2.SendBatch(
    id=[3, 1, 2], src=[0, 1, 2], dst=[7, 6, 5], bytes=[100, 1 << 20, 0], send_time_ps=[0, 5, 5]
)


def _gone(pid: int) -> bool:
    """Whether process ``pid`` no longer exists (spawn's child is reaped, so not even a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _drain(network: NetworkBackend) -> list[network_pb2.AdvanceResult]:
    results = [network.advance(-1)]
    while results[-1].has_next:
        results.append(network.advance(-1))
    return results


def test_serve_prints_the_endpoint_and_calls_ready(capsys: pytest.CaptureFixture[str]) -> None:
    with served("network", "fake", factories("network")) as endpoint:
        host, _, port = endpoint.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
    assert f"listening on {endpoint}\n" in capsys.readouterr().out


def test_serve_refuses_what_it_cannot_serve() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(BackendError, match="no network backend named 'nope'"):
        serve("network", "nope", "127.0.0.1:0", stop=stop)
    with pytest.raises(BackendError, match="workload layer has no gRPC service"):
        serve("workload", "fake", "127.0.0.1:0", factories={"fake": object}, stop=stop)
    with pytest.raises(RemoteError, match="network layer cannot listen on 'nowhere'"):
        serve("network", "fake", "nowhere", factories=factories("network"), stop=stop)


def test_serve_off_the_main_thread_needs_a_stop_event() -> None:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            serve("network", "fake", "127.0.0.1:0", factories=factories("network"))
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    assert len(failures) == 1 and isinstance(failures[0], ValueError)


def test_spawn_yields_a_working_endpoint_and_stops_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    prelude = f"import os; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
    with spawn("network", "fake", command=serve_command("network", "fake", prelude)) as endpoint:
        network = NetworkClient(endpoint, backend="fake", timeout_s=5)
        network.configure(TOPOLOGY)
        network.inject(SENDS)
        remote = _drain(network)
        network.close()
        pid = int(pid_file.read_text())
        assert not _gone(pid)
    assert _gone(pid)
    local = FakeNetwork()
    local.configure(TOPOLOGY)
    local.inject(SENDS)
    assert remote == _drain(local)


def test_start_hands_back_a_server_whose_endpoint_waits_for_it_to_listen(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    prelude = f"import os; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
    with start("network", "fake", command=serve_command("network", "fake", prelude)) as server:
        endpoint = server.endpoint()
        assert server.endpoint() == endpoint  # asked again: no second wait
        network = NetworkClient(endpoint, backend="fake", timeout_s=5)
        try:
            assert network.configure(TOPOLOGY).npus == 8
        finally:
            network.close()
        pid = int(pid_file.read_text())
    assert _gone(pid)


def test_spawned_servers_of_a_study_listen_on_unix_domain_sockets() -> None:
    with spawn("network", "analytical") as endpoint:
        assert endpoint.startswith("unix:") and endpoint.endswith("/network.sock")
        socket = endpoint.removeprefix("unix:")
        assert os.path.exists(socket)
    assert not os.path.exists(socket)  # the private directory goes with the server


def test_spawn_reports_a_child_that_exits_early() -> None:
    command = [
        sys.executable,
        "-c",
        "import sys; print('Traceback...', file=sys.stderr); "
        "print('ValueError: no such device', file=sys.stderr); sys.exit(3)",
    ]
    with pytest.raises(RemoteError) as raised, spawn("compute", "roofline", command=command):
        pytest.fail("spawn must not yield")
    assert str(raised.value) == (
        "compute layer server (roofline) exited with code 3 before listening: Traceback... | ValueError: no such device"
    )


def test_spawn_gives_up_on_a_silent_child_and_stops_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # The child's sleep is its workload (silent, never listening, until spawn stops it), not a wait of the test's.
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    started = time.monotonic()
    with pytest.raises(RemoteError, match=r"network layer server \(fake\) did not start listening within 0.5 s"):
        with spawn("network", "fake", timeout_s=0.5, command=[sys.executable, "-c", code]):
            pytest.fail("spawn must not yield")
    assert time.monotonic() - started < 5
    assert _gone(int(pid_file.read_text()))


def test_spawn_stops_the_child_when_the_body_fails(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    prelude = f"import os; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
    with pytest.raises(KeyError), spawn("compute", "fake", command=serve_command("compute", "fake", prelude)):
        raise KeyError("body failed")
    assert _gone(int(pid_file.read_text()))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_cleanly_on_a_signal(sig: signal.Signals) -> None:
    process = subprocess.Popen(serve_command("compute", "fake"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith(b"listening on 127.0.0.1:")
        process.send_signal(sig)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("name", registry.available("network"))
def test_spawn_runs_the_real_serve_command_for_network(name: str) -> None:
    timeout_s = 10
    if name == "ns3":  # an adapter: only with its extra; starting ns-3 takes 1-2 s, 10-15 s with an empty cache
        pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'stratasim[ns3]'")
        timeout_s = 120
    local = registry.load("network", name)()
    local.configure(TOPOLOGY)
    local.inject(SENDS)
    with spawn("network", name) as endpoint:
        network = NetworkClient(endpoint, backend=name, timeout_s=timeout_s)
        try:
            network.configure(TOPOLOGY)
            network.inject(SENDS)
            assert _drain(network) == _drain(local)
        finally:
            network.close()


@pytest.mark.parametrize("name", registry.available("compute"))
def test_spawn_runs_the_real_serve_command_for_compute(name: str) -> None:
    # The profile backend reads a table; the contract suite's serves here too (``--profile FILE``).
    from stratasim.compute_layer.backend_section import BackendSection
    from stratasim.study.compute_setup import build_compute

    table = Path(__file__).parents[1] / "contracts" / "contract_profile.csv"
    section = BackendSection(profile=str(table)) if name == "profile" else None
    local = build_compute(name, section)
    with spawn("compute", name, section=section) as endpoint:
        compute = ComputeClient(endpoint, backend=name, timeout_s=10)
        try:
            assert compute.devices() == local.devices()
            op = compute_pb2.OperatorDesc(dtype=compute_pb2.BF16, flops=1 << 30, bytes=1 << 20)
            request = compute_pb2.EstimateRequest(device=local.devices()[0], ops=[op])
            assert compute.estimate(request) == local.estimate(request)
        finally:
            compute.close()


def test_one_server_serves_the_network_and_the_compute_layer() -> None:
    # What a run that spawns both layers starts: one child, one endpoint, each layer's own handshake.
    with start("network", "analytical", also=("compute", "roofline")) as server:
        endpoint = server.endpoint()
        assert endpoint.endswith("/network+compute.sock")
        network = NetworkClient(endpoint, backend="analytical", timeout_s=10)
        compute = ComputeClient(endpoint, backend="roofline", timeout_s=10)
        try:
            assert network.configure(TOPOLOGY).npus == 8 and "h100" in compute.devices()
        finally:
            network.close()
            compute.close()


def test_serve_refuses_a_layer_twice() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(BackendError, match="serves each layer once; asked for network, network"):
        serve("network", "fake", "127.0.0.1:0", factories=factories("network"), stop=stop, also=[("network", "fake")])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--also", "compute"], "argument --also: expected LAYER:BACKEND with LAYER one of network, compute"),
        (["--also", "workload:fake"], "argument --also: expected LAYER:BACKEND"),
        (["--also", "network:analytical"], "error: --also: network is served already; name the other layer"),
        (["--also", "compute:nope"], "error: no compute backend named 'nope'"),
        (["--also", "compute:roofline", "--profile", "t.csv"], "error: --profile is read by the profile compute"),
    ],
    ids=["no-backend", "no-service", "twice", "unknown-backend", "profile-elsewhere"],
)
def test_a_bad_also_is_one_clear_error(arguments: list[str], message: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stratasim.cli.serve",
            "network",
            "--backend",
            "analytical",
            "--listen",
            "127.0.0.1:0",
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert message in done.stderr and done.stderr.count("error:") == 1


def test_a_run_spawning_both_layers_starts_one_server() -> None:
    from stratasim.config.study_file import load_study
    from stratasim.study.run import run_study

    quickstart = Path(__file__).parents[2] / "examples" / "quickstart.yaml"
    report = run_study(load_study(quickstart, ["network.spawn=true", "compute.spawn=true"]))
    network, compute = (report.backends[layer].split(" @ ")[1] for layer in ("network", "compute"))
    assert network == compute and network.endswith("/network+compute.sock (spawned)")
