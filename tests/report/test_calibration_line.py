"""Every run says which efficiency model priced its device and where it came from, and warns when nothing
calibrates the device against measurements; ``compute.calibration`` adjusts a preset's fitted model or, with
``basis: datasheet``, its bare datasheet figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stratasim
from stratasim.compute_layer.device_presets import PRESETS, device
from stratasim.compute_layer.devices import calibrated, datasheet
from stratasim.compute_layer.per_kind import PerKindCompute
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.compute_layer.timeloop.backend import TimeloopCompute
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.operators import gemm
from stratasim.v1 import compute_pb2

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transformer.yaml"


def _run(**overrides: Any) -> stratasim.Report:
    return stratasim.run(EXAMPLE, **overrides)


def test_a_fitted_preset_names_its_model_and_source() -> None:
    report = _run(**{"compute.device": "h100"})
    assert report.calibration.startswith("compute 0.")
    assert "MosaicML" in report.calibration and "Azure" in report.calibration
    assert not [w for w in report.warnings if "uncalibrated" in w]
    assert report.to_dict()["calibration"] == report.calibration
    assert f"calibration      {report.calibration}" in report.to_text()


# A device described whole, without a preset: nothing measured it, so nothing calibrates it.
MYCHIP = {"name": "mychip", "peak": {"bf16": "800TFLOPS"}, "memory_bandwidth": "3TB/s", "memory_capacity": "96GiB"}


def test_a_device_without_a_fit_runs_with_a_warning() -> None:
    report = _run(**{"compute.device": MYCHIP})
    assert report.calibration == "none (datasheet figures)"
    (warning,) = [w for w in report.warnings if "uncalibrated" in w]
    assert "'mychip'" in warning and "compute.calibration" in warning
    assert f"warning: {warning}" in report.to_text()


def test_the_studys_own_calibration_silences_the_warning_and_is_named() -> None:
    report = _run(**{"compute.device": MYCHIP, "compute.calibration": {"compute_efficiency": 0.6}})
    assert report.calibration == "the study's compute.calibration (compute_efficiency) over datasheet figures"
    assert not [w for w in report.warnings if "uncalibrated" in w]


def test_datasheet_basis_is_the_bare_roofline_and_faster_than_the_fit() -> None:
    fitted = _run(**{"compute.device": "h100"})
    bare = _run(**{"compute.device": "h100", "compute.calibration": {"basis": "datasheet"}})
    assert bare.calibration == "datasheet figures"
    assert bare.total_time_ps < fitted.total_time_ps
    explicit = _run(
        **{
            "compute.device": "h100",
            "compute.calibration": {"basis": "datasheet", "compute_efficiency": 1.0, "memory_efficiency": 1.0},
        }
    )
    assert explicit.total_time_ps == bare.total_time_ps


def test_adjusting_one_figure_keeps_the_rest_of_the_fit() -> None:
    h100 = PRESETS["h100"]
    message = compute_pb2.Calibration(compute_efficiency=0.5)
    adjusted = calibrated(h100, message)
    assert adjusted.compute_efficiency == 0.5
    assert (adjusted.memory_efficiency, adjusted.size_efficiency) == (h100.memory_efficiency, True)
    assert adjusted.calibration_source.startswith("set by the request's calibration, over a model fitted to")
    bare = calibrated(h100, compute_pb2.Calibration(datasheet=True))
    assert bare == datasheet(h100)
    assert (bare.compute_efficiency, bare.memory_efficiency, bare.size_efficiency, bare.calibration_source) == (
        1.0,
        1.0,
        False,
        "",
    )


def test_the_roofline_describes_each_presets_model() -> None:
    response = RooflineCompute().describe(compute_pb2.DescribeRequest(devices=["a100", "h200", "mi300x", "gaudi3"]))
    a100, h200, mi300x, gaudi3 = response.devices
    assert "Narayanan" in a100.calibration and a100.calibration.startswith(
        "compute 0.586 of peak x tile and wave quantization, memory"
    )
    assert "the h100 preset's model" in h200.calibration
    assert mi300x.calibration.startswith("compute 0.298 of peak, memory 0.772") and "SemiAnalysis" in mi300x.calibration
    assert gaudi3.calibration.startswith("compute 0.207 of peak, memory 1") and "optimum-habana" in gaudi3.calibration


def test_a_device_described_from_a_preset_keeps_its_model() -> None:
    report = _run(**{"compute.device": {"preset": "h100", "name": "h100-more-hbm", "memory_capacity": "96GiB"}})
    assert "(the h100 preset's model)" in report.calibration


def test_per_kind_names_each_backends_model_when_they_differ() -> None:
    routes = PerKindCompute({"*": RooflineCompute(), "gemm": TimeloopCompute()}, {"gemm": "eyeriss-like"})
    (facts,) = routes.describe(compute_pb2.DescribeRequest(devices=["h100"])).devices
    assert facts.calibration == ""  # the Timeloop-style array is not calibrated, so neither is the whole
    alone = PerKindCompute({"*": RooflineCompute()})
    (facts,) = alone.describe(compute_pb2.DescribeRequest(devices=["h100"])).devices
    assert facts.calibration.startswith("compute 0.")


def test_backends_without_models_accept_the_datasheet_basis_and_refuse_figures() -> None:
    op = gemm(64, 64, 64, compute_pb2.BF16)
    backend = TimeloopCompute()
    plain = backend.estimate(compute_pb2.EstimateRequest(device="eyeriss-like", ops=[op]))
    basis = backend.estimate(
        compute_pb2.EstimateRequest(
            device="eyeriss-like", ops=[op], calibration=compute_pb2.Calibration(datasheet=True)
        )
    )
    assert basis == plain and not basis.HasField("error")
    refused = backend.estimate(
        compute_pb2.EstimateRequest(
            device="eyeriss-like", ops=[op], calibration=compute_pb2.Calibration(compute_efficiency=0.5)
        )
    )
    assert refused.error.where == "calibration"


def test_a_bad_basis_is_one_error_naming_the_key() -> None:
    with pytest.raises(StrataSimError, match=r"compute\.calibration\.basis"):
        _run(**{"compute.calibration": {"basis": "measured"}})


def test_every_fitted_preset_cites_what_it_was_fitted_to() -> None:
    fitted = [dev for dev in PRESETS.values() if dev.calibration_source]
    assert {dev.name for dev in fitted} == set(PRESETS)
    for dev in fitted:
        assert dev.compute_efficiency < 1 and dev.memory_efficiency <= 1
    assert device("a100") is PRESETS["a100"]
