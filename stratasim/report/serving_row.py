"""A serving workload's figures as the JSON report gives them: its times (``*_ps``) in ns (``*_ns``)."""

from __future__ import annotations

from collections.abc import Mapping

from stratasim.kernel.units import ps_to_ns

__all__ = ["serving_row"]


def serving_row(figures: Mapping[str, float]) -> dict[str, float]:
    """A serving workload's figures with its times (``*_ps``) given in ns (``*_ns``), in the same order."""
    row = {}
    for key, value in figures.items():
        if key.endswith("_ps"):
            key, value = key.removesuffix("_ps") + "_ns", ps_to_ns(value)
        row[key] = value
    return row
