"""Fixed slow-downs (``system.slowdown``) that agree with the symmetry classes keep the symmetry shortcut, exactly.

The stand-in classes are orbits of a symmetry group of the study, so a per-NPU property constant on the classes (a
factor and ``from`` time shared by a whole pipeline stage) is invariant under it: the stand-in lives each member's
timeline, and the total time equals simulating every NPU (``system.aggregate: false``) to the ps.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import stratasim
from stratasim.config.study_file import parse_study
from stratasim.study.budget import estimate_study
from stratasim.study.run import prepare_workload
from tests.system_layer.test_device_groups import PIPELINE

SHORTCUT_OFF = "system.slowdown/variability make the NPUs differ, so the symmetry shortcut is off: all 8 NPUs"


def _slowed(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The two-stage pipeline (tp 4 on the ring, NPUs 4-7 the second stage) with ``entries`` as system.slowdown."""
    data = copy.deepcopy(PIPELINE)
    data["system"] = {"slowdown": entries}
    return data


@pytest.mark.parametrize(
    "entries",
    [
        [{"npus": "4-7", "factor": 1.5}],
        [{"npus": "0-3", "factor": 1.2}, {"npus": "4-7", "factor": 2, "from": "100us"}],
    ],
)
def test_a_slowed_pipeline_stage_keeps_the_shortcut_exactly(entries: list[dict[str, Any]]) -> None:
    """Slowing whole stages: 2 NPUs simulated, the time of simulating all 8, later than the nominal run."""
    study = _slowed(entries)
    shortcut, every = stratasim.run(study), stratasim.run(study, system__aggregate=False)
    assert shortcut.simulated_npus == 2 and every.simulated_npus == 8
    assert shortcut.total_time_ps == every.total_time_ps > stratasim.run(PIPELINE).total_time_ps
    assert [npu.compute_ps for npu in shortcut.per_npu] == [npu.compute_ps for npu in every.per_npu]
    assert not any("symmetry" in warning for warning in shortcut.warnings)


@pytest.mark.parametrize(
    "entries",
    [
        [{"npus": [5], "factor": 1.5}],
        [{"npus": "4-7", "factor": 1.5, "from": "100us"}, {"npus": [6], "factor": 1.5}],
    ],
)
def test_a_slowdown_across_a_class_switches_the_shortcut_off(entries: list[dict[str, Any]]) -> None:
    """One NPU of a stage slowed otherwise than its stand-in: every NPU is simulated, and the report says so."""
    study = _slowed(entries)
    off, every = stratasim.run(study), stratasim.run(study, system__aggregate=False)
    assert off.simulated_npus == 8 and off.total_time_ps == every.total_time_ps
    assert any(warning.startswith(SHORTCUT_OFF) for warning in off.warnings)


def test_variability_switches_the_shortcut_off() -> None:
    """Draws differ per NPU even when their distribution is the same everywhere."""
    data = _slowed([])
    data["system"] = {"variability": {"npu": {"distribution": "lognormal", "sigma": 0.1}}}
    report = stratasim.run(data)
    assert report.simulated_npus == 8 and any(warning.startswith(SHORTCUT_OFF) for warning in report.warnings)


def test_the_budget_counts_what_the_engine_simulates() -> None:
    """The run's estimate: 2 NPUs for a slowed stage, all 8 for one slowed NPU of a stage."""
    studies = [
        parse_study(_slowed(entries), "pp2.yaml")
        for entries in ([{"npus": "4-7", "factor": 1.5}], [{"npus": [5], "factor": 1.5}])
    ]
    assert [estimate_study(study, *prepare_workload(study)).simulated for study in studies] == [2, 8]
