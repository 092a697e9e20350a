"""``system.contention``: on by default where the backend times operators alone (``measured``), off where the
efficiency was fitted to whole runs (roofline presets, whose figures stay bit-identical); bad values refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import stratasim
from stratasim.kernel.errors import ConfigError
from tests.cli.test_bad_input import assert_one_clear_message
from tests.helpers import stratasim_process

STUDY = Path(__file__).resolve().parents[2] / "examples" / "calibration" / "mpt_7b_h100.yaml"


def _time(**overrides: object) -> int:
    return stratasim.run(STUDY, **overrides).result.total_time_ps


def test_roofline_presets_leave_it_off_unless_asked() -> None:
    plain = _time()
    assert "system.contention" not in stratasim.run(STUDY).calibration
    assert _time(**{"system.contention": False}) == plain
    assert _time(**{"system.contention": True}) > plain  # FSDP's gathers overlap compute


def test_the_measured_backend_counts_it_unless_told_not_to() -> None:
    measured = {"compute.backend": "measured"}
    assert _time(**measured) == _time(**measured, **{"system.contention": True})
    assert _time(**measured, **{"system.contention": False}) < _time(**measured)
    said = stratasim.run(STUDY, **measured).calibration
    assert said.endswith(
        "; collectives slow the compute they overlap (system.contention): 32 of 132 SMs, 0.90 of 3.35 TB/s of "
        "memory bandwidth"
    )


def test_asking_for_it_on_a_device_without_a_footprint_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"system.contention: true, but .* device 'tpuv4'"):
        stratasim.run(STUDY, **{"system.contention": True, "compute.device": "tpuv4"})


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("system.contention=maybe", "system.contention"),
        ("system.contention=1", "system.contention"),
    ],
)
def test_a_value_that_is_not_a_boolean_is_named(override: str, fragment: str) -> None:
    done = stratasim_process("run", str(STUDY), "--set", override)
    assert_one_clear_message(done.returncode, done.stderr, fragment)
