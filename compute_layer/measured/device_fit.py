"""Fitting the operator-level model to one measured profile, as ``tools/fit_operators.py`` fits the shipped ones.

The profile is split before fitting (:func:`~stratasim.compute_layer.measured.split.split_rows`), each class fitted
to its training rows (:func:`~stratasim.compute_layer.measured.fitting.fit_classes`) on the structure (tensor-core
tiling, L2 capacity) of a preset device, the parameters rounded to six significant digits as in
``data/parameters.json``, and the held-out rows priced by the rounded parameters for the error table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.measured.evaluation import LONG_US, KindError, kind_errors
from stratasim.compute_layer.measured.features import CLASSES, class_of
from stratasim.compute_layer.measured.fitting import fit_classes
from stratasim.compute_layer.measured.profile_rows import LAUNCH_EAGER, ProfileRow
from stratasim.compute_layer.measured.split import HELD_OUT_EVERY, split_rows
from stratasim.kernel.errors import ConfigError

__all__ = ["FittedProfile", "SIGNIFICANT", "fit_profile", "held_out_markdown", "held_out_table", "parameters_document"]
__all__ += ["device_document"]

SIGNIFICANT = 6
"""Significant digits the fitted parameters are written with."""

_FIT = (
    "least squares on log-time per class, training rows only; held out: every "
    f"{HELD_OUT_EVERY}th row of each class in file order"
)
"""How the parameters are fitted, as the provenance says."""


@dataclass(frozen=True)
class FittedProfile:
    """One profile's fitted classes (rounded), their held-out error table, one line per kind, and the host's issue
    time per kernel launched eagerly (seconds, rounded; None: the profile did not measure it)."""

    classes: dict[str, dict[str, float]]
    held_out: list[KindError]
    eager_launch_s: float | None = None


def fit_profile(rows: Sequence[ProfileRow], device: Device, source: str = "the profile") -> FittedProfile:
    """Fit ``rows`` (one device's whole profile, in file order) on ``device``'s structure; test on its held-out rows.

    A profile without rows of some class (no decode attention, no ``softmax``...) cannot be fitted: ConfigError
    naming ``source`` (the profile's file) and the classes missing."""
    training, held_out = split_rows(rows)
    missing = [name for name in CLASSES if not any(class_of(row) == name for row in training)]
    if missing:
        message = f"no rows of {', '.join(missing)}: a fit needs rows of every class ({', '.join(CLASSES)})"
        raise ConfigError(source, [("kind", message)])
    fitted = fit_classes(training, device)
    classes = {name: {key: _rounded(value) for key, value in p.items()} for name, p in fitted.items()}
    return FittedProfile(classes, kind_errors(held_out, classes, device), _eager_launch_s(rows))


def _eager_launch_s(rows: Sequence[ProfileRow]) -> float | None:
    """The host's issue time per kernel the profile measured (the median of its ``launch_eager`` rows), in seconds
    to six digits; None without such a row. Measured, never fitted."""
    times = sorted(row.us for row in rows if row.kind == LAUNCH_EAGER)
    return None if not times else _rounded(times[(len(times) - 1) // 2] * 1e-6)


def _rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT}g}")


def parameters_document(name: str, profile: Path, fitted: FittedProfile, provenance: dict[str, Any]) -> dict[str, Any]:
    """The parameters file of one device ``name``, in the layout of ``data/parameters.json``: ``provenance`` (with
    the fit's line added) and the device's profile file name, its SHA-256 and the fitted classes."""
    entry = {"profile": profile.name, "sha256": _sha256(profile)}
    return {"provenance": {**provenance, "fit": _FIT}, "devices": {name: {**entry, "classes": fitted.classes}}}


def device_document(
    name: str, structure: Device, profile: Path, fitted: FittedProfile, provenance: dict[str, Any]
) -> dict[str, Any]:
    """The device file of ``name`` fitted on ``structure`` (a study's ``compute.device``, the keys of
    :class:`~stratasim.compute_layer.measured.device_section.MeasuredDeviceSection`): the profile's file name (the
    device file is written beside it), its SHA-256, ``provenance`` with the fit's line added, the classes and, when
    the profile measured it, the host's issue time per kernel (``launch: {eager_s: ...}``)."""
    document: dict[str, Any] = {
        "name": name,
        "structure": structure.name,
        "sha256": _sha256(profile),
        "profile": profile.name,
        "provenance": {**provenance, "fit": _FIT},
        "classes": fitted.classes,
    }
    if fitted.eager_launch_s is not None:
        document["launch"] = {"eager_s": fitted.eager_launch_s}
    return document


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def held_out_table(name: str, lines: Sequence[KindError]) -> str:
    """The held-out error table of device ``name`` as markdown (the columns of ``tools/fit_operators.py --report``)."""
    return held_out_markdown([(name, lines)])


def held_out_markdown(devices: Sequence[tuple[str, Sequence[KindError]]]) -> str:
    """One markdown table of the held-out errors of each (device name, lines per kind), in order."""
    table = [
        f"| GPU | kind | rows held out | median \\|error\\| | worst \\|error\\| over {LONG_US:g} us | target |",
        "|---|---|---|---|---|---|",
    ]
    for name, lines in devices:
        for line in lines:
            worst = "—" if line.worst_long is None else f"{line.worst_long:.1%}"
            verdict = "met" if line.meets_target else "missed"
            table.append(f"| {name} | {line.kind} | {line.rows} | {line.median:.1%} | {worst} | {verdict} |")
    return "\n".join(table)
