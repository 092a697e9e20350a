"""A described device larger than any real one is one clear error naming the key: PE arrays, wafers, storage levels,
a roofline device's compute units and on-chip memory, each bounded at ten times the largest built
(:mod:`stratasim.compute_layer.device_bounds`), in a study and on the wire alike."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from stratasim.compute_layer.device_bounds import MAX_CORES, MAX_LEVEL_WORDS, MAX_PES
from stratasim.compute_layer.timeloop.accelerator_presets import accelerator
from stratasim.compute_layer.timeloop.accelerator_wire import accelerator_from_message, accelerator_message
from stratasim.config.study_file import parse_study
from stratasim.kernel.errors import ConfigError
from tests.helpers import ROOT

_QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text(encoding="utf-8"))


def _study(compute: dict[str, Any]) -> dict[str, Any]:
    return {**_QUICKSTART, "compute": compute}


@pytest.mark.parametrize(
    ("compute", "expected"),
    [
        (
            {"backend": "timeloop", "device": {"preset": "eyeriss-like", "pe_rows": 10**6, "pe_cols": 10**6}},
            r"the PE array \(pe_rows x pe_cols\): 1,000,000,000,000 PEs is more than any real device has "
            r"\(at most 16,777,216",
        ),
        (
            {
                "backend": "timeloop",
                "device": {"preset": "eyeriss-like", "levels": {"global_buffer": {"words": 10**18}}},
            },
            r"storage level 'global_buffer': words: 1,000,000,000,000,000,000 words is more than any real device",
        ),
        (
            {"backend": "wafer", "device": {"preset": "palm-wafer", "cores": {"x": 10**9, "y": 10**9}}},
            r"tiles x cores: 20,000,000,000,000,000,000 cores is more than any real device",
        ),
        (
            {"backend": "roofline", "device": {"preset": "h100", "tiling": {"units": 10**18}}},
            r"tiling.units: 1,000,000,000,000,000,000 compute units is more than any real device",
        ),
        (
            {"backend": "roofline", "device": {"preset": "h100", "sram": {"capacity": "2TiB"}}},
            r"sram.capacity: 2,199,023,255,552 bytes is more than any real device",
        ),
    ],
    ids=["pe-array", "buffer-words", "wafer-cores", "roofline-units", "roofline-sram"],
)
def test_a_device_beyond_any_real_one_is_one_error_naming_the_key(compute: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as raised:
        parse_study(_study(compute), "study")
    assert "compute.device" in str(raised.value)


def test_the_bounds_leave_room_beyond_todays_largest_devices() -> None:
    # WSE-3: 900,000 cores; 288 GB of HBM3e: every bound is at least ten times the largest built.
    assert MAX_PES >= 10 * 900_000 and MAX_CORES >= 10 * 900_000 and MAX_LEVEL_WORDS >= 10 * 288 * 10**9
    study = _study({"backend": "timeloop", "device": {"preset": "eyeriss-like", "pe_rows": 1024, "pe_cols": 1024}})
    assert parse_study(study, "study").compute.device is not None  # a megaPE array is a design worth studying


def test_an_accelerator_sent_on_the_wire_is_bounded_too() -> None:
    message = accelerator_message(accelerator("eyeriss-like"))
    message.rows, message.cols = 10**6, 10**6
    with pytest.raises(ValueError, match=r"1,000,000,000,000 PEs is more than any real device has"):
        accelerator_from_message(message)
