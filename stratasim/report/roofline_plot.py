"""Roofline plots: a device's compute ceilings and memory slopes, and where operators land under them.

:func:`roofline_chart` computes what to draw — one ceiling per distinct peak (dtypes sharing a peak share a
line), one slope per memory level with a known bandwidth (``dram``, and ``sram`` for a device with an on-chip
level), and one marker per operator and level at (FLOPs / level bytes, achieved FLOP/s). An operator with
traffic at several levels gets a marker per level at the same height, as in DFModel's hierarchical roofline
(one operational intensity per level; the level whose slope the marker sits on is the one that bounds it).
:func:`plot_roofline` draws the chart with matplotlib (the ``plot`` extra) as PNG or SVG by file extension.
``stratasim roofline`` (:func:`add_arguments`, :func:`run_from_args`) plots the operators of a report
(``--from-report``) and operators given on the command line (``--op gemm:M=4096,K=4096,N=4096``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratasim.compute_layer.device_presets import device

# The composition root may know the compute layer: the plot is of the roofline backend's devices.
from stratasim.compute_layer.devices import Device, calibrated
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.errors import InputError, StrataSimError
from stratasim.kernel.operators import dtype_name
from stratasim.kernel.safe_load import TABLE_BYTES, parse_json, read_text
from stratasim.system_layer.operators import OperatorPricer, PricingError
from stratasim.v1 import compute_pb2

__all__ = [
    "RooflinePoint",
    "Ceiling",
    "Slope",
    "Marker",
    "RooflineChart",
    "roofline_chart",
    "plot_roofline",
    "points_from_report",
    "run_from_args",
]

_PS_PER_SECOND = 10**12
_FORMATS = (".png", ".svg")


@dataclass(frozen=True)
class RooflinePoint:
    """One operator run: ``flops`` and ``bytes`` (its main-memory bytes) in ``duration_ps``; ``traffic`` gives
    the bytes at each memory level when known (``{"dram": ..., "sram": ...}``), else ``bytes`` counts as DRAM."""

    name: str
    flops: int
    bytes: int
    duration_ps: int
    traffic: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Ceiling:
    """A horizontal compute roof: ``flops_per_s`` (efficiency applied) of the dtypes in ``label``."""

    label: str
    flops_per_s: float


@dataclass(frozen=True)
class Slope:
    """A memory roof: attainable FLOP/s = intensity (FLOP/byte) × ``bytes_per_s`` of memory ``level``."""

    level: str
    bytes_per_s: float


@dataclass(frozen=True)
class Marker:
    """Where one operator lands against one memory level: FLOP/byte of that level and achieved FLOP/s."""

    name: str
    level: str
    intensity: float
    flops_per_s: float


@dataclass(frozen=True)
class RooflineChart:
    """Everything a roofline plot draws; ``skipped`` names points that cannot sit on log axes (no FLOPs or time)."""

    device: str
    ceilings: tuple[Ceiling, ...]
    slopes: tuple[Slope, ...]
    markers: tuple[Marker, ...]
    skipped: tuple[str, ...] = ()


def roofline_chart(
    dev: Device, points: Iterable[RooflinePoint], calibration: compute_pb2.Calibration | None = None
) -> RooflineChart:
    """The ceilings, slopes and markers of ``points`` on ``dev`` (calibrated if given), as the roofline prices it."""
    if calibration is not None:
        dev = calibrated(dev, calibration)
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in dev.peak_flops.items():
        by_peak.setdefault(peak * dev.compute_efficiency, []).append(dtype_name(dtype))
    ceilings = tuple(Ceiling("/".join(names), peak) for peak, names in sorted(by_peak.items(), reverse=True))
    slopes = [Slope("dram", dev.memory_bandwidth * dev.memory_efficiency)]
    if dev.sram is not None and dev.sram.bandwidth is not None:
        slopes.append(Slope("sram", dev.sram.bandwidth))
    markers: list[Marker] = []
    skipped: list[str] = []
    for point in points:
        if point.flops <= 0 or point.duration_ps <= 0:
            skipped.append(point.name)
            continue
        achieved = point.flops * _PS_PER_SECOND / point.duration_ps
        levels = dict(point.traffic) or {"dram": point.bytes}
        markers += [
            Marker(point.name, level, point.flops / size, achieved) for level, size in levels.items() if size > 0
        ]
    return RooflineChart(dev.name, ceilings, tuple(slopes), tuple(markers), tuple(skipped))


def _figure(chart: RooflineChart, title: str) -> Any:
    try:
        from matplotlib.figure import Figure  # the plot extra; Figure needs no pyplot global state
    except ImportError as exc:
        raise StrataSimError(f"plotting needs matplotlib ({exc}): pip install 'stratasim[plot]'") from None
    intensities = [m.intensity for m in chart.markers]
    ridges = [c.flops_per_s / s.bytes_per_s for c in chart.ceilings for s in chart.slopes]
    low, high = min(intensities + ridges) / 10, max(intensities + ridges) * 10
    figure = Figure(figsize=(8, 5.5), layout="constrained")
    axes = figure.subplots()
    axes.set(
        xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte of the level)", ylabel="FLOP/s", title=title
    )
    top = chart.ceilings[0].flops_per_s
    for slope in chart.slopes:
        ridge = top / slope.bytes_per_s
        axes.plot(
            [low, ridge],
            [low * slope.bytes_per_s, top],
            linestyle="--",
            label=f"{slope.level} {slope.bytes_per_s / 1e12:.3g} TB/s",
        )
    for ceiling in chart.ceilings:
        ridge = ceiling.flops_per_s / max(s.bytes_per_s for s in chart.slopes)
        axes.plot([ridge, high], [ceiling.flops_per_s] * 2, color="black", linewidth=1)
        axes.annotate(
            f"{ceiling.label} {ceiling.flops_per_s / 1e12:.4g} TFLOP/s",
            (high, ceiling.flops_per_s),
            ha="right",
            va="bottom",
            fontsize=8,
        )
    shapes = {"dram": "o", "sram": "^"}
    for level in sorted({m.level for m in chart.markers}):
        chosen = [m for m in chart.markers if m.level == level]
        axes.scatter(
            [m.intensity for m in chosen],
            [m.flops_per_s for m in chosen],
            marker=shapes.get(level, "s"),
            label=f"operators ({level} bytes)",
            zorder=3,
        )
    for name in dict.fromkeys(m.name for m in chart.markers):
        mine = sorted((m for m in chart.markers if m.name == name), key=lambda m: m.intensity)
        axes.plot([m.intensity for m in mine], [m.flops_per_s for m in mine], color="grey", linewidth=0.5)
        axes.annotate(
            name, (mine[0].intensity, mine[0].flops_per_s), fontsize=7, xytext=(3, -9), textcoords="offset points"
        )
    axes.set_xlim(low, high)
    axes.legend(fontsize=8, loc="lower right")
    return figure


def plot_roofline(
    dev: Device,
    points: Iterable[RooflinePoint],
    path: str | Path,
    calibration: compute_pb2.Calibration | None = None,
    title: str = "",
) -> RooflineChart:
    """Draw ``points`` on ``dev``'s roofline into ``path`` (``.png`` or ``.svg``) and return what was drawn."""
    target = Path(path)
    if target.suffix.lower() not in _FORMATS:
        raise StrataSimError(f"{target}: the plot is written as PNG or SVG; name it *.png or *.svg")
    chart = roofline_chart(dev, points, calibration)
    figure = _figure(chart, title or f"roofline of {chart.device}")
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, dpi=150)
    return chart


def _point(row: Any, index: int, source: str) -> RooflinePoint:
    if not isinstance(row, dict):
        raise StrataSimError(f"{source}: operators[{index}] is not an object")
    names = row.get("names") or row.get("name") or row.get("kind") or f"op{index}"
    names = [names] if isinstance(names, str) else names
    try:
        traffic = {str(level): int(size) for level, size in (row.get("traffic") or {}).items()}
        return RooflinePoint(
            ", ".join(map(str, names[:2])), int(row["flops"]), int(row["bytes"]), int(row["duration_ps"]), traffic
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StrataSimError(f"{source}: operators[{index}] lacks a number for {exc}") from None


def points_from_report(path: str | Path) -> list[RooflinePoint]:
    """The operators of a ``report.json`` written by ``stratasim run --out`` (its ``operators`` list)."""
    source = str(path)
    try:
        data = parse_json(read_text(path, TABLE_BYTES, "report"), source)
    except InputError as exc:
        raise StrataSimError(f"cannot read the report {exc}") from None
    rows = data.get("operators") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise StrataSimError(f"{source} has no 'operators' list; write it with a StrataSim that reports operators")
    return [_point(row, index, source) for index, row in enumerate(rows)]


def _op_point(spec: str, dev: Device, dtype: str, calibration: compute_pb2.Calibration | None) -> RooflinePoint:
    from stratasim.config.operator_text import operator_from

    kind, _, rest = spec.partition(":")
    given: dict[str, str] = {}
    for pair in filter(None, rest.split(",")):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise StrataSimError(f"--op {spec!r}: expected KIND:KEY=VALUE,... such as gemm:M=4096,K=4096,N=4096")
        given[key.strip().lower()] = value.strip()
    op = operator_from(kind.strip().lower(), given, given.pop("dtype", dtype))
    try:
        (cost,) = OperatorPricer(RooflineCompute([dev]), dev.name, calibration).costs([op])
    except PricingError as error:
        raise StrataSimError(f"--op {spec!r}: {error.reason}") from None
    traffic = {entry.level: entry.bytes for entry in cost.traffic}
    return RooflinePoint(spec, op.flops, op.bytes, cost.duration_ps, traffic)


def run_from_args(args: argparse.Namespace, dev: Device | None = None) -> int:
    """Plot what the arguments name and print where the plot went; 0 on success. ``dev``: the device to plot (one
    described in YAML, as the command line reads ``--device``); None: the preset ``args.device`` names."""
    dev = dev or device(args.device)
    calibration = compute_pb2.Calibration(
        compute_efficiency=args.compute_efficiency, memory_efficiency=args.memory_efficiency
    )
    try:
        calibrated(dev, calibration)  # checked once, before anything is priced
    except ValueError as exc:
        raise StrataSimError(f"calibration: {exc}") from None
    points: list[RooflinePoint] = points_from_report(args.report) if args.report else []
    points += [_op_point(spec, dev, args.dtype, calibration) for spec in args.op]
    if not points:
        raise StrataSimError("nothing to plot: give --from-report REPORT and/or --op KIND:KEY=VALUE,...")
    chart = plot_roofline(dev, points, args.output, calibration)
    skipped = f" ({len(chart.skipped)} without FLOPs or time left out)" if chart.skipped else ""
    print(f"wrote {args.output}: {len({m.name for m in chart.markers})} operators on {dev.name}{skipped}")
    return 0
