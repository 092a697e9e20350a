"""A described device over gRPC (a roofline device; a device fitted to a measured profile): priced exactly as
in-process by a server that reads it, refused unsent to one that does not say it does (an older server would
silently price on the preset of the same name)."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.device_wire import device_message
from stratasim.compute_layer.measured.backend import MeasuredCompute
from stratasim.compute_layer.measured.parameters import load_parameters
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel import operators
from stratasim.kernel.errors import RemoteError
from stratasim.remote import ComputeClient, compute_service
from stratasim.study.compute_setup import DescribedDevice
from stratasim.v1 import compute_pb2
from tests.contracts.contract_fakes import served

SLOW = device_message(DeviceSection.model_validate({"preset": "h100", "memory_bandwidth": "1TB/s"}).device())
OPS = [compute_pb2.OperatorDesc(dtype=compute_pb2.BF16, flops=1 << 30, bytes=1 << 30)]


def test_a_server_prices_the_described_device_as_in_process() -> None:
    local = DescribedDevice(RooflineCompute(), SLOW)
    with served("compute", "roofline") as endpoint:
        remote = DescribedDevice(ComputeClient(endpoint, backend="roofline", timeout_s=10), SLOW)
        try:
            request = compute_pb2.EstimateRequest(device="h100", ops=OPS)
            priced = remote.estimate(request)
            assert priced == local.estimate(request)
            assert priced != RooflineCompute().estimate(request)  # the preset itself is faster
            describe = compute_pb2.DescribeRequest(devices=["h100"])
            assert remote.describe(describe) == local.describe(describe)
            assert "h100" in remote.devices()
        finally:
            remote.close()


def test_a_server_that_does_not_read_described_devices_is_never_sent_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a server from before described devices answers: no "roofline-device" capability.
    monkeypatch.setattr(compute_service, "ROOFLINE_DEVICE_CAPABILITY", "something-else")
    with served("compute", "roofline") as endpoint:
        client = ComputeClient(endpoint, backend="roofline", timeout_s=10)
        try:
            named = compute_pb2.EstimateRequest(device="h100", ops=OPS)
            assert not client.estimate(named).HasField("error")  # a name still works
            with pytest.raises(RemoteError, match="predates described devices"):
                DescribedDevice(client, SLOW).estimate(named)
            with pytest.raises(RemoteError, match="predates described devices"):
                DescribedDevice(client, SLOW).describe(compute_pb2.DescribeRequest(devices=["h100"]))
        finally:
            client.close()


def test_each_costs_basis_crosses_the_wire_unchanged() -> None:
    # The preset's fitted model (FITTED_TO_RUNS), its bare datasheet (DATASHEET), a described device (its preset's).
    requests = [
        compute_pb2.EstimateRequest(device="h100", ops=OPS),
        compute_pb2.EstimateRequest(device="h100", ops=OPS, calibration=compute_pb2.Calibration(datasheet=True)),
        compute_pb2.EstimateRequest(device="h100", ops=OPS, roofline_device=SLOW),
    ]
    with served("compute", "roofline") as endpoint:
        client = ComputeClient(endpoint, backend="roofline", timeout_s=10)
        try:
            bases = [[cost.basis for cost in client.estimate(request).costs] for request in requests]
        finally:
            client.close()
    assert bases == [[compute_pb2.FITTED_TO_RUNS], [compute_pb2.DATASHEET], [compute_pb2.FITTED_TO_RUNS]]


def _fitted(name: str, ceiling_scale: float) -> compute_pb2.MeasuredDevice:
    """The shipped h100 fit as a device fitted by ``stratasim profile``, its GEMM ceiling scaled."""
    classes = {key: dict(value) for key, value in load_parameters().classes["h100"].items()}
    classes["gemm"]["ceiling_flops"] *= ceiling_scale
    return compute_pb2.MeasuredDevice(
        name=name,
        structure="h100",
        classes={key: compute_pb2.MeasuredClass(parameters=value) for key, value in classes.items()},
        calibration="fitted to my measurements",
    )


GEMM = [operators.gemm(8192, 8192, 8192)]


def test_a_measured_server_prices_a_fitted_device_as_in_process() -> None:
    same, slower = _fitted("mygpu", 1.0), _fitted("mygpu", 0.5)
    with served("compute", "measured") as endpoint:
        client = ComputeClient(endpoint, backend="measured", timeout_s=10)
        try:
            shipped = client.estimate(compute_pb2.EstimateRequest(device="h100", ops=GEMM))
            for fitted in (same, slower):
                local, remote = DescribedDevice(MeasuredCompute(), fitted), DescribedDevice(client, fitted)
                request = compute_pb2.EstimateRequest(device="mygpu", ops=GEMM)
                assert remote.estimate(request) == local.estimate(request)
                describe = compute_pb2.DescribeRequest(devices=["mygpu"])
                assert remote.describe(describe) == local.describe(describe)
                assert remote.describe(describe).devices[0].calibration == "fitted to my measurements"
            same_cost = DescribedDevice(client, same).estimate(compute_pb2.EstimateRequest(device="mygpu", ops=GEMM))
            assert same_cost == shipped  # the shipped parameters, so the shipped prices
            slow_cost = DescribedDevice(client, slower).estimate(compute_pb2.EstimateRequest(device="mygpu", ops=GEMM))
            assert slow_cost.costs[0].duration_ps > shipped.costs[0].duration_ps
        finally:
            client.close()


def test_a_server_that_does_not_read_fitted_devices_is_never_sent_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compute_service, "MEASURED_DEVICE_CAPABILITY", "something-else")
    with served("compute", "measured") as endpoint:
        client = ComputeClient(endpoint, backend="measured", timeout_s=10)
        try:
            with pytest.raises(RemoteError, match="predates described devices"):
                DescribedDevice(client, _fitted("mygpu", 1.0)).estimate(
                    compute_pb2.EstimateRequest(device="mygpu", ops=GEMM)
                )
        finally:
            client.close()
