"""A compute server's work limits: a request counted beyond ``--max-work`` is refused before any work, and work still
running never holds a call past its deadline nor a server past SIGTERM."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stratasim.compute_layer.timeloop.backend import TimeloopCompute
from stratasim.kernel.errors import RemoteError
from stratasim.kernel.operators import gemm
from stratasim.remote import ComputeClient
from stratasim.remote.limits import Limits
from stratasim.v1 import compute_pb2
from tests.contracts.contract_fakes import FakeCompute, served
from tests.helpers import wait_until

_ROOT = Path(__file__).resolve().parents[2]


def _bomb() -> compute_pb2.OperatorDesc:
    """A GEMM of M = 2^63: factoring M by trial division takes the mapper some six minutes."""
    op = compute_pb2.OperatorDesc(name="bomb", dtype=compute_pb2.BF16, flops=2**64 - 1, bytes=2**64 - 1)
    op.gemm.m, op.gemm.k, op.gemm.n = 2**63, 1, 1
    return op


def test_a_request_beyond_the_work_limit_is_refused_before_any_work_naming_the_operator() -> None:
    with served("compute", "timeloop", {"timeloop": TimeloopCompute}) as endpoint:
        client = ComputeClient(endpoint, backend="timeloop", timeout_s=5)
        try:
            device = client.devices()[0]
            request = compute_pb2.EstimateRequest(device=device, ops=[gemm(64, 64, 64), _bomb()])
            assert request.ByteSize() < 100
            started = time.monotonic()
            error = client.estimate(request).error
            assert time.monotonic() - started < 1
            assert error.code == error.INVALID_ARGUMENT
            assert error.message.startswith("ops[1] ('bomb'): pricing it would take some 6,074,001,003 steps")
            assert "(its --max-work); refused before any work" in error.message
            assert client.estimate(compute_pb2.EstimateRequest(device=device, ops=[gemm(512, 512, 512)])).costs
        finally:
            client.close()


def test_the_work_limit_is_the_servers_option() -> None:
    limits = Limits(max_work=100)
    with served("compute", "timeloop", {"timeloop": TimeloopCompute}, limits=limits) as endpoint:
        client = ComputeClient(endpoint, backend="timeloop", timeout_s=5)
        try:
            request = compute_pb2.EstimateRequest(device=client.devices()[0], ops=[gemm(4096, 64, 64, name="qkv")])
            # 1 + (2·isqrt(4096) + 1) + (2·isqrt(64) + 1): K and N share their extent, factored once
            assert "ops[0] ('qkv'): pricing it would take some 147 steps" in client.estimate(request).error.message
        finally:
            client.close()


class _Stuck(FakeCompute):
    """Prices like the fake backend once ``release`` is set; until then its work never ends."""

    def __init__(self, started: threading.Event, release: threading.Event) -> None:
        self._started, self._release = started, release

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        self._started.set()
        self._release.wait()
        return super().estimate(request)


def test_a_call_past_its_deadline_returns_while_its_work_runs_and_the_server_stops_promptly() -> None:
    started, release = threading.Event(), threading.Event()
    request = compute_pb2.EstimateRequest(device="fake-npu", ops=[gemm(8, 8, 8)])
    stop_began = 0.0
    try:
        with served("compute", "stuck", {"stuck": lambda: _Stuck(started, release)}) as endpoint:
            client = ComputeClient(endpoint, backend="stuck", timeout_s=0.5)
            try:
                with pytest.raises(RemoteError, match=r"did not answer within 0.5 s \(deadline exceeded\)"):
                    client.estimate(request)
                assert started.is_set()
                with pytest.raises(RemoteError, match="deadline exceeded"):  # waits for the lock no longer
                    client.estimate(request)
                ComputeClient(endpoint, backend="stuck", connect_timeout_s=2).close()  # a handshake never waits
            finally:
                client.close()
            stop_began = time.monotonic()
        assert time.monotonic() - stop_began < 3  # the stuck work did not hold the server
    finally:
        release.set()


_SPINNING_SERVER = f"""
import sys, time
sys.path.insert(0, {str(_ROOT)!r})
from tests.contracts.contract_fakes import FakeCompute
from stratasim.remote import serve

class Spinning(FakeCompute):
    def estimate(self, request):
        print("working", flush=True)
        while True:  # pure-Python work, as a mapper's search is
            time.monotonic()

serve("compute", "spin", "127.0.0.1:0", factories={{"spin": Spinning}})
"""


def test_sigterm_stops_a_server_whose_work_never_ends() -> None:
    process = subprocess.Popen([sys.executable, "-c", _SPINNING_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        endpoint = process.stdout.readline().split()[-1]
        client = ComputeClient(endpoint, backend="spin", timeout_s=60)
        errors: list[Exception] = []

        def call() -> None:
            try:
                client.estimate(compute_pb2.EstimateRequest(device="fake-npu", ops=[gemm(8, 8, 8)]))
            except RemoteError as exc:
                errors.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        assert process.stdout.readline().strip() == "working"
        signalled = time.monotonic()
        process.terminate()
        assert process.wait(timeout=10) == 0
        assert time.monotonic() - signalled < 3
        caller.join(timeout=10)
        wait_until(lambda: bool(errors), 5, "the client's call to fail")
        client.close()
    finally:
        process.kill()
        process.wait()
