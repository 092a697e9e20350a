"""Studies on a Timeloop-style accelerator and a wafer written out whole, without a preset, in a device file: the
report of the preset they copy, in-process and from a spawned compute server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.compute_layer.timeloop import accelerator
from stratasim.compute_layer.wafer import PALM_WAFER
from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from tests.compute_layer.test_described_accelerator import BASE as TIMELOOP_STUDY
from tests.compute_layer.test_described_accelerator import _written as written_accelerator
from tests.compute_layer.test_described_wafer import _written as written_wafer

ROOT = Path(__file__).resolve().parents[2]
WAFER_STUDY = (
    (ROOT / "examples" / "training_loop.yaml")
    .read_text()
    .replace("backend: roofline\n  device: h100", "backend: wafer\n  device: palm-wafer")
)
STUDIES = {
    "timeloop": (TIMELOOP_STUDY, "device: systolic-32x32-os", written_accelerator(accelerator("systolic-32x32-os"))),
    "wafer": (WAFER_STUDY, "device: palm-wafer", written_wafer(PALM_WAFER)),
}


def _numbers(report: Any) -> dict[str, Any]:
    """The report as JSON without what may differ run to run (wall time) or names where a layer ran."""
    data = report.to_dict()
    for key in ("wall_seconds", "backends"):
        data.pop(key)
    return dict(data)


@pytest.mark.parametrize("backend", sorted(STUDIES))
def test_a_whole_device_file_gives_the_report_of_the_preset_in_process_and_spawned(
    tmp_path: Path, backend: str
) -> None:
    text, named, whole = STUDIES[backend]
    assert named in text
    (tmp_path / "chip.yaml").write_text(yaml.safe_dump(whole), encoding="utf-8")
    preset, described = tmp_path / "preset.yaml", tmp_path / "described.yaml"
    preset.write_text(text, encoding="utf-8")
    described.write_text(text.replace(named, "device: {file: chip.yaml}"), encoding="utf-8")
    expected = _numbers(run_study(load_study(preset)))
    assert _numbers(run_study(load_study(described))) == expected
    spawned = run_study(load_study(described, ["compute.spawn=true"]))
    assert "(spawned)" in spawned.backends["compute"] and _numbers(spawned) == expected
