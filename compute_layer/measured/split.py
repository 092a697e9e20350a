"""Which profile rows the fit never sees: every fourth row of each fitted class in file order (its 4th, 8th, ...),
chosen before any fit and independent of the times, so the error on them is an honest test of the model.

Classes, not kinds: forward and backward attention alternate in the file, so counting ``attention_causal`` rows
would hold out backward passes only. The rows no class fits (:data:`~stratasim.compute_layer.measured.profile_rows.
UNFITTED_KINDS`: the ``tiny_kernel`` row, the floors' evidence, and the eager host time) always train."""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.compute_layer.measured.features import class_of
from stratasim.compute_layer.measured.profile_rows import UNFITTED_KINDS, ProfileRow

__all__ = ["HELD_OUT_EVERY", "split_rows"]

HELD_OUT_EVERY = 4
"""A kind's rows numbered from 1 in file order; those numbered a multiple of this are held out."""


def split_rows(rows: Sequence[ProfileRow]) -> tuple[list[ProfileRow], list[ProfileRow]]:
    """``(training, held_out)``: each class's every :data:`HELD_OUT_EVERY`-th row is held out, the rest train."""
    seen: dict[str, int] = {}
    training: list[ProfileRow] = []
    held_out: list[ProfileRow] = []
    for row in rows:
        name = class_of(row)
        seen[name] = seen.get(name, 0) + 1
        (held_out if seen[name] % HELD_OUT_EVERY == 0 and name not in UNFITTED_KINDS else training).append(row)
    return training, held_out
