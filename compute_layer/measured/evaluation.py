"""How well the fitted model reproduces a profile: relative errors per row, and the held-out table per kind.

The table's kinds are the profile's, with causal attention split by pass (``attention_forward``,
``attention_backward``); the target is a median absolute error of at most :data:`MEDIAN_TARGET` per kind and no
operator longer than :data:`LONG_US` worse than :data:`WORST_TARGET`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.measured.features import class_of, row_model
from stratasim.compute_layer.measured.profile_rows import ProfileRow

__all__ = ["KindError", "MEDIAN_TARGET", "WORST_TARGET", "LONG_US", "row_error", "kind_errors", "report_label"]

MEDIAN_TARGET = 0.05
WORST_TARGET = 0.15
LONG_US = 20.0


@dataclass(frozen=True)
class KindError:
    """One kind's held-out figures: rows, median |error| and the worst |error| on rows over :data:`LONG_US`
    (None when no held-out row is that long)."""

    kind: str
    rows: int
    median: float
    worst_long: float | None

    @property
    def meets_target(self) -> bool:
        """Whether the kind meets the median and the long-operator targets."""
        return self.median <= MEDIAN_TARGET and (self.worst_long is None or self.worst_long <= WORST_TARGET)


def report_label(row: ProfileRow) -> str:
    """The kind a row is reported under: its profile kind, causal attention by pass."""
    return class_of(row) if row.kind == "attention_causal" else row.kind


def row_error(row: ProfileRow, classes: Mapping[str, Mapping[str, float]], device: Device) -> float:
    """``modelled / measured - 1`` for ``row`` under the fitted ``classes``."""
    return row_model(row, device)(classes[class_of(row)]) / (row.us * 1e-6) - 1.0


def kind_errors(
    rows: Sequence[ProfileRow], classes: Mapping[str, Mapping[str, float]], device: Device
) -> list[KindError]:
    """The held-out table of ``rows`` (one device's held-out rows), one line per kind in first-seen order."""
    grouped: dict[str, list[ProfileRow]] = {}
    for row in rows:
        grouped.setdefault(report_label(row), []).append(row)
    table = []
    for kind, members in grouped.items():
        errors = [abs(row_error(row, classes, device)) for row in members]
        long = [error for error, row in zip(errors, members) if row.us > LONG_US]
        table.append(KindError(kind, len(members), statistics.median(errors), max(long) if long else None))
    return table
