"""A described device over gRPC: priced exactly as in-process by a server that reads it, refused unsent to one
that does not say it does (an older server would silently price on the preset of the same name)."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.device_wire import device_message
from stratasim.compute_layer.roofline import RooflineCompute
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
