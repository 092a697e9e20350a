"""The adapters' failures come back as one clear ``EstimateResponse.error``, never as a traceback.

These run without SCALE-Sim or ZigZag: a missing package is simulated by hiding it from ``sys.modules``, and
the simulators' own failures by stand-ins that fail the way they do (SCALE-Sim prints ``ERROR: ...`` and calls
``exit()``; ZigZag logs a critical message, raises ``ValueError`` and has called ``logging.basicConfig``).
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType
from typing import Any

import numpy
import pytest

from stratasim.adapters.scalesim import ScaleSimCompute
from stratasim.adapters.zigzag import ZigZagCompute
from stratasim.kernel import operators
from stratasim.kernel.contracts import ComputeBackend
from stratasim.v1 import common_pb2, compute_pb2

GEMM = operators.gemm(64, 64, 64, dtype=compute_pb2.INT8, name="fc")


def _error(backend: ComputeBackend, device: str, *ops: compute_pb2.OperatorDesc, **fields: Any) -> common_pb2.Error:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=ops, **fields))
    assert response.HasField("error") and not response.costs
    return response.error


def _stand_in(monkeypatch: pytest.MonkeyPatch, name: str, **attributes: Any) -> ModuleType:
    """Install a fake module ``name`` (and its parent package) in ``sys.modules``, with a numpy SCALE-Sim takes."""
    monkeypatch.setattr(numpy, "__version__", "2.3.5")
    module = ModuleType(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    parent = name.partition(".")[0]
    monkeypatch.setitem(sys.modules, parent, sys.modules.get(parent) or ModuleType(parent))
    monkeypatch.setitem(sys.modules, name, module)
    return module


def test_adapters_are_compute_backends_offering_their_devices() -> None:
    scalesim, zigzag = ScaleSimCompute(), ZigZagCompute()
    assert isinstance(scalesim, ComputeBackend) and scalesim.name == "scalesim"
    assert isinstance(zigzag, ComputeBackend) and zigzag.name == "zigzag"
    assert {"systolic-32x32-os", "systolic-128x128-ws"} <= set(scalesim.devices())
    assert "tpu-like" in zigzag.devices()


@pytest.mark.parametrize("device", ["systolic-32-os", "systolic-0x4-ws", "systolic-8x8-rs", "tpu-like"])
def test_a_device_scalesim_cannot_parse_is_named(device: str) -> None:
    error = _error(ScaleSimCompute(), device, GEMM)
    assert error.code == common_pb2.Error.INVALID_ARGUMENT and error.where == "device"
    assert f"unknown device {device!r}" in error.message and "systolic-<R>x<C>-<os|ws|is>" in error.message


def test_an_unknown_zigzag_device_lists_the_examples() -> None:
    error = _error(ZigZagCompute(), "systolic-32x32-os", GEMM)
    assert error.where == "device" and "tpu-like" in error.message and "edge-tpu-like" in error.message


@pytest.mark.parametrize(
    ("backend", "device", "modules", "extra"),
    [
        (ScaleSimCompute, "systolic-32x32-os", ["scalesim", "scalesim.scale_sim"], "scalesim"),
        (ZigZagCompute, "tpu-like", ["zigzag", "zigzag.api"], "zigzag"),
    ],
)
def test_a_missing_package_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, backend: type[ComputeBackend], device: str, modules: list[str], extra: str
) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    error = _error(backend(), device, GEMM)
    assert error.code == common_pb2.Error.FAILED_PRECONDITION and error.where == "backend"
    assert f"pip install 'stratasim[{extra}]'" in error.message and "cannot be imported" in error.message


def test_scalesim_refuses_numpy_2_4(monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in(monkeypatch, "scalesim.scale_sim", scalesim=object)
    monkeypatch.setattr(numpy, "__version__", "2.4.1")
    error = _error(ScaleSimCompute(), "systolic-32x32-ws", GEMM)
    assert error.code == common_pb2.Error.FAILED_PRECONDITION
    assert "numpy 2.4.1" in error.message and "numpy<2.4" in error.message


def test_scalesim_exiting_becomes_an_error_quoting_what_it_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Exits:
        def __init__(self, **_: Any) -> None:
            print("ERROR: scalesim.scale.py: Topology file not found")
            sys.exit()

    _stand_in(monkeypatch, "scalesim.scale_sim", scalesim=Exits)
    error = _error(ScaleSimCompute(), "systolic-32x32-os", GEMM)
    assert error.code == common_pb2.Error.INTERNAL and error.where == "ops[0]"
    assert error.message == (
        "ops[0] ('fc'): SCALE-Sim failed on this operator: it exited "
        "(its last output: 'ERROR: scalesim.scale.py: Topology file not found')"
    )
    assert capsys.readouterr() == ("", "")  # nothing leaked to the terminal


def test_a_layer_scalesim_rejects_is_named_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    class Rejects:
        def __init__(self, **_: Any) -> None:
            raise AssertionError("Filter height cannot be larger than IFMAP height")

    _stand_in(monkeypatch, "scalesim.scale_sim", scalesim=Rejects)
    conv = operators.conv2d(1, 8, 8, 4, 4, 3, 3, dtype=compute_pb2.INT8, name="conv")
    error = _error(ScaleSimCompute(), "systolic-8x8-ws", GEMM, conv)
    assert (
        error.where == "ops[0]" and "AssertionError: Filter height cannot be larger than IFMAP height" in error.message
    )


def test_scalesim_refuses_a_layer_too_large_to_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in(monkeypatch, "scalesim.scale_sim", scalesim=lambda **_: pytest.fail("SCALE-Sim ran"))
    big = operators.gemm(8192, 8192, 8192, dtype=compute_pb2.INT8)
    error = _error(ScaleSimCompute(), "systolic-32x32-os", big)
    assert error.code == common_pb2.Error.INVALID_ARGUMENT and error.where == "ops[0]"
    assert "more than max_trace_words=60000000" in error.message and "timeloop backend" in error.message


def test_zigzag_failing_becomes_an_error_and_leaves_logging_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(*_: Any, **__: Any) -> None:
        logging.basicConfig(level=logging.INFO)
        logging.getLogger("zigzag.parser").critical("User-defined workload is invalid.")
        raise ValueError("Failed to validate user provided workload.")

    _stand_in(monkeypatch, "zigzag.api", get_hardware_performance_zigzag=fails, __file__="/nowhere/zigzag/api.py")
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    error = _error(ZigZagCompute(), "tpu-like", operators.gemm(64, 64, 64, name="fc"))
    assert error.code == common_pb2.Error.INTERNAL and error.where == "ops[0]"
    assert error.message == (
        "ops[0] ('fc'): ZigZag failed on this operator: ValueError: Failed to validate user provided workload. "
        "(its last output: 'User-defined workload is invalid.')"
    )
    assert root.handlers == handlers and root.level == level


@pytest.mark.parametrize("backend", [ScaleSimCompute, ZigZagCompute])
def test_operators_the_adapters_cannot_take(backend: type[ComputeBackend]) -> None:
    device = backend().devices()[0]
    error = _error(backend(), device, operators.elementwise([1024]))
    assert error.code == common_pb2.Error.UNSUPPORTED
    assert "cannot cost operator kind ELEMENTWISE; it prices GEMM and CONV (route others" in error.message
    bad = compute_pb2.OperatorDesc(gemm=compute_pb2.GemmShape(m=4, k=0, n=4))
    assert _error(backend(), device, bad).where == "ops[0].gemm.k"
    calibration = compute_pb2.Calibration(compute_efficiency=0.5)
    assert _error(backend(), device, GEMM, calibration=calibration).where == "calibration"
