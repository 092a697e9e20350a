"""The serving pricing oracle (``stratasim serve serving``): a replay through it equals the in-process run to the
picosecond, request by request and iteration by iteration; malformed batches, unknown pools and sessions, and studies
the server may not read are refused with a status naming the field."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import grpc
import pytest

from stratasim.config.study_file import load_study
from stratasim.kernel.contracts import PROTOCOL_VERSION
from stratasim.kernel.errors import RemoteError
from stratasim.kernel.serving import IterationShape, ServingResult
from stratasim.remote import ServingPricerClient
from stratasim.remote.limits import Limits
from stratasim.remote.security import ClientSecurity, ServerSecurity
from stratasim.study.budget import DEFAULT_BUDGET
from stratasim.study.serving import serve
from stratasim.study.serving_oracle import OpenedServingStudy, open_served_study
from stratasim.v1 import common_pb2, serving_pb2, serving_pb2_grpc
from stratasim.workload_layer.serving.pool_run import PoolRun
from tests.contracts.contract_fakes import served
from tests.hardening.test_safe_load import laughs
from tests.remote.helpers import refused_endpoint

ROOT = Path(__file__).resolve().parents[2]
SERVING = ROOT / "examples" / "serving"
TP8 = SERVING / "llama3_70b_h100_tp8.yaml"
OPENERS = {"study": open_served_study}
DEEP_YAML = "a: " + "[" * 10_000 + "]" * 10_000 + "\n"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("replay_trace", ROOT / "examples" / "oracle" / "replay_trace.py")
    assert spec and spec.loader
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up by name
        spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def oracle() -> Iterator[str]:
    """An oracle in a thread, reading no files."""
    with served("serving", "study", OPENERS) as endpoint:
        yield endpoint


def _in_process(study: Path, overrides: list[str]) -> tuple[PoolRun, ServingResult]:
    """The loop's run of ``study`` as ``stratasim run`` runs it, and its result."""
    loaded = load_study(study, overrides)
    workload = loaded.workload.build()
    runs: list[PoolRun] = []
    served_run = serve(loaded, workload, DEFAULT_BUDGET, runs=runs)  # type: ignore[arg-type]
    return runs[0], served_run.result


@pytest.mark.parametrize(
    ("study", "count"),
    [
        (TP8, 60),  # the study: the replay example's default
        (SERVING / "llama3_70b_h100_disaggregated.yaml", 30),  # KV moves priced by the oracle
        (SERVING / "mixtral_8x7b_h100_ep8.yaml", 30),  # expert parts priced by the oracle
    ],
    ids=["tp8", "disaggregated", "ep8"],
)
def test_a_replay_through_the_oracle_equals_the_in_process_run(oracle: str, study: Path, count: int) -> None:
    overrides = [f"workload.requests.count={count}"]
    example = _example()
    replayed = example.replay(study, overrides, oracle)
    times, remote = replayed.times, replayed.run
    local, result = _in_process(study, overrides)
    assert len(times) == count
    assert [(t.ttft_ps, t.tpot_ps) for t in times] == [(t.ttft_ps, t.tpot_ps) for t in example.request_times(local)]
    assert remote.record == local.record  # every price: each iteration's start, stage ends and end
    assert remote.moves == local.moves
    assert remote.kv_replica_blocks == local.kv_replica_blocks
    assert replayed.result.figures == result.figures
    assert replayed.result.compute_energy_pj == result.compute_energy_pj > 0


class _OnePicosecondOff:
    """A served study whose ``n``-th distinct iteration priced takes one picosecond more."""

    def __init__(self, study: OpenedServingStudy, n: int) -> None:
        self._study, self._n, self._seen = study, n, 0
        self.description = study.description
        self.price_experts, self.price_kv_moves, self.close = study.price_experts, study.price_kv_moves, study.close

    def price_iteration(self, pool: int, shape: IterationShape) -> tuple[tuple[int, ...], float]:
        stages, energy = self._study.price_iteration(pool, shape)
        self._seen += 1
        return (stages[0] + (self._seen == self._n), *stages[1:]), energy


def test_the_comparison_fails_when_one_price_is_one_picosecond_off() -> None:
    overrides = ["workload.requests.count=60"]
    local = _example().request_times(_in_process(TP8, overrides)[0])
    for n in (1, 40, 80):  # the first shape priced, and later ones
        off = {"study": lambda request, n=n: _OnePicosecondOff(open_served_study(request), n)}
        with served("serving", "study", off) as endpoint:
            times = _example().replay(TP8, overrides, endpoint).times
        assert [(t.ttft_ps, t.tpot_ps) for t in times] != [(t.ttft_ps, t.tpot_ps) for t in local]


def test_the_replay_example_prints_ttft_and_tpot(capsys: pytest.CaptureFixture[str]) -> None:
    assert _example().main(["--set", "workload.requests.count=5", "--per-request"]) == 0
    out = capsys.readouterr().out
    assert "5 requests" in out and "TTFT: mean" in out and "TPOT: mean" in out


def test_describe_gives_each_pools_plan_and_cache(oracle: str) -> None:
    with ServingPricerClient(oracle, text=TP8.read_text()) as client:
        (pool,) = client.description.pools
        assert (pool.name, pool.role, pool.replicas, pool.tp, pool.pp, pool.ep) == ("llama", "both", 4, 8, 1, 1)
        assert pool.block_size == 16 and pool.memory_capacity_bytes == 80 * 2**30
        run, _ = _in_process(TP8, ["workload.requests.count=2"])
        assert pool.kv_blocks == run.kv_replica_blocks[0]
        assert client.description.max_context == 8192


def _stub(endpoint: str) -> tuple[grpc.Channel, serving_pb2_grpc.ServingPricerStub]:
    channel = grpc.insecure_channel(endpoint)
    return channel, serving_pb2_grpc.ServingPricerStub(channel)


def _status(call: object, request: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call(request, timeout=30)  # type: ignore[operator]
    error = raised.value
    assert isinstance(error, grpc.Call)
    return error.code(), error.details() or ""


def _shape(**fields: object) -> serving_pb2.IterationShape:
    chunks = fields.pop("chunks", [(128, 128)])
    message = serving_pb2.IterationShape(**{"samples": 1, **fields})  # type: ignore[arg-type]
    message.chunks.extend(serving_pb2.PrefillChunk(new_tokens=n, context_end=c) for n, c in chunks)  # type: ignore[attr-defined]
    return message


@pytest.mark.parametrize(
    ("shape", "field", "why"),
    [
        (_shape(chunks=[(-3, 10)]), "shapes[0].chunks[0].new_tokens", "expected at least 1, got -3"),
        (_shape(chunks=[(64, 32)]), "shapes[0].chunks[0].context_end", "expected at least its new_tokens"),
        (_shape(chunks=[(64, 100_000)]), "shapes[0].chunks[0].context_end", "beyond the model's context"),
        (_shape(chunks=[], decodes=-1), "shapes[0].decodes", "expected at least 0, got -1"),
        (_shape(chunks=[], decodes=4, decode_context=9000), "shapes[0].decode_context", "beyond the model's context"),
        (_shape(chunks=[], decodes=4, decode_context=0), "shapes[0].decode_context", "expected at least its queries"),
        (_shape(samples=5), "shapes[0].samples", "exceeds the sequences batched"),
        (_shape(chunks=[], samples=0), "shapes[0]", "an empty batch"),
        (_shape(chunks=[], decodes=1 << 25, decode_context=10), "shapes[0]", "exceed this server's limit"),
        (_shape(queries=-2), "shapes[0].queries", "expected at least 1"),
    ],
)
def test_a_malformed_batch_is_refused_naming_its_field(
    oracle: str, shape: serving_pb2.IterationShape, field: str, why: str
) -> None:
    channel, stub = _stub(oracle)
    with channel:
        session = stub.Open(serving_pb2.OpenServingRequest(text=TP8.read_text()), timeout=30).session
        request = serving_pb2.PriceIterationsRequest(session=session, pool="llama", shapes=[_shape(), shape])
        request.shapes[0].CopyFrom(shape)
        code, details = _status(stub.PriceIterations, request)
        stub.Close(serving_pb2.ServingSessionRequest(session=session), timeout=30)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith(f"{field}: ") and why in details


def test_unknown_pools_replicas_and_sessions_are_refused_by_name(oracle: str) -> None:
    channel, stub = _stub(oracle)
    with channel:
        session = stub.Open(serving_pb2.OpenServingRequest(text=TP8.read_text()), timeout=30).session
        asked = serving_pb2.PriceIterationsRequest(session=session, pool="nope", shapes=[_shape()])
        assert _status(stub.PriceIterations, asked) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "pool: no pool 'nope'; the study has ['llama']",
        )
        experts = serving_pb2.PriceExpertsRequest(session=session, pool="llama", group_tokens=8, member_tokens=4)
        assert _status(stub.PriceExperts, experts)[1] == "pool: 'llama' is not expert-parallel (ep 1)"
        move = serving_pb2.KvMove(destination=7, tokens=10, size_bytes=100)
        moves = serving_pb2.PriceKvMovesRequest(session=session, source=0, moves=[move])
        assert _status(stub.PriceKvMoves, moves)[1] == (
            "moves[0].destination: no replica 7; the study's pools have replicas 0 to 3"
        )
        negative = serving_pb2.PriceKvMovesRequest(
            session=session, source=1, moves=[serving_pb2.KvMove(destination=0, tokens=-1)]
        )
        assert _status(stub.PriceKvMoves, negative)[1] == "moves[0].tokens: expected at least 0, got -1"
        stub.Close(serving_pb2.ServingSessionRequest(session=session), timeout=30)
        closed = serving_pb2.PriceIterationsRequest(session=session, pool="llama", shapes=[_shape()])
        assert _status(stub.PriceIterations, closed)[0] == grpc.StatusCode.NOT_FOUND


def test_a_client_error_names_the_layer_and_the_field(oracle: str) -> None:
    with ServingPricerClient(oracle, text=TP8.read_text()) as client:
        with pytest.raises(RemoteError, match=r"serving layer at .* INVALID_ARGUMENT: shapes\[0\]\.decodes: expected"):
            client.price_iterations("llama", [IterationShape((), -2, 10, 0)])


@pytest.mark.parametrize(
    ("request_", "code", "message"),
    [
        (serving_pb2.OpenServingRequest(path="study.yaml"), "PERMISSION_DENIED", "path: this server reads no study"),
        (serving_pb2.OpenServingRequest(), "INVALID_ARGUMENT", "study: give the study's text or its path"),
        (serving_pb2.OpenServingRequest(text="name: [unclosed"), "INVALID_ARGUMENT", "InputError"),
        (
            serving_pb2.OpenServingRequest(text=TP8.read_text(), overrides=["workload.requests.trace.path=/etc/x"]),
            "PERMISSION_DENIED",
            "workload.requests.trace.path: this server reads no files",
        ),
        (
            serving_pb2.OpenServingRequest(text=TP8.read_text(), overrides=["compute.spawn=true"]),
            "PERMISSION_DENIED",
            "compute.spawn: the oracle runs the study's layers in its own process",
        ),
        (
            serving_pb2.OpenServingRequest(text=(ROOT / "examples" / "quickstart.yaml").read_text()),
            "INVALID_ARGUMENT",
            "the oracle prices serving studies",
        ),
    ],
    ids=["path-without-root", "no-study", "bad-yaml", "trace-file", "spawn", "not-serving"],
)
def test_a_study_the_server_may_not_read_or_serve_is_refused(
    oracle: str, request_: serving_pb2.OpenServingRequest, code: str, message: str
) -> None:
    channel, stub = _stub(oracle)
    with channel:
        status, details = _status(stub.Open, request_)
    assert status == getattr(grpc.StatusCode, code)
    assert message in details


def test_a_study_root_confines_the_paths_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "tp8.yaml").write_text(TP8.read_text())
    (tmp_path / "outside.yaml").write_text(TP8.read_text())
    with served("serving", "study", OPENERS, study_root=root) as endpoint:
        with ServingPricerClient(endpoint, path="tp8.yaml") as client:
            assert client.description.study == "llama3-70b-h100-tp8-serving"
        with pytest.raises(RemoteError, match=r"refused the client: path: '../outside.yaml' is outside this server's"):
            ServingPricerClient(endpoint, path="../outside.yaml")
        with pytest.raises(RemoteError, match=r"workload.requests.trace.path: '/etc/passwd' is outside"):
            ServingPricerClient(endpoint, path="tp8.yaml", overrides=["workload.requests.trace.path=/etc/passwd"])


def test_sessions_beyond_the_limit_are_refused_and_an_idle_one_gives_its_place() -> None:
    text = TP8.read_text()
    with served("serving", "study", OPENERS, limits=Limits(max_sessions=1, idle_timeout_s=3600)) as endpoint:
        first = ServingPricerClient(endpoint, text=text)
        with pytest.raises(RemoteError, match="server busy: all 1 sessions are open"):
            ServingPricerClient(endpoint, text=text)
        first.close()
        ServingPricerClient(endpoint, text=text).close()
    with served("serving", "study", OPENERS, limits=Limits(max_sessions=1, idle_timeout_s=1e-6)) as endpoint:
        first = ServingPricerClient(endpoint, text=text)
        with ServingPricerClient(endpoint, text=text):
            with pytest.raises(RemoteError, match="no such session"):
                first.price_iterations("llama", [])
        first.close()


def test_the_token_guards_the_oracle_too() -> None:
    with served("serving", "study", OPENERS, security=ServerSecurity(token="secret")) as endpoint:
        with pytest.raises(RemoteError, match=r"serving layer at .* refused the client: unauthenticated"):
            ServingPricerClient(endpoint, text=TP8.read_text())
        with ServingPricerClient(endpoint, text=TP8.read_text(), security=ClientSecurity(None, "secret")) as client:
            assert client.description.pools[0].name == "llama"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "serving", "--backend", "roofline"], "--backend: the serving layer serves 'study'"),
        (["serve", "network"], "--backend: name the network backend to serve"),
        (["serve", "serving", "--study-root", "/no/such/folder"], "--study-root: '/no/such/folder' is not a folder"),
    ],
)
def test_bad_serve_options_for_the_oracle_name_the_option(run_cli, argv: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli(*argv)
    assert code == 2
    assert err == f"error: {message}\n" or message in err


def test_an_unreachable_oracle_fails_within_the_timeout() -> None:
    with (
        refused_endpoint() as endpoint,
        pytest.raises(RemoteError, match=f"serving layer at {endpoint} is unreachable"),
    ):
        ServingPricerClient(endpoint, text="", connect_timeout_s=0.5)


def test_a_handshake_of_another_protocol_version_is_refused(oracle: str) -> None:
    channel, stub = _stub(oracle)
    with channel:
        hello = common_pb2.Handshake(protocol_version=PROTOCOL_VERSION + 1, layer="serving", backend="study")
        code, details = _status(stub.Hello, hello)
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert f"client speaks {PROTOCOL_VERSION + 1}, server speaks {PROTOCOL_VERSION}" in details


def test_a_topology_beyond_the_limits_is_refused_before_building_it() -> None:
    with served("serving", "study", OPENERS, limits=Limits(max_npus=16)) as endpoint:
        with pytest.raises(
            RemoteError, match=r"INVALID_ARGUMENT: BackendError: topology: 32 NPUs exceed this server's"
        ):
            ServingPricerClient(endpoint, text=TP8.read_text())


@pytest.mark.parametrize(("text", "why"), [(DEEP_YAML, "nested"), (laughs(), "alias")], ids=["deep", "anchor-bomb"])
def test_a_hostile_study_text_is_refused_fast(oracle: str, text: str, why: str) -> None:
    channel, stub = _stub(oracle)
    started = time.monotonic()
    with channel:
        code, details = _status(stub.Open, serving_pb2.OpenServingRequest(text=text))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "InputError" in details
    assert time.monotonic() - started < 5


def test_too_many_shapes_or_chunks_in_one_call_are_refused(oracle: str) -> None:
    channel, stub = _stub(oracle)
    with channel:
        session = stub.Open(serving_pb2.OpenServingRequest(text=TP8.read_text()), timeout=30).session
        many = serving_pb2.PriceIterationsRequest(session=session, pool="llama", shapes=[_shape()] * 257)
        assert _status(stub.PriceIterations, many)[1] == "shapes: 257 exceed this server's limit of 256 a call"
        wide = _shape(chunks=[(1, 1)] * 1025, samples=0)
        asked = serving_pb2.PriceIterationsRequest(session=session, pool="llama", shapes=[wide])
        assert _status(stub.PriceIterations, asked)[1] == "shapes[0].chunks: 1,025 exceed this server's limit of 1,024"
