"""The shipped H100 profile standing for a measurement, as tests save it the way ``stratasim profile`` saves one."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.measured.gpu_profile import ProfileOutputs, save_profile
from stratasim.compute_layer.measured.parameters import profile_path

PROVENANCE = {"software": "PyTorch 2.11", "date": "2026-11-28", "method": "CUDA-graph replay medians"}
"""What a test's measurement says of itself."""


def reference_rows() -> list[dict[str, object]]:
    """The shipped H100 profile's rows, each cell as read."""
    with open(profile_path("h100"), newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def save_measurement(
    out: Path,
    name: str = "mygpu",
    rows: Sequence[Mapping[str, object]] | None = None,
    provenance: Mapping[str, object] = PROVENANCE,
) -> ProfileOutputs:
    """``rows`` (default: the reference H100's) saved into ``out`` as a measurement of ``name`` on the h100's
    structure: the profile, its device file and its replay table."""
    measured = [dict(row) for row in (reference_rows() if rows is None else rows)]
    return save_profile(measured, out, name, "bf16", PRESETS["h100"], dict(provenance))
