"""The fitted operator-level model as shipped: ``data/parameters.json``, written by ``tools/fit_operators.py``.

The file holds, per device, the profile it was fitted to and each class's parameters (seconds, FLOP/s, bytes/s,
a dimensionless sharpness), with the fit's provenance and the held-out split. The runtime reads it; it never refits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DATA", "PARAMETERS", "FittedModel", "load_parameters", "profile_path"]

DATA = Path(__file__).resolve().parent / "data"
"""The folder of the shipped profiles, their provenance and the fitted parameters."""

PARAMETERS = DATA / "parameters.json"


@dataclass(frozen=True)
class FittedModel:
    """The parameters of every class per device (``classes[device][class][name]``) and the fit's provenance."""

    classes: dict[str, dict[str, dict[str, float]]]
    provenance: dict[str, Any]

    @property
    def devices(self) -> list[str]:
        """The devices fitted, sorted."""
        return sorted(self.classes)


def load_parameters(path: Path = PARAMETERS) -> FittedModel:
    """The fitted model stored at ``path``."""
    document = json.loads(path.read_text(encoding="utf-8"))
    classes = {name: entry["classes"] for name, entry in document["devices"].items()}
    return FittedModel(classes, document["provenance"])


def profile_path(device: str) -> Path:
    """The shipped profile of ``device`` (``h100`` or ``h200``)."""
    provenance = json.loads((DATA / "provenance.json").read_text(encoding="utf-8"))
    return DATA / provenance["profiles"][device]["file"]
