"""Every backend says where each operator's time comes from (``OperatorCost.basis``): a measured profile, a model
fitted to operator measurements, a datasheet roofline scaled by efficiencies fitted to whole runs, or datasheet and
architecture figures alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.device_wire import device_message
from stratasim.compute_layer.devices import basis, calibrated
from stratasim.compute_layer.measured.backend import MeasuredCompute
from stratasim.compute_layer.per_kind import PerKindCompute
from stratasim.compute_layer.profile import ProfileCompute
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.compute_layer.timeloop.backend import TimeloopCompute
from stratasim.compute_layer.wafer.backend import WaferCompute
from stratasim.kernel import operators
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.operators import basis_name
from stratasim.v1 import compute_pb2
from tests.compute_layer.profile_helpers import write_table

GEMM = operators.gemm(1024, 1024, 1024)
BETWEEN = operators.gemm(1536, 1024, 1024)  # between the profile's measured points
ATTENTION = operators.attention(8, 256, 256, 64, causal=True)


def _bases(
    backend: ComputeBackend,
    device: str,
    *ops: compute_pb2.OperatorDesc,
    calibration: compute_pb2.Calibration | None = None,
    roofline_device: compute_pb2.RooflineDevice | None = None,
) -> set[str]:
    """The bases of ``ops``' costs, by name."""
    request = compute_pb2.EstimateRequest(
        device=device, ops=list(ops), calibration=calibration, roofline_device=roofline_device
    )
    response = backend.estimate(request)
    assert not response.HasField("error"), response.error.message
    return {basis_name(cost.basis) for cost in response.costs}


def test_a_roofline_preset_is_fitted_to_runs_and_its_datasheet_form_is_datasheet() -> None:
    roofline = RooflineCompute()
    assert _bases(roofline, "h100", GEMM, ATTENTION) == {"fitted_to_runs"}
    bare = compute_pb2.Calibration(datasheet=True)
    assert _bases(roofline, "h100", GEMM, calibration=bare) == {"datasheet"}


def test_a_studys_own_calibration_counts_as_fitted_to_runs() -> None:
    # One efficiency for every operator is a whole-workload figure, whatever it was measured on.
    own = compute_pb2.Calibration(datasheet=True, compute_efficiency=0.6)
    assert _bases(RooflineCompute(), "h100", GEMM, calibration=own) == {"fitted_to_runs"}
    assert basis(calibrated(PRESETS["h100"], own)) == compute_pb2.FITTED_TO_RUNS


def test_a_described_device_keeps_its_presets_model_or_is_datasheet_without_one() -> None:
    from_preset = device_message(DeviceSection.model_validate({"preset": "h100", "memory_bandwidth": "1TB/s"}).device())
    whole = DeviceSection.model_validate(
        {"name": "chip", "peak": {"bf16": "100TFLOPS"}, "memory_bandwidth": "1TB/s", "memory_capacity": "16GiB"}
    )
    roofline = RooflineCompute()
    assert _bases(roofline, "h100", GEMM, roofline_device=from_preset) == {"fitted_to_runs"}
    assert _bases(roofline, "chip", GEMM, roofline_device=device_message(whole.device())) == {"datasheet"}


def test_a_profile_is_measured_at_and_between_its_points(tmp_path: Path) -> None:
    assert _bases(ProfileCompute(profile=write_table(tmp_path)), "h100", GEMM, BETWEEN) == {"measured"}


def test_the_measured_backend_is_fitted_to_operators() -> None:
    assert _bases(MeasuredCompute(), "h100", GEMM, ATTENTION) == {"fitted_to_operators"}


@pytest.mark.parametrize("backend", [TimeloopCompute, WaferCompute], ids=["timeloop", "wafer"])
def test_architecture_models_are_datasheet(backend: type[ComputeBackend]) -> None:
    built = backend()
    assert _bases(built, built.devices()[0], GEMM, ATTENTION) == {"datasheet"}


def test_per_kind_routing_keeps_each_routes_basis(tmp_path: Path) -> None:
    routed = PerKindCompute({"gemm": ProfileCompute(profile=write_table(tmp_path)), "*": RooflineCompute()})
    response = routed.estimate(compute_pb2.EstimateRequest(device="h100", ops=[GEMM, ATTENTION]))
    assert [basis_name(cost.basis) for cost in response.costs] == ["measured", "fitted_to_runs"]


def test_a_basis_the_backend_does_not_state_is_unknown() -> None:
    assert basis_name(compute_pb2.BASIS_UNSPECIFIED) == "unknown"
    assert basis_name(99) == "unknown"  # type: ignore[arg-type]
