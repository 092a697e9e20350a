"""Fuzzing the readers the parser fuzz tests leave out (issue 15, item 6): Chakra traces, profile tables, sweep files
and the requests a server accepts (the compute contract's, and a network session's). Whatever the bytes, only
StrataSim's own errors escape — or, for a request, an error in the response made from one (never INTERNAL).

CI runs each with a small fixed budget (derandomized); ``pytest -m fuzz`` runs ``STRATASIM_FUZZ_EXAMPLES`` each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import strategies as st

from stratasim.compute_layer.profile_table import load_profile
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.compute_layer.timeloop.backend import TimeloopCompute
from stratasim.explore.sweep_file import load_sweep
from stratasim.kernel import operators, registry
from stratasim.kernel.errors import StrataSimError
from stratasim.remote.limits import Limits
from stratasim.remote.network_service import _Session
from stratasim.v1 import common_pb2, compute_pb2, network_pb2
from stratasim.workload_layer.traces.chakra import read_chakra_graphs
from stratasim.workload_layer.transformer.routing_trace import read_routing_trace
from tests.hardening.budgets import ci_budget, long_budget

ROOT = Path(__file__).resolve().parents[2]
CHAKRA = sorted((ROOT / "tests" / "data" / "astra-sim-inputs" / "workload" / "e2e_text_converted").rglob("*.0.et"))[0]
SWEEP = (ROOT / "examples" / "explore" / "collectives.yaml").read_text(encoding="utf-8")

CI = ci_budget(150, also=(HealthCheck.function_scoped_fixture,))
LONG = long_budget(5_000, also=(HealthCheck.function_scoped_fixture,))

MUTATIONS = st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=12)
CSV_BITS = st.sampled_from(
    [
        "device,kind,dtype,m,k,n,elements,time,energy_pj\n",
        "h100,",
        "gemm,",
        "elementwise,",
        "bf16,",
        "fp99,",
        "64,",
        "0,",
        "-1,",
        ",",
        "1us,",
        "1e400s,",
        "nan,",
        "5\n",
        "1e40\n",
        "\n",
        '"',
        "\x00",
        "é",
        "9" * 40,
        "x",
    ]
)
SWEEP_EDITS = st.sampled_from(
    [
        ("1GiB", "1e400GiB"),
        ("1GiB", "-1GiB"),
        ("space:", "space: 7\nx:"),
        ("trials", "tria1s"),
        ("ring", "{}"),
        ("size", "size: [[[[[]]]]]\n  zz"),
        ("minimize", "maximize"),
        ("algorithm", "algorithm: {a: *b}\n  q"),
        ("\n", "\n\t"),
        ("50GB/s", "0GB/s"),
        ("2", "99999999999999999999"),
        ("name", "&a name"),
    ]
)


def expect_only_our_errors(action: Callable[[], object]) -> None:
    with contextlib.suppress(StrataSimError):
        action()


def _mutated(data: bytes, mutations: list[tuple[int, int]]) -> bytes:
    buffer = bytearray(data)
    for place, value in mutations:
        if buffer:
            buffer[place % len(buffer)] = value
    return bytes(buffer)


def _chakra_case(tmp_path: Path, mutations: list[tuple[int, int]], cut: int) -> None:
    data = _mutated(CHAKRA.read_bytes(), mutations)
    trace = tmp_path / "fuzz.0.et"
    trace.write_bytes(data[: max(1, len(data) - cut)])
    expect_only_our_errors(lambda: read_chakra_graphs(tmp_path / "fuzz"))


def _profile_case(tmp_path: Path, text: str) -> None:
    table = tmp_path / "times.csv"
    table.write_text(text, encoding="utf-8", errors="surrogatepass")
    expect_only_our_errors(lambda: load_profile(table))


ROUTING_BITS = st.sampled_from(
    ["layer,expert,tokens\n", "0,", "1,", "7,", "8,", "-3,", "1.5", ".25", "1e9", "\n", "#", ",", '"', "99999999999"]
)


def _routing_case(tmp_path: Path, text: str) -> None:
    trace = tmp_path / "routing.csv"
    trace.write_text(text, encoding="utf-8", errors="surrogatepass")
    expect_only_our_errors(lambda: _check_shares(read_routing_trace(str(trace), 2, 8)))


def _check_shares(layers: tuple[tuple[Fraction, ...], ...]) -> None:
    """A trace read is two layers of 8 shares, each from 0 to 1, summing to 1."""
    assert len(layers) == 2 and all(len(layer) == 8 and sum(layer) == 1 and min(layer) >= 0 for layer in layers)


def _sweep_case(tmp_path: Path, edits: list[tuple[str, str]]) -> None:
    text = SWEEP
    for old, new in edits:
        text = text.replace(old, new, 1)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text, encoding="utf-8")
    expect_only_our_errors(lambda: load_sweep(sweep))


def _request_case(mutations: list[tuple[int, int]], backend: object) -> None:
    ops = [operators.gemm(64, 64, 64, compute_pb2.BF16), operators.elementwise([1024], compute_pb2.BF16)]
    data = compute_pb2.EstimateRequest(device="h100", ops=ops).SerializeToString()
    request = compute_pb2.EstimateRequest()
    try:
        request.ParseFromString(_mutated(data, mutations))
    except Exception:  # the wire refuses it before any backend sees it
        return
    response = backend.estimate(request)  # type: ignore[attr-defined]
    assert response.HasField("error") or len(response.costs) == len(request.ops)
    assert response.error.code != common_pb2.Error.Code.INTERNAL, response.error.message


@CI
@given(mutations=MUTATIONS, cut=st.integers(min_value=0, max_value=64))
def test_chakra_traces(tmp_path: Path, mutations: list[tuple[int, int]], cut: int) -> None:
    _chakra_case(tmp_path, mutations, cut)


@CI
@given(text=st.lists(st.one_of(CSV_BITS, st.text(max_size=6)), max_size=40).map("".join))
def test_profile_tables(tmp_path: Path, text: str) -> None:
    _profile_case(tmp_path, text)


@CI
@given(text=st.lists(st.one_of(ROUTING_BITS, st.text(max_size=4)), max_size=60).map("".join))
def test_routing_traces(tmp_path: Path, text: str) -> None:
    _routing_case(tmp_path, text)


@CI
@given(edits=st.lists(SWEEP_EDITS, max_size=4))
def test_sweep_files(tmp_path: Path, edits: list[tuple[str, str]]) -> None:
    _sweep_case(tmp_path, edits)


_RING = network_pb2.Dimension(kind=network_pb2.Dimension.RING, size=4, bandwidth_bytes_per_s=50e9, latency_ps=500_000)
_SENDS = network_pb2.SendBatch(id=[1, 2], src=[0, 1], dst=[1, 3], bytes=[1024, 4096], send_time_ps=[0, 10])
NETWORK_REQUESTS = [  # a session's requests after its handshake, as a client sends them
    network_pb2.NetworkRequest(configure=network_pb2.Topology(dimensions=[_RING, _RING])),
    network_pb2.NetworkRequest(advance=network_pb2.AdvanceRequest(sends=_SENDS, until_ps=10**6)),
    network_pb2.NetworkRequest(
        transit=network_pb2.TransitRequest(src=b"\0" * 8, dst=b"\1" + b"\0" * 7, bytes=b"\0\4" + b"\0" * 6)
    ),
    network_pb2.NetworkRequest(counters=network_pb2.CountersRequest()),
    network_pb2.NetworkRequest(advance=network_pb2.AdvanceRequest(until_ps=10**12)),
]


def _network_case(mutations: list[tuple[int, int]], backend: str) -> None:
    """A session's requests, each mutated, answered by a network server's session: every failure is an error
    response from a StrataSim error (INVALID_ARGUMENT), never INTERNAL (an exception of another type)."""
    session = _Session(registry.load("network", backend)(), Limits())
    for number, request in enumerate(NETWORK_REQUESTS):
        parsed = network_pb2.NetworkRequest()
        try:
            parsed.ParseFromString(
                _mutated(request.SerializeToString(), [(p, v) for p, v in mutations if p % 5 == number])
            )
        except Exception:  # the wire refuses it before any backend sees it
            continue
        response = session.answer(parsed)
        assert response.error.code != common_pb2.Error.Code.INTERNAL, response.error.message


@CI
@given(mutations=MUTATIONS)
@example(mutations=[(4636, 241)])  # a batch with ids but no send times: refused, not an INTERNAL error
def test_network_requests(mutations: list[tuple[int, int]]) -> None:
    for backend in ("analytical", "congestion_aware"):
        _network_case(mutations, backend)


@CI
@given(mutations=MUTATIONS)
def test_compute_requests(mutations: list[tuple[int, int]]) -> None:
    _request_case(mutations, RooflineCompute())
    _request_case(mutations, TimeloopCompute())


@pytest.mark.fuzz
@LONG
@given(mutations=MUTATIONS, cut=st.integers(min_value=0, max_value=64), text=st.text(max_size=200))
def test_long_budget(tmp_path: Path, mutations: list[tuple[int, int]], cut: int, text: str) -> None:
    _chakra_case(tmp_path, mutations, cut)
    _profile_case(tmp_path, text)
    _routing_case(tmp_path, text)
    _request_case(mutations, RooflineCompute())
    _network_case(mutations, "congestion_aware")
