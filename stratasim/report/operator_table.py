"""The report's operator table: every distinct priced operator with its bound, time and energy.

In the JSON each row has ``names`` (the first few names the workload gave it), ``kind``, ``shape``, ``dtype``,
``flops``, ``bytes``, ``count`` (runs over all NPUs), ``duration_ps`` and ``duration_ns`` (one run), ``energy_pj``
(one run), ``bound`` (``compute``, ``memory``... as the backend said), ``traffic`` (``{level: bytes}`` of one run),
``basis`` (where its time comes from: ``measured``, ``fitted_to_operators``, ``fitted_to_runs``, ``datasheet`` or
``unknown``) and ``total_ns`` (count times duration). The text shows the operators that take the most time in all,
then the share of the operators' time each kind takes and its basis (``operator_kinds`` in the JSON: ``kind``,
``total_ns``, ``share``, ``basis`` — ``mixed`` when the kind's operators come from several — and ``bases``, the
share of the kind's time each basis gives). Both read the engine's
:class:`~stratasim.system_layer.result.OperatorStats` as it is.
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
        "basis": stats.basis,
        **({"device": stats.device} if stats.device else {}),
    }


def _time_by_kind(rows: tuple[OperatorStats, ...]) -> list[tuple[str, dict[str, int]]]:
    """Each operator kind (``other`` for operators of none) with the picoseconds its runs take in all by basis,
    the kind taking most time first."""
    totals: dict[str, dict[str, int]] = {}
    for row in rows:
        by_basis = totals.setdefault(row.kind or "other", {})
        by_basis[row.basis] = by_basis.get(row.basis, 0) + row.count * row.duration_ps
    return sorted(totals.items(), key=lambda item: (-sum(item[1].values()), item[0]))


def _shares(by_basis: dict[str, int]) -> dict[str, float]:
    """The share of a kind's time each basis gives, most first (all 0.0 when the kind takes no time)."""
    total = sum(by_basis.values())
    ranked = sorted(by_basis.items(), key=lambda item: (-item[1], item[0]))
    return {basis: ps / total if total else 0.0 for basis, ps in ranked}


def kind_rows(rows: tuple[OperatorStats, ...]) -> list[dict[str, Any]]:
    """The share of the operators' time each kind takes and where that time comes from, as JSON rows, most time
    first: ``basis`` is the kind's one basis, or ``mixed`` when its operators come from several (``bases`` gives
    each one's share of the kind's time)."""
    by_kind = _time_by_kind(rows)
    total = sum(sum(by_basis.values()) for _, by_basis in by_kind)
    return [
        {
            "kind": kind,
            "total_ns": ps_to_ns(sum(by_basis.values())),
            "share": sum(by_basis.values()) / total if total else 0.0,
            "basis": next(iter(by_basis)) if len(by_basis) == 1 else "mixed",
            "bases": _shares(by_basis),
        }
        for kind, by_basis in by_kind
    ]


def _basis_text(row: dict[str, Any]) -> str:
    """A kind's basis in words (``fitted to runs``), or each basis with its share of the kind's time."""
    if row["basis"] != "mixed":
        return row["basis"].replace("_", " ")
    return ", ".join(f"{basis.replace('_', ' ')} {share:.1%}" for basis, share in row["bases"].items())


def _tflops(row: OperatorStats) -> str:
    """Achieved TFLOP/s of one run (``-`` for an operator without FLOPs or time)."""
    return f"{row.flops / row.duration_ps:,.1f}" if row.flops and row.duration_ps else "-"


def _label(names: tuple[str, ...], device: str = "") -> str:
    """The first name, with how many others the same operator goes by (``qkv +2``) and the device it ran on when
    NPU groups run different devices (``qkv +2 @a100``), in 23 characters."""
    first = names[0] if names else "?"
    more = (f" +{len(names) - 1}" if len(names) > 1 else "") + (f" @{device}" if device else "")
    return first[: max(23 - len(more), 1)] + more


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
            f"  {_label(row.names, row.device):<24}{row.kind:<12}{shape[:23]:<24}{row.count:>8,}"
            f"{format_time_ps(row.duration_ps):>12}{share:>8.1%}{_tflops(row):>9}  {row.bound:<8}"
            f"{format_energy_pj(row.energy_pj):>12}"
        )
    if len(rows) > _MAX_ROWS:
        lines.append(f"  ... {len(rows) - _MAX_ROWS} more in report.json")
    shares = ", ".join(f"{row['kind']} {row['share']:.1%} ({_basis_text(row)})" for row in kind_rows(rows))
    lines.append(f"  time by kind: {shares}")
    return lines
