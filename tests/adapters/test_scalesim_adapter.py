"""The ``scalesim`` backend running SCALE-Sim 3.0.0 itself: the stored cycles, batches, and serving remotely."""

from __future__ import annotations

import pytest

pytest.importorskip("scalesim", reason="SCALE-Sim is not installed: pip install 'stratasim[scalesim]'")

from stratasim.adapters.scalesim import ScaleSimCompute  # noqa: E402
from stratasim.kernel import operators, registry  # noqa: E402
from stratasim.remote import ComputeClient, spawn  # noqa: E402
from stratasim.v1 import compute_pb2  # noqa: E402
from tests.adapters.layers import SCALESIM_LAYERS, op_of, reference  # noqa: E402

pytestmark = pytest.mark.adapters


def _costs(backend: ScaleSimCompute, device: str, *ops: compute_pb2.OperatorDesc) -> list[compute_pb2.OperatorCost]:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=ops))
    assert not response.HasField("error"), response.error.message
    return list(response.costs)


@pytest.mark.parametrize("device", sorted(reference()["scalesim"]["cycles"]))
def test_the_adapter_reproduces_the_stored_cycles(device: str) -> None:
    stored = reference()["scalesim"]["cycles"][device]
    costs = _costs(ScaleSimCompute(), device, *(op_of(name, SCALESIM_LAYERS[name]) for name in stored))
    assert {name: cost.duration_ps // 1000 for name, cost in zip(stored, costs)} == stored
    assert all(cost.duration_ps % 1000 == 0 and cost.bound == compute_pb2.COMPUTE for cost in costs)
    assert all([t.level for t in cost.traffic] == ["sram", "dram"] for cost in costs)


@pytest.mark.parametrize("device", sorted(reference()["scalesim"]["user_cycles"]))
def test_the_adapter_runs_scalesims_user_bandwidth_mode(device: str) -> None:
    stored = reference()["scalesim"]["user_cycles"][device]
    costs = _costs(ScaleSimCompute(), device, *(op_of(name, SCALESIM_LAYERS[name]) for name in stored))
    assert {name: cost.duration_ps // 1000 for name, cost in zip(stored, costs)} == stored
    assert all(cost.bound == compute_pb2.MEMORY for cost in costs)  # loading and draining take time


def test_batches_run_once_and_images_become_scalesims_gemm() -> None:
    backend = ScaleSimCompute()
    single, batched = _costs(
        backend, "systolic-32x32-ws", operators.gemm(64, 64, 64), operators.gemm(64, 64, 64, batch=3)
    )
    assert batched.duration_ps == 3 * single.duration_ps
    # Two 14x14 images of a 3x3 conv are SCALE-Sim's GEMM of 2·14·14 rows: 5 folds of (64 + 32 + 392 - 2) - 1.
    (two,) = _costs(backend, "systolic-32x32-ws", operators.conv2d(2, 16, 16, 14, 14, 3, 3))
    assert two.duration_ps == (5 * 486 - 1) * 1000


def test_layers_named_like_depthwise_ones_are_not_taken_for_them() -> None:
    plain = operators.conv2d(1, 16, 16, 14, 14, 3, 3, name="conv")
    named = operators.conv2d(1, 16, 16, 14, 14, 3, 3, name="DP-conv")  # SCALE-Sim splits "DP" layers per channel
    backend = ScaleSimCompute()
    assert _costs(backend, "systolic-32x32-os", plain) == _costs(backend, "systolic-32x32-os", named)


def test_served_remotely_through_the_registry() -> None:
    assert isinstance(registry.load("compute", "scalesim")(), ScaleSimCompute)
    op = op_of("gemm-64x64x64", SCALESIM_LAYERS["gemm-64x64x64"])
    with spawn("compute", "scalesim", timeout_s=60) as endpoint:
        client = ComputeClient(endpoint, backend="scalesim", timeout_s=120)
        try:
            assert "systolic-32x32-os" in client.devices()
            response = client.estimate(compute_pb2.EstimateRequest(device="systolic-32x32-os", ops=[op]))
            bad = client.estimate(compute_pb2.EstimateRequest(device="systolic-32-os", ops=[op]))
        finally:
            client.close()
    assert response.costs[0].duration_ps == 503_000
    assert bad.error.where == "device" and "systolic-<R>x<C>" in bad.error.message
