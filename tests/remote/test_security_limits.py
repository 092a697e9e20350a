"""Servers with TLS and a token, per-session limits, an idle timeout and study-set deadlines (issue 15, item 3)."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from stratasim import run
from stratasim.kernel.errors import BackendError, ConfigError, RemoteError
from stratasim.network_layer.topologies import size as topology_size
from stratasim.remote import ComputeClient, NetworkClient
from stratasim.remote.limits import CLOSE_GRACE_S, Limits, SessionSlots, check_topology
from stratasim.remote.security import ClientSecurity, ServerSecurity, exposure_warning
from stratasim.v1 import compute_pb2, network_pb2
from tests.contracts.contract_fakes import factories, served
from tests.helpers import wait_until
from tests.remote.helpers import refused_endpoint
from tests.remote.test_remote_errors import _HangingNetwork

TOKEN = "s3cret-token-for-tests"
_RING = network_pb2.Dimension.RING
_FULLY_CONNECTED = network_pb2.Dimension.FULLY_CONNECTED
SMALL = network_pb2.Topology(
    dimensions=[
        network_pb2.Dimension(kind=_RING, size=8, bandwidth_bytes_per_s=50e9, latency_ps=500_000),
    ]
)


def secured(
    layer: str,
    backend: str,
    *,
    security: ServerSecurity | None = None,
    limits: Limits | None = None,
    extra: dict[str, Callable[[], Any]] | None = None,
    also: tuple[tuple[str, str], ...] = (),
    listen: str = "127.0.0.1:0",
) -> AbstractContextManager[str]:
    """``serve`` in a background thread with ``security`` and ``limits``; yields its endpoint."""
    return served(layer, backend, extra, listen=listen, security=security, limits=limits, also=also)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A self-signed certificate for ``localhost`` and its key (PEM files), and a token file."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("pki")
    files = {"cert": folder / "server.pem", "key": folder / "server.key", "token": folder / "token"}
    files["cert"].write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    files["token"].write_text(TOKEN + "\n")
    return files


def _server_security(pki: dict[str, Path]) -> ServerSecurity:
    return ServerSecurity(token=TOKEN, certificate=pki["cert"].read_bytes(), private_key=pki["key"].read_bytes())


def _study(network: dict[str, Any], compute: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "secured",
        "workload": {
            "kind": "training_loop",
            "layers": [
                {
                    "name": "block",
                    "forward": {"gemm": [1024, 1024, 1024]},
                    "weight_grad": {"gemm": [1024, 1024, 1024]},
                    "weight_grad_comm": {"collective": "all_reduce", "size": "8MiB"},
                }
            ],
        },
        "system": {"algorithm": "ring", "splits": 2},
        "network": {
            "backend": "analytical",
            "topology": [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}],
            **network,
        },
        "compute": {"backend": "roofline", "device": "h100", **compute},
    }


def test_a_client_without_the_token_is_refused_with_a_clear_message(pki: dict[str, Path]) -> None:
    with secured(
        "network", "analytical", security=_server_security(pki), also=(("compute", "roofline"),), listen="localhost:0"
    ) as endpoint:
        root = pki["cert"].read_bytes()
        for token, why in ((None, "no bearer token"), ("wrong", "the bearer token does not match")):
            started = time.monotonic()
            with pytest.raises(
                RemoteError,
                match=rf"^network layer at {endpoint} refused the client: "
                rf"unauthenticated: {why} .*\(stage: handshake\)$",
            ):
                NetworkClient(endpoint, backend="analytical", security=ClientSecurity(root, token))
            with pytest.raises(RemoteError, match=rf"compute layer at {endpoint} refused the client: .*{why}"):
                ComputeClient(endpoint, backend="roofline", security=ClientSecurity(root, token))
            assert time.monotonic() - started < 3
        with pytest.raises(
            RemoteError, match=r"closed the connection before any handshake: it serves TLS, most likely"
        ):
            NetworkClient(endpoint, backend="analytical", connect_timeout_s=0.5, security=ClientSecurity(None, TOKEN))


def _other_certificate() -> bytes:
    """A self-signed certificate for ``localhost`` that signed nothing the servers use."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    builder = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
    builder = builder.serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


@pytest.mark.parametrize("client", [NetworkClient, ComputeClient])
def test_a_wrong_ca_or_tls_to_plaintext_is_a_tls_failure_not_unreachable(
    pki: dict[str, Path], client: type[NetworkClient] | type[ComputeClient]
) -> None:
    backend = "analytical" if client is NetworkClient else "roofline"
    layer = "network" if client is NetworkClient else "compute"
    untrusted = ClientSecurity(_other_certificate(), TOKEN)
    with secured(layer, backend, security=_server_security(pki), listen="localhost:0") as endpoint:
        with pytest.raises(RemoteError, match=r"TLS handshake failed: the server's certificate is not trusted"):
            client(endpoint, backend=backend, connect_timeout_s=0.5, security=untrusted)
    with secured(layer, backend, listen="localhost:0") as endpoint:
        trusting = ClientSecurity(pki["cert"].read_bytes(), TOKEN)
        with pytest.raises(RemoteError, match=r"TLS handshake failed: the server does not speak TLS"):
            client(endpoint, backend=backend, connect_timeout_s=0.5, security=trusting)
    with refused_endpoint() as endpoint, pytest.raises(RemoteError, match=r"is unreachable \(no handshake within"):
        client(endpoint, backend=backend, connect_timeout_s=0.5)


def test_with_the_token_over_tls_results_are_identical_to_in_process(pki: dict[str, Path]) -> None:
    in_process = run(_study({}, {}))
    with secured(
        "network", "analytical", security=_server_security(pki), also=(("compute", "roofline"),), listen="localhost:0"
    ) as endpoint:
        placed = {
            "endpoint": endpoint,
            "tls_ca": str(pki["cert"]),
            "token_file": str(pki["token"]),
            "timeout": "5s",
            "connect_timeout": "2s",
        }
        remote = run(_study(placed, placed))
    assert remote.total_time_ps == in_process.total_time_ps > 0
    assert remote.to_dict()["per_npu"] == in_process.to_dict()["per_npu"]


def test_the_token_may_come_from_an_environment_variable(pki: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_STRATASIM_TOKEN", TOKEN)
    with secured("network", "analytical", security=_server_security(pki), listen="localhost:0") as endpoint:
        placed = {"endpoint": endpoint, "tls_ca": str(pki["cert"]), "token_env": "MY_STRATASIM_TOKEN"}
        assert run(_study(placed, {})).total_time_ps == run(_study({}, {})).total_time_ps
    monkeypatch.delenv("MY_STRATASIM_TOKEN")
    with pytest.raises(RemoteError, match="network.token_env: the environment variable MY_STRATASIM_TOKEN is not set"):
        run(_study({"endpoint": "localhost:1", "token_env": "MY_STRATASIM_TOKEN"}, {}))


def _admitted(endpoint: str) -> NetworkClient:
    """A new client of ``endpoint``, as soon as the server gives it a place (asked again while it answers "busy")."""
    admitted: list[NetworkClient] = []

    def place() -> bool:
        try:
            admitted.append(NetworkClient(endpoint, backend="fake", timeout_s=2))
        except RemoteError as error:
            if "server busy" not in str(error):
                raise
        return bool(admitted)

    wait_until(place, 10, f"a place at the server at {endpoint}")
    return admitted[0]


def test_an_idle_client_is_evicted_and_others_get_through() -> None:
    limits = Limits(max_sessions=1, idle_timeout_s=0.3)
    with secured("network", "fake", limits=limits, extra=factories("network")) as endpoint:
        idle = NetworkClient(endpoint, backend="fake", timeout_s=2)
        try:
            with pytest.raises(
                RemoteError,
                match=r"server busy: all 1 sessions are in use and none has been idle for "
                r"0.3 s .*\(stage: handshake\)",
            ):
                NetworkClient(endpoint, backend="fake", timeout_s=2)
            for _ in range(3):  # each in turn, the last one's session idle (closed) or gone
                other = _admitted(endpoint)  # once past the idle timeout: a closed session not yet let go is idle
                assert other.configure(SMALL).npus == 8
                other.close()
            with pytest.raises(
                RemoteError,
                match=r"ended the session: it is stopping, or it evicted this session for "
                r"sitting idle longer than its --idle-timeout .*\(stage: call configure\)",
            ):
                idle.configure(SMALL)
        finally:
            idle.close()


def test_a_place_freed_a_moment_later_is_waited_for_not_refused() -> None:
    """A client that closes its session and opens another at once: the server frees the old place only when its
    thread sees the stream end. A new session waits up to CLOSE_GRACE_S for it rather than being refused; with no
    place freed and none idle past the timeout it is refused after that grace."""
    slots = SessionSlots(1, idle_timeout_s=60)
    old = slots.take(lambda: None)
    assert old is not None
    old.idle_since = None  # busy: not evictable
    threading.Timer(0.05, slots.give_back, (old,)).start()
    started = time.monotonic()
    new = slots.take(lambda: None)
    assert new is not None and time.monotonic() - started < CLOSE_GRACE_S
    new.idle_since = None
    started = time.monotonic()
    assert slots.take(lambda: None) is None
    assert time.monotonic() - started >= CLOSE_GRACE_S * 0.9


def test_an_idle_session_keeps_its_place_while_nobody_needs_it() -> None:
    limits = Limits(max_sessions=2, idle_timeout_s=0.2)
    with secured("network", "fake", limits=limits, extra=factories("network")) as endpoint:
        slow = NetworkClient(endpoint, backend="fake", timeout_s=2)  # a run whose engine computes for a while
        try:
            time.sleep(0.4)  # idle past the timeout: the time that passes is what this test is about, not a wait
            assert slow.configure(SMALL).npus == 8
        finally:
            slow.close()


def test_a_busy_session_is_never_evicted() -> None:
    from stratasim.remote.limits import SessionSlots

    cancelled: list[str] = []
    slots = SessionSlots(1, idle_timeout_s=0.0)
    working = slots.take(lambda: cancelled.append("working"))
    assert working is not None
    working.idle_since = None  # the server is answering its request
    assert slots.take(lambda: cancelled.append("new")) is None and cancelled == []
    working.idle_since = time.monotonic() - 1
    assert slots.take(lambda: cancelled.append("new")) is not None and cancelled == ["working"]


@pytest.mark.parametrize(
    "topology",
    [
        network_pb2.Topology(dimensions=[network_pb2.Dimension(kind=_RING, size=10**8, bandwidth_bytes_per_s=1e9)]),
        network_pb2.Topology(
            dimensions=[network_pb2.Dimension(kind=_FULLY_CONNECTED, size=10**5, bandwidth_bytes_per_s=1e9)]
        ),
        network_pb2.Topology(
            dimensions=[network_pb2.Dimension(kind=_RING, size=2**32 - 1, bandwidth_bytes_per_s=1e9)] * 3
        ),
        network_pb2.Topology(
            dimensions=[network_pb2.Dimension(size=8)],
            nvswitch=network_pb2.NvSwitchFabric(gpus_per_board=8, planes=10**8, boards=1),
        ),
        network_pb2.Topology(dimensions=[network_pb2.Dimension(size=16)], fat_tree=network_pb2.FatTreeFabric(k=10**4)),
        network_pb2.Topology(
            dimensions=[network_pb2.Dimension(size=8)],
            hierarchical_alltoall=network_pb2.HierarchicalAlltoallFabric(local_size=2, packages=4, switches=10**8),
        ),
        network_pb2.Topology(
            dimensions=[network_pb2.Dimension(size=8)],
            dragonfly=network_pb2.DragonflyFabric(
                groups=2, routers_per_group=10**5, hosts_per_router=1, global_links_per_router=10**4
            ),
        ),
        network_pb2.Topology(
            dimensions=[network_pb2.Dimension(size=65536)], torus=network_pb2.TorusFabric(shape=[65536, 65536])
        ),
    ],
    ids=["ring", "fully-connected", "three-rings", "nvswitch-planes", "fat-tree", "hierarchical", "dragonfly", "torus"],
)
def test_a_configure_bomb_is_refused_fast_before_any_work(topology: network_pb2.Topology) -> None:
    assert topology.ByteSize() < 120  # a ~100-byte request
    with secured("network", "congestion_aware") as endpoint:
        network = NetworkClient(endpoint, backend="congestion_aware", timeout_s=5)
        try:
            started = time.monotonic()
            with pytest.raises(
                BackendError,
                match=r"exceed this server's limit of .* \(its --max-(npus|links)\); "
                "refused before building anything",
            ):
                network.configure(topology)
            assert time.monotonic() - started < 1
            assert network.configure(SMALL).npus == 8  # the session goes on
        finally:
            network.close()


def test_a_send_of_a_terabyte_to_a_flit_level_server_is_refused_without_exhausting_it() -> None:
    with secured("network", "flit_level") as endpoint:
        network = NetworkClient(endpoint, backend="flit_level", timeout_s=5)
        try:
            network.configure(SMALL)
            network.inject(network_pb2.SendBatch(id=[7], src=[0], dst=[1], bytes=[10**12], send_time_ps=[1]))
            started = time.monotonic()
            with pytest.raises(
                BackendError,
                match=r"message 7: 1000000000000 bytes make [\d,]+ packets .* holds at "
                "most",
            ):
                network.advance(-1)
            assert time.monotonic() - started < 1
        finally:
            network.close()


def test_topology_size_counts_what_backends_build() -> None:
    assert topology_size(SMALL) == (8, 16)
    fat = network_pb2.Topology(fat_tree=network_pb2.FatTreeFabric(k=4))
    npus, links = topology_size(fat)
    assert npus == 16 and links >= 2 * 48  # 16 host, 16 edge-aggregation and 16 aggregation-core duplex links


@pytest.mark.parametrize("fabric", ["torus", "dimensions"])
def test_a_long_shape_list_is_sized_in_one_pass_and_refused_clearly(fabric: str) -> None:
    # 10^5 sizes of 2^32 - 1: their exact product has some 10^6 digits, each multiplication dearer than the last
    # (minutes); counted up to a cap, one pass, and the count prints (the exact one exceeds Python's digit limit).
    shape = [2**32 - 1] * 10**5
    if fabric == "torus":
        topology = network_pb2.Topology(torus=network_pb2.TorusFabric(shape=shape))
    else:
        topology = network_pb2.Topology(dimensions=[network_pb2.Dimension(size=size) for size in shape])
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"topology: over 9,223,372,036,854,775,807 NPUs exceed .* --max-npus"):
        check_topology(topology, Limits())
    assert time.monotonic() - started < 3


def test_a_study_deadline_names_the_stage_and_the_simulated_time() -> None:
    release = threading.Event()
    try:
        with secured("network", "hung", extra={"hung": lambda: _HangingNetwork(release)}) as endpoint:
            study = _study({"backend": "hung", "endpoint": endpoint, "timeout": "300ms"}, {})
            study["network"]["topology"] = [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}]
            started = time.monotonic()
            with pytest.raises(
                RemoteError,
                match=rf"network layer at {endpoint} did not answer within 0.3 s "
                r"\(deadline exceeded\) \(stage: call advance\) \(at simulated time",
            ):
                run(study)
            assert time.monotonic() - started < 3
    finally:
        release.set()


def test_listening_beyond_loopback_without_tls_and_token_warns(capsys: pytest.CaptureFixture[str]) -> None:
    with secured("network", "fake", extra=factories("network"), listen="0.0.0.0:0"):
        pass
    assert "WARNING: listening on 0.0.0.0:" in capsys.readouterr().err
    tls_only = ServerSecurity(certificate=b"pem", private_key=b"pem")
    assert "without a token" in (exposure_warning("10.0.0.1:50051", tls_only) or "")
    assert "without TLS or a token" in (exposure_warning("[::]:50051", ServerSecurity()) or "")
    for quiet in ("127.0.0.1:50051", "localhost:1", "[::1]:5", "unix:/tmp/x.sock"):
        assert exposure_warning(quiet, ServerSecurity()) is None
    assert exposure_warning("0.0.0.0:1", ServerSecurity(token="t", certificate=b"c", private_key=b"k")) is None


def test_an_oversized_request_is_refused() -> None:
    with secured("compute", "fake", limits=Limits(max_request_bytes=4096), extra=factories("compute")) as endpoint:
        compute = ComputeClient(endpoint, backend="fake", timeout_s=5)
        try:
            request = compute_pb2.EstimateRequest(device="fake-npu" + "x" * 8192)
            with pytest.raises(
                RemoteError,
                match=r"Received message larger than max \(8\d+ vs. 4096\) "
                r"\(stage: call estimate\)$",
            ):
                compute.estimate(request)
        finally:
            compute.close()


@pytest.mark.parametrize(
    ("placed", "key", "expected"),
    [
        ({"tls_ca": "ca.pem"}, "network", "for a server at an endpoint"),
        ({"endpoint": "localhost:1", "token_file": "missing-token"}, "network.token_file", "no such file"),
        (
            {"endpoint": "localhost:1", "token_env": "not a name"},
            "network.token_env",
            "name of an environment variable",
        ),
        ({"timeout": 30}, "network.timeout", "unit"),
        ({"connect_timeout": "0s"}, "network.connect_timeout", "positive time"),
        ({"endpoint": "localhost:1", "token_file": "t", "token_env": "T"}, "network", "one of them"),
    ],
)
def test_bad_remote_keys_name_the_key(placed: dict[str, Any], key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        run(_study(placed, {}))
    assert key in str(raised.value) and expected in str(raised.value)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--token-file", "missing"], "error: --token-file: cannot read 'missing'"),
        (["--token-file", "empty"], "error: --token-file: 'empty' is empty"),
        (["--tls-cert", "server.pem"], "error: --tls-cert and --tls-key go together"),
        (["--tls-client-ca", "server.pem"], "error: --tls-client-ca asks clients for certificates over TLS"),
        (["--tls-cert", "token", "--tls-key", "token"], "error: --tls-cert: 'token' holds no PEM certificate"),
        (
            ["--tls-cert", "server.pem", "--tls-key", "server.pem"],
            "error: --tls-key: 'server.pem' holds no PEM private key",
        ),
    ],
)
def test_bad_serve_security_options_fail_before_listening(
    options: list[str],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pki: dict[str, Path],
) -> None:
    from stratasim.cli.serve import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "server.pem").write_bytes(pki["cert"].read_bytes())
    assert main(["network", "--backend", "fake", "--listen", "127.0.0.1:0", *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--idle-timeout", "5"], "argument --idle-timeout: expected a time with its unit"),
        (["--idle-timeout", "0s"], "argument --idle-timeout: expected a positive time"),
        (["--max-sessions", "0"], "argument --max-sessions: expected a whole number, at least 1"),
        (["--max-npus", "many"], "argument --max-npus: expected a whole number"),
        (["--max-request-bytes", "10B"], "argument --max-request-bytes: expected between 1KiB and 2GiB"),
        (["--max-request-bytes", "64"], "argument --max-request-bytes: expected a size with its unit"),
    ],
)
def test_bad_serve_limit_options_name_the_option(
    options: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from stratasim.cli.serve import main

    with pytest.raises(SystemExit) as exited:
        main(["network", "--backend", "fake", *options])
    assert exited.value.code == 2
    assert expected in capsys.readouterr().err


def test_the_server_token_comes_from_its_file_or_the_environment(
    pki: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from stratasim.cli.serve import add_arguments, options_of
    from stratasim.remote.serve_main import server_security

    def _security(args: argparse.Namespace) -> ServerSecurity:
        return server_security(options_of(args))

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    monkeypatch.delenv("STRATASIM_TOKEN", raising=False)
    assert _security(parser.parse_args(["network", "--backend", "fake"])).token is None
    monkeypatch.setenv("STRATASIM_TOKEN", "from-env")
    assert _security(parser.parse_args(["network", "--backend", "fake"])).token == "from-env"
    chosen = _security(
        parser.parse_args(
            [
                "network",
                "--backend",
                "fake",
                "--token-file",
                str(pki["token"]),
                "--tls-cert",
                str(pki["cert"]),
                "--tls-key",
                str(pki["key"]),
            ]
        )
    )
    assert chosen.token == TOKEN and chosen.tls


def test_a_spawned_server_asks_for_its_random_token() -> None:
    from stratasim.remote import new_token, start

    token = new_token()
    assert len(token) >= 40 and token != new_token()
    with start("network", "analytical", token=token) as server:
        endpoint = server.endpoint()
        assert server.token == token
        with pytest.raises(RemoteError, match="refused the client: unauthenticated: no bearer token"):
            NetworkClient(endpoint, backend="analytical")
        network = NetworkClient(endpoint, backend="analytical", security=ClientSecurity(token=token))
        assert network.configure(SMALL).npus == 8
        network.close()


def test_a_spawned_run_matches_in_process() -> None:
    study = _study({"spawn": True, "timeout": "10s"}, {"spawn": True})
    assert run(study).total_time_ps == run(_study({}, {})).total_time_ps


def test_a_network_pricing_on_the_spot_that_hangs_names_the_call_and_the_simulated_time() -> None:
    from stratasim.kernel import registry

    release = threading.Event()
    analytical = registry.load("network", "analytical")

    class Hanging(analytical):  # type: ignore[misc, valid-type]
        def transits_ps(self, *columns: Any) -> Any:
            release.wait()
            return super().transits_ps(*columns)

    try:
        with secured("network", "analytical", extra={"analytical": Hanging}) as endpoint:
            started = time.monotonic()
            with pytest.raises(
                RemoteError,
                match=r"did not answer within 0.3 s \(deadline exceeded\) "
                r"\(stage: call transit\) \(at simulated time",
            ):
                run(_study({"endpoint": endpoint, "timeout": "300ms"}, {}))
            assert time.monotonic() - started < 3
    finally:
        release.set()
