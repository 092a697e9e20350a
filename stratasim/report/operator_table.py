"""The report's operator table: every distinct priced operator with its bound, time and energy.

In the JSON each row has ``names`` (the first few names the workload gave it), ``kind``, ``shape``, ``dtype``,
``flops``, ``bytes``, ``count`` (runs over all NPUs), ``duration_ps`` and ``duration_ns`` (one run), ``energy_pj``
(one run), ``bound`` (``compute``, ``memory``... as the backend said), ``traffic`` (``{level: bytes}`` of one run)
and ``total_ns`` (count times duration). The text shows the operators that take the most time in all, then the
share of the operators' time each kind takes (``operator_kinds`` in the JSON: ``kind``, ``total_ns``, ``share``).
Both read the engine's :class:`~stratasim.system_layer.result.OperatorStats` as it is.
"""

from __future__ import annotations

from typing import Any

from stratasim.kernel.units import format_energy_pj, format_time_ps, ps_to_ns
from stratasim.system_layer.result import OperatorStats

__all__ = ["operator_row", "operator_lines", "kind_rows"]

_MAX_ROWS = 10


def operator_row(stats: OperatorStats) -> dict[str, Any]:
    """One distinct operator of the study as a JSON row."""
    return {
        "names": list(stats.names),
        "kind": stats.kind,
        "shape": list(stats.shape),
        "dtype": stats.dtype,
        "flops": stats.flops,
        "bytes": stats.bytes,
        "count": stats.count,
        "duration_ps": stats.duration_ps,
        "duration_ns": ps_to_ns(stats.duration_ps),
        "total_ns": ps_to_ns(stats.count * stats.duration_ps),
        "energy_pj": stats.energy_pj,
        "bound": stats.bound,
        "traffic": dict(stats.traffic),
    }


def _time_by_kind(rows: tuple[OperatorStats, ...]) -> list[tuple[str, int]]:
    """Each operator kind (``other`` for operators of none) with the picoseconds its runs take in all, most first."""
    totals: dict[str, int] = {}
    for row in rows:
        kind = row.kind or "other"
        totals[kind] = totals.get(kind, 0) + row.count * row.duration_ps
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))


def kind_rows(rows: tuple[OperatorStats, ...]) -> list[dict[str, Any]]:
    """The share of the operators' time each kind takes, as JSON rows, most time first."""
    by_kind = _time_by_kind(rows)
    total = sum(ps for _, ps in by_kind)
    return [{"kind": kind, "total_ns": ps_to_ns(ps), "share": ps / total if total else 0.0} for kind, ps in by_kind]


def _tflops(row: OperatorStats) -> str:
    """Achieved TFLOP/s of one run (``-`` for an operator without FLOPs or time)."""
    return f"{row.flops / row.duration_ps:,.1f}" if row.flops and row.duration_ps else "-"


def _label(names: tuple[str, ...]) -> str:
    """The first name, with how many others the same operator goes by (``qkv +2``), in 23 characters."""
    first = names[0] if names else "?"
    more = f" +{len(names) - 1}" if len(names) > 1 else ""
    return first[: 23 - len(more)] + more


def operator_lines(rows: tuple[OperatorStats, ...]) -> list[str]:
    """The text table of the operators taking the most time in all (rows come sorted that way)."""
    if not rows:
        return []
    total = sum(row.count * row.duration_ps for row in rows)
    head = f"{'operator':<24}{'kind':<12}{'shape':<24}{'runs':>8}{'each':>12}{'share':>8}{'TFLOP/s':>9}  {'bound':<8}"
    lines = ["", f"operators ({len(rows)} distinct, most time first)", f"  {head}{'energy each':>12}"]
    for row in rows[:_MAX_ROWS]:
        share = row.count * row.duration_ps / total if total else 0.0
        shape = "x".join(str(size) for size in row.shape)
        lines.append(
            f"  {_label(row.names):<24}{row.kind:<12}{shape[:23]:<24}{row.count:>8,}"
            f"{format_time_ps(row.duration_ps):>12}{share:>8.1%}{_tflops(row):>9}  {row.bound:<8}"
            f"{format_energy_pj(row.energy_pj):>12}"
        )
    if len(rows) > _MAX_ROWS:
        lines.append(f"  ... {len(rows) - _MAX_ROWS} more in report.json")
    shares = ", ".join(f"{row['kind']} {row['share']:.1%}" for row in kind_rows(rows))
    lines.append(f"  time by kind: {shares}")
    return lines
