"""The report's operator table: every distinct priced operator with its bound, time and energy.

In the JSON each row has ``names`` (the first few names the workload gave it), ``kind``, ``shape``, ``dtype``, ``flops``, ``bytes``, ``count`` (runs over
all NPUs), ``duration_ps`` and ``duration_ns`` (one run), ``energy_pj`` (one run), ``bound`` (``compute``,
``memory``... as the backend said), ``traffic`` (``{level: bytes}`` of one run) and ``total_ns`` (count times
duration). The text shows the operators that take the most time in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stratasim.kernel.units import format_energy_pj, format_time_ps
from stratasim.system_layer.result import OperatorStats

__all__ = ["OperatorSummary", "operator_lines"]

_MAX_ROWS = 10


@dataclass(frozen=True)
class OperatorSummary:
    """One distinct operator of the study, as the report shows it."""

    names: tuple[str, ...]
    kind: str
    shape: tuple[int, ...]
    dtype: str
    flops: int
    bytes: int
    count: int
    duration_ps: int
    duration_ns: float
    total_ns: float
    energy_pj: float
    bound: str
    traffic: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, stats: OperatorStats) -> OperatorSummary:
        return cls(
            stats.names, stats.kind, stats.shape, stats.dtype, stats.flops, stats.bytes, stats.count,
            stats.duration_ps, stats.duration_ps / 1000, stats.count * stats.duration_ps / 1000, stats.energy_pj,
            stats.bound, dict(stats.traffic),
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data."""
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}


def _tflops(row: OperatorSummary) -> str:
    """Achieved TFLOP/s of one run (``-`` for an operator without FLOPs or time)."""
    return f"{row.flops / row.duration_ps:,.1f}" if row.flops and row.duration_ps else "-"


def _label(names: tuple[str, ...]) -> str:
    """The first name, with how many others the same operator goes by (``qkv +2``), in 23 characters."""
    first = names[0] if names else "?"
    more = f" +{len(names) - 1}" if len(names) > 1 else ""
    return first[: 23 - len(more)] + more


def operator_lines(rows: tuple[OperatorSummary, ...]) -> list[str]:
    """The text table of the operators taking the most time in all (rows come sorted that way)."""
    if not rows:
        return []
    total = sum(row.total_ns for row in rows)
    head = f"{'operator':<24}{'kind':<12}{'shape':<24}{'runs':>8}{'each':>12}{'share':>8}{'TFLOP/s':>9}  {'bound':<8}"
    lines = ["", f"operators ({len(rows)} distinct, most time first)", f"  {head}{'energy each':>12}"]
    for row in rows[:_MAX_ROWS]:
        share = row.total_ns / total if total else 0.0
        shape = "x".join(str(size) for size in row.shape)
        lines.append(
            f"  {_label(row.names):<24}{row.kind:<12}{shape[:23]:<24}{row.count:>8,}"
            f"{format_time_ps(row.duration_ps):>12}{share:>8.1%}{_tflops(row):>9}  {row.bound:<8}"
            f"{format_energy_pj(row.energy_pj):>12}"
        )
    if len(rows) > _MAX_ROWS:
        lines.append(f"  ... {len(rows) - _MAX_ROWS} more in report.json")
    return lines

