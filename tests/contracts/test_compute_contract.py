"""The compute contract: every backend, in-process and through a real gRPC server, prices operators the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stratasim.kernel.contracts import ComputeBackend
from stratasim.v1 import compute_pb2
from tests.contracts.contract_fakes import backend_names

NAMES = backend_names("compute")
MODES = ("in-process", "remote")
Op = compute_pb2.OperatorDesc


def ops() -> list[compute_pb2.OperatorDesc]:
    """A GEMM, an elementwise op, and ops with only FLOPs or only bytes, all in BF16."""
    return [
        Op(
            gemm=compute_pb2.GemmShape(m=256, k=512, n=1024),
            dtype=compute_pb2.BF16,
            flops=2 * 256 * 512 * 1024,
            bytes=2 * (256 * 512 + 512 * 1024 + 256 * 1024),
            name="gemm",
        ),
        Op(
            elementwise=compute_pb2.ElementwiseShape(elements=1 << 20),
            dtype=compute_pb2.BF16,
            flops=1 << 20,
            bytes=3 << 21,
        ),
        Op(gemm=compute_pb2.GemmShape(m=8, k=8, n=8), dtype=compute_pb2.BF16, flops=1024),
        Op(elementwise=compute_pb2.ElementwiseShape(elements=64), dtype=compute_pb2.BF16, bytes=128),
    ]


@pytest.fixture(params=[(name, mode) for name in NAMES for mode in MODES], ids="-".join)
def compute(request: pytest.FixtureRequest, open_backend: Callable[[str, str, str], Any]) -> ComputeBackend:
    name, mode = request.param
    backend: ComputeBackend = open_backend("compute", name, mode)
    return backend


def test_implements_the_protocol(compute: ComputeBackend) -> None:
    assert isinstance(compute, ComputeBackend)
    assert compute.name
    devices = compute.devices()
    assert devices and all(isinstance(d, str) and d for d in devices)


# Adapters run an external simulator (an optional extra) that models GEMMs and convolutions only.
_ADAPTER_TOOLS = {"scalesim": "scalesim", "zigzag": "zigzag"}


def test_one_positive_cost_per_op(compute: ComputeBackend) -> None:
    priced = ops()
    if compute.name in _ADAPTER_TOOLS:
        pytest.importorskip(_ADAPTER_TOOLS[compute.name], reason=f"the {compute.name} extra is not installed")
        priced = [op for op in priced if op.HasField("gemm")]
    for device in compute.devices():
        response = compute.estimate(compute_pb2.EstimateRequest(device=device, ops=priced))
        assert not response.HasField("error"), response.error.message
        assert len(response.costs) == len(priced)
        assert all(cost.duration_ps > 0 for cost in response.costs)
        # Every cost says where its time comes from: measured, fitted to operators or to runs, or datasheet.
        assert all(cost.basis != compute_pb2.BASIS_UNSPECIFIED for cost in response.costs)


def test_unknown_device_comes_back_as_an_error(compute: ComputeBackend) -> None:
    response = compute.estimate(compute_pb2.EstimateRequest(device="no-such-device", ops=ops()))
    assert response.HasField("error") and response.error.message
    assert not response.costs


def test_empty_request_gives_no_costs(compute: ComputeBackend) -> None:
    response = compute.estimate(compute_pb2.EstimateRequest(device=compute.devices()[0]))
    assert not response.HasField("error") and not response.costs


def test_every_device_has_facts_stating_its_memory_capacity_or_why_not(compute: ComputeBackend) -> None:
    devices = compute.devices()
    response = compute.describe(compute_pb2.DescribeRequest(devices=devices))
    assert not response.HasField("error"), response.error.message
    assert [facts.device for facts in response.devices] == devices
    for facts in response.devices:
        if facts.HasField("memory_capacity_bytes"):
            assert facts.memory_capacity_bytes > 0 and not facts.memory_capacity_unknown
        else:
            assert facts.memory_capacity_unknown  # never a silent "unknown"
    unknown = compute.describe(compute_pb2.DescribeRequest(devices=[devices[0], "no-such-device"]))
    assert unknown.HasField("error") and "no-such-device" in unknown.error.message and not unknown.devices


@pytest.mark.parametrize("name", NAMES)
def test_in_process_and_remote_results_are_identical(name: str, open_backend: Callable[..., Any]) -> None:
    local, remote = (open_backend("compute", name, mode) for mode in MODES)
    assert remote.name == local.name
    assert remote.devices() == local.devices()
    for device in [*local.devices(), "no-such-device"]:
        request = compute_pb2.EstimateRequest(device=device, ops=ops())
        assert remote.estimate(request) == local.estimate(request)
        described = compute_pb2.DescribeRequest(devices=[device])
        assert remote.describe(described) == local.describe(described)
