"""Peak memory along the timeline against the device's capacity, and the training figures built from the
engine's per-NPU accounting (pipeline bubble, exposed time by communicator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.config.study_file import load_study
from stratasim.kernel.errors import SimulationError
from stratasim.study.device import memory_capacity
from stratasim.study.run import run_study
from stratasim.v1 import compute_pb2
from tests.helpers import stratasim_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transformer.yaml"


def test_capacity_defaults_to_the_roofline_preset_and_can_be_set() -> None:
    (h100,) = RooflineCompute().describe(compute_pb2.DescribeRequest(devices=["h100"])).devices
    assert memory_capacity(load_study(EXAMPLE), h100) == (80 * 2**30, "")  # h100
    assert memory_capacity(load_study(EXAMPLE, ["system.memory_capacity=2GiB"]), h100) == (2 * 2**30, "")


def test_over_capacity_fails_naming_the_npu_time_and_breakdown() -> None:
    with pytest.raises(SimulationError) as caught:
        run_study(load_study(EXAMPLE, ["system.memory_capacity=1GiB"]))
    message = str(caught.value)
    assert message.startswith("out of memory: NPU ") and "but holds 1 GiB" in message
    for kind in ("weights", "gradients", "optimizer", "working"):
        assert kind in message
    assert "NPUs over capacity" in message and "system.over_capacity: warn" in message


def test_over_capacity_can_warn_instead() -> None:
    report = run_study(load_study(EXAMPLE, ["system.memory_capacity=1GiB", "system.over_capacity=warn"]))
    (warning,) = report.warnings
    assert warning.startswith("over capacity: NPU ")
    assert "over_capacity: warn" not in warning  # it is set already (issue 14's defect): say what it means instead
    assert "the times assume it fits" in warning
    assert report.to_text().startswith("warning: over capacity")
    assert report.to_dict()["warnings"] == [warning]


def test_over_capacity_through_the_cli_is_one_error_line() -> None:
    done = stratasim_process("run", str(EXAMPLE), "--set", "system.memory_capacity=1GiB", timeout=120)
    code, stderr = done.returncode, done.stderr
    assert code == 2 and stderr.startswith("error: out of memory: NPU ") and "Traceback" not in stderr


def test_peak_memory_matches_the_analytic_model_and_the_bubble_adds_up() -> None:
    report = run_study(load_study(EXAMPLE))
    assert report.training is not None
    analytic = report.training["memory_per_npu_bytes"]
    per_npu = report.result.per_npu
    assert [npu.peak_memory_bytes for npu in per_npu] == analytic
    total_ps = report.total_time_ps
    idle = [
        total_ps - npu.compute_ps - sum(ps for kind, ps in npu.exposed_comm_ps_by_kind if kind not in ("pp", "p2p"))
        for npu in per_npu
    ]
    assert report.training["pipeline_bubble_fraction"] == pytest.approx(sum(idle) / len(idle) / total_ps, rel=1e-6)
    assert 0 < report.training["pipeline_bubble_fraction"] < 0.5
    for npu in per_npu:
        assert sum(ps for _, ps in npu.exposed_comm_ps_by_kind) == npu.exposed_comm_ps
        assert {kind for kind, _ in npu.exposed_comm_ps_by_kind} <= {"tp", "dp", "pp"}
