"""The memory check asks the compute backend for the device's capacity (``describe``), so every backend gets it,
in-process and remote; a capacity no one knows is reported as a warning, never skipped in silence."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from stratasim.compute_layer.per_kind import PerKindCompute
from stratasim.config.study_file import load_study
from stratasim.kernel import registry
from stratasim.kernel.errors import SimulationError
from stratasim.study.device import memory_capacity
from stratasim.study.run import run_study
from stratasim.v1 import compute_pb2
from tests.contracts.contract_fakes import FakeCompute, served

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transformer.yaml"
MODES = ("in-process", "remote")


class TinyCompute(FakeCompute):
    """The contract suite's fake, whose ``fake-npu`` holds only 1 GiB: a backend other than the roofline."""

    name = "tiny"

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        response = super().describe(request)
        for facts in response.devices:
            if facts.HasField("memory_capacity_bytes"):
                facts.memory_capacity_bytes = 1 << 30
        return response


def _register(monkeypatch: pytest.MonkeyPatch, fakes: Mapping[str, Callable[..., Any]]) -> None:
    """Make ``fakes`` registered compute backends until the test ends, next to the real ones."""
    real_available, real_load = registry.available, registry.load

    def available(layer: str, extra: Mapping[str, Callable[..., Any]] | None = None) -> list[str]:
        return real_available(layer, {**fakes, **(extra or {})} if layer == "compute" else extra)

    def load(layer: str, name: str, extra: Mapping[str, Callable[..., Any]] | None = None) -> Callable[..., Any]:
        return real_load(layer, name, {**fakes, **(extra or {})} if layer == "compute" else extra)

    monkeypatch.setattr(registry, "available", available)
    monkeypatch.setattr(registry, "load", load)


def _run(monkeypatch: pytest.MonkeyPatch, mode: str, device: str, *overrides: str) -> Any:
    """The transformer example priced by the ``tiny`` backend on ``device``, in-process or through gRPC."""
    settings = ["compute.backend=tiny", f"compute.device={device}", *overrides]
    if mode == "in-process":
        _register(monkeypatch, {"tiny": TinyCompute})
        return run_study(load_study(EXAMPLE, settings))
    with served("compute", "tiny", {"tiny": TinyCompute}) as endpoint:
        return run_study(load_study(EXAMPLE, [*settings, f"compute.endpoint={endpoint}"]))


def test_capacity_comes_from_the_compute_backend_and_can_be_set() -> None:
    facts = compute_pb2.DeviceFacts(device="h100", memory_capacity_bytes=80 * 2**30)
    assert memory_capacity(load_study(EXAMPLE), facts) == (80 * 2**30, "")
    assert memory_capacity(load_study(EXAMPLE, ["system.memory_capacity=2GiB"]), facts) == (2 * 2**30, "")
    unknown = compute_pb2.DeviceFacts(device="x", memory_capacity_unknown="not modelled")
    assert memory_capacity(load_study(EXAMPLE), unknown) == (
        None,
        "the compute backend does not know 'x''s capacity (not modelled)",
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_backend_other_than_the_roofline_gets_the_memory_check(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    with pytest.raises(SimulationError, match="out of memory: NPU .* but holds 1 GiB"):
        _run(monkeypatch, mode, "fake-npu")
    report = _run(monkeypatch, mode, "fake-npu", "system.over_capacity=warn")
    uncalibrated, warning = report.warnings  # the fake backend has no efficiency model: said first
    assert "'fake-npu' runs uncalibrated" in uncalibrated
    assert warning.startswith("over capacity: NPU ") and "but holds 1 GiB" in warning
    # system.memory_capacity still overrides what the backend says.
    assert _run(monkeypatch, mode, "fake-npu", "system.memory_capacity=80GiB").warnings == (uncalibrated,)


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_capacity_is_reported_not_ignored(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    report = _run(monkeypatch, mode, "fake-edge")
    assert report.backends["compute"].startswith("tiny @ " if mode == "remote" else "tiny (in-process)")
    assert report.warnings[1:] == (
        "memory not checked: the compute backend does not know 'fake-edge''s capacity (an edge device's memory is "
        "not modelled); set system.memory_capacity to check it",
    )
    assert "\nwarning: memory not checked" in report.to_text()


def test_per_kind_holds_the_least_capacity_its_backends_know() -> None:
    routes = PerKindCompute({"gemm": TinyCompute(), "*": FakeCompute()})
    response = routes.describe(compute_pb2.DescribeRequest(devices=["fake-npu", "fake-edge"]))
    known, unknown = response.devices
    assert known == compute_pb2.DeviceFacts(device="fake-npu", memory_capacity_bytes=1 << 30)
    assert unknown.device == "fake-edge" and not unknown.HasField("memory_capacity_bytes")
    reason = "an edge device's memory is not modelled"
    assert unknown.memory_capacity_unknown == f"tiny: {reason}; fake: {reason}"
    error = routes.describe(compute_pb2.DescribeRequest(devices=["h100"])).error
    assert error.message == "tiny: unknown device 'h100'"
