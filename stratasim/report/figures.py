"""The pictures ``stratasim run --out`` draws next to ``report.json``, from the report's own numbers.

``time_breakdown.png``: each NPU's time — compute, communication left exposed split by what it waited on (a
communicator such as ``tp``/``dp``, else ``collective``/``p2p``) and idle after it finished until the last NPU
did. NPUs with identical rows share a bar (labelled with their id ranges); when more than :data:`MAX_BARS`
distinct rows remain, the NPUs are cut into that many runs of consecutive ids, each drawn as its mean.
``collective_delays.png``: the mean queue and network delay per chunk of each phase, collectives aggregated by
kind and phase (what the phase ran, along which dimension) and weighted by how many ran.
``link_utilisation.png`` (networks that model links): how many links were busy what share of the run, and the
busiest links by name. ``timeline.png`` (runs that recorded a trace): when the first :data:`TIMELINE_NPUS` NPUs
the trace shows were computing and communicating, spans closer than a pixel drawn as one. matplotlib (the ``plot`` extra) draws them with its Agg renderer, without pyplot's global state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stratasim.kernel.errors import StrataSimError
from stratasim.system_layer.collective_log import columns
from stratasim.system_layer.result import NpuStats, SimulationResult
from stratasim.system_layer.trace import WAITING_TRACK, SpanLog

if TYPE_CHECKING:
    from stratasim.report.contents import ReportContents

__all__ = ["PlottingUnavailable", "MAX_BARS", "TIMELINE_NPUS", "write_figures", "busy_stretches"]

MAX_BARS = 48  # bars per picture: beyond these, rows are aggregated (NPUs) or the largest kept (phases, links)
_INSTALL = "pip install 'stratasim[plot]'"
TIMELINE_NPUS = 8  # NPUs the timeline shows: the first the trace holds (with --trace-npus, those chosen)
_PIXELS = 1800  # the timeline's resolution: spans closer than total time / this are drawn as one


class PlottingUnavailable(StrataSimError):
    """matplotlib is not installed, so no picture was drawn (the report itself is unaffected)."""


def write_figures(report: ReportContents, out_dir: str | Path) -> tuple[Path, ...]:
    """Draw the report's pictures as PNG files into ``out_dir`` (created if missing); the paths written.
    Raises :class:`PlottingUnavailable` without matplotlib."""
    try:
        from matplotlib.figure import Figure  # Figure needs no pyplot global state; PNGs are drawn by Agg
    except ImportError:
        raise PlottingUnavailable(f"the pictures need matplotlib: {_INSTALL}") from None
    out = Path(out_dir)
    result = report.engine
    charts = [("time_breakdown", _time_breakdown(report.name, result, Figure))] if result and result.per_npu else []
    if report.serving_timeline:
        charts.append(("serving_timeline", _serving_timeline(report.name, report.serving_timeline, Figure)))
    if result and len(result.collectives):
        charts.append(("collective_delays", _collective_delays(report.name, result, Figure)))
    if result and result.links:
        charts.append(("link_utilisation", _link_utilisation(report, result, Figure)))
    if result and len(result.spans):
        charts.append(("timeline", _timeline(report.name, result, Figure)))
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, figure in charts:
            path = out / f"{name}.png"
            figure.savefig(path, dpi=100, format="png")
            written.append(path)
    except OSError as exc:
        raise StrataSimError(f"cannot write the pictures to {out}: {exc.strerror or exc}") from None
    return tuple(written)


def _serving_timeline(title: str, timeline: dict[str, list[float]], figure_type: Any) -> Any:
    """A serving study's batch size, queue length and KV blocks in use over time, summed over replicas."""
    figure = figure_type(figsize=(9, 6.5), layout="constrained")
    seconds = np.array(timeline["time_ns"]) / 1e9
    rows = (
        ("batch_size", "sequences batched"),
        ("queue_length", "requests queued"),
        ("kv_blocks_used", "KV blocks used"),
    )
    axes = figure.subplots(len(rows), 1, sharex=True)
    for axis, (key, label) in zip(axes, rows):
        axis.step(seconds, timeline[key], where="post")
        axis.set_ylabel(label)
    axes[0].set_title(f"{title}: serving over time (all replicas)")
    axes[-1].set_xlabel("simulated time (s)")
    return figure


def _unit(largest_ns: float) -> tuple[float, str]:
    """A divisor and its unit name so that ``largest_ns`` reads as a number below a thousand or so."""
    for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if largest_ns >= scale:
            return scale, name
    return 1.0, "ns"


def _ranges(ids: Iterable[int]) -> str:
    """``0-7, 16-23`` for those ids; long lists cut after a few ranges, with how many NPUs in all."""
    ordered = sorted(ids)
    runs: list[list[int]] = []
    for npu in ordered:
        if runs and runs[-1][1] == npu - 1:
            runs[-1][1] = npu
        else:
            runs.append([npu, npu])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:3])
    return f"{text}, … ({len(ordered)} NPUs)" if len(runs) > 3 else text


def _npu_row(stats: NpuStats, total_ps: int, kinds: Sequence[str]) -> tuple[int, ...]:
    """Compute, exposed communication per kind (in ``kinds`` order), waiting (wait nodes) and idle, in ps."""
    by_kind = dict(stats.exposed_comm_ps_by_kind)
    # Exposed time no kind claimed (engines that do not split it) is shown as plain communication.
    unsplit = stats.exposed_comm_ps - sum(by_kind.values())
    parts = [by_kind.get(kind, 0) + (unsplit if kind == "collective" else 0) for kind in kinds]
    return (stats.compute_ps, *parts, stats.waiting_ps, max(total_ps - stats.finish_ps, 0))


def _npu_bars(result: SimulationResult, kinds: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Bar labels and their rows (ps): NPUs grouped by identical rows, else means of runs of consecutive ids."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for stats in result.per_npu:
        groups.setdefault(_npu_row(stats, result.total_time_ps, kinds), []).append(stats.npu)
    if len(groups) <= MAX_BARS:
        ordered = sorted(groups.items(), key=lambda item: min(item[1]))
        return [f"NPU {_ranges(ids)}" for _, ids in ordered], np.array([row for row, _ in ordered], dtype=float)
    stats_by_id = sorted(result.per_npu, key=lambda s: s.npu)
    rows = np.array([_npu_row(s, result.total_time_ps, kinds) for s in stats_by_id], dtype=float)
    parts = np.array_split(np.arange(len(stats_by_id)), MAX_BARS)
    labels = [f"mean of NPU {stats_by_id[p[0]].npu}-{stats_by_id[p[-1]].npu}" for p in parts]
    return labels, np.array([rows[p].mean(axis=0) for p in parts])


def _time_breakdown(title: str, result: SimulationResult, figure_type: Any) -> Any:
    """Stacked horizontal bars: compute, exposed communication by kind, waiting, idle."""
    kinds = sorted({kind for stats in result.per_npu for kind, _ in stats.exposed_comm_ps_by_kind} | {"collective"})
    labels, rows = _npu_bars(result, kinds)
    names = ["compute", *(f"exposed {kind}" for kind in kinds), "waiting", "idle"]
    keep = [i for i in range(len(names)) if rows[:, i].any()] or [0]
    scale, unit = _unit(result.total_time_ps / 1000)
    figure = figure_type(figsize=(9, 1.5 + 0.3 * len(labels)), layout="constrained")
    axes = figure.subplots()
    left = np.zeros(len(labels))
    colours = {"compute": "C2", "waiting": "silver", "idle": "lightgrey"}
    for number, i in enumerate(keep):
        width = rows[:, i] / 1000 / scale
        axes.barh(labels, width, left=left, label=names[i], color=colours.get(names[i], f"C{(number + 3) % 10}"))
        left += width
    axes.invert_yaxis()
    axes.set(xlabel=f"time ({unit})", title=f"{title}: where each NPU's time went")
    axes.tick_params(axis="y", labelsize=8)
    _legend(axes)
    return figure


def _legend(axes: Any) -> None:
    """The legend right of the bars, where it hides none of them."""
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _phase_delays(result: SimulationResult) -> dict[str, tuple[float, float, int]]:
    """Per kind and phase, the mean queue and network delay per chunk (ps, weighted by collectives) and how
    many collectives ran it; computed on each distinct collective once (a model runs hundreds of thousands)."""
    table = columns(result.collectives)
    counts = np.bincount(table.kind, minlength=len(table.templates)).tolist()
    sums: dict[str, list[float]] = {}
    for stats, count in zip(table.templates, counts):
        for phase, (queue, network) in enumerate(zip(stats.queue_delay_ps_per_phase, stats.network_delay_ps_per_phase)):
            what = stats.phase_collectives[phase] if phase < len(stats.phase_collectives) else ""
            dim = stats.phase_dims[phase] if phase < len(stats.phase_dims) else None
            where = "" if dim is None else (" flat" if dim < 0 else f" dim {dim}")
            key = f"{stats.type} ×{stats.group_size} · phase {phase}: {what}{where}".replace(":  ", ": ")
            entry = sums.setdefault(key, [0.0, 0.0, 0])
            entry[0] += queue * count
            entry[1] += network * count
            entry[2] += count
    return {key: (q / n, w / n, int(n)) for key, (q, w, n) in sums.items() if n}


def _collective_delays(title: str, result: SimulationResult, figure_type: Any) -> Any:
    """Stacked horizontal bars per kind and phase: mean queue delay, then mean network delay, per chunk."""
    delays = _phase_delays(result)
    shown = sorted(delays, key=lambda key: -(delays[key][0] + delays[key][1]))[:MAX_BARS]
    shown.sort()
    queue = np.array([delays[key][0] for key in shown]) / 1000
    network = np.array([delays[key][1] for key in shown]) / 1000
    scale, unit = _unit(float((queue + network).max(initial=0.0)))
    figure = figure_type(figsize=(9, 1.5 + 0.3 * len(shown)), layout="constrained")
    axes = figure.subplots()
    labels = [f"{key} (n={delays[key][2]})" for key in shown]
    axes.barh(labels, queue / scale, label="queue delay", color="C1")
    axes.barh(labels, network / scale, left=queue / scale, label="network delay", color="C0")
    axes.invert_yaxis()
    cut = f" (the {MAX_BARS} largest of {len(delays)})" if len(delays) > len(shown) else ""
    axes.set(xlabel=f"mean per chunk ({unit})", title=f"{title}: collective delay per phase{cut}")
    axes.tick_params(axis="y", labelsize=8)
    for y, total in enumerate((queue + network) / scale):  # a short bar beside a long one still reads
        axes.annotate(f"{total:.3g}", (total, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    _legend(axes)
    return figure


def _link_utilisation(report: ReportContents, result: SimulationResult, figure_type: Any) -> Any:
    """A histogram of the links' utilisation beside the busiest links by name."""
    links = result.links
    shares = np.array([report.utilisation(link) for link in links]) * 100
    figure = figure_type(figsize=(11, 5), layout="constrained")
    spread, busiest = figure.subplots(1, 2, width_ratios=(1, 1.3))
    spread.hist(shares, bins=20, range=(0, max(100.0, float(shares.max()))), color="C0")
    spread.set(xlabel="utilisation (% of the run)", ylabel="links", title=f"{len(links)} links")
    top = sorted(range(len(links)), key=lambda i: -shares[i])[:20]
    busiest.barh([links[i].link for i in top], shares[top], color="C3")
    busiest.invert_yaxis()
    busiest.tick_params(axis="y", labelsize=7)
    busiest.set(xlabel="utilisation (% of the run)", title="busiest links")
    figure.suptitle(f"{report.name}: link utilisation")
    return figure


def busy_stretches(starts: np.ndarray, ends: np.ndarray, gap_ps: float) -> list[tuple[int, int]]:
    """The spans ``[starts[i], ends[i]]`` merged where they overlap or lie less than ``gap_ps`` apart, as
    ``(start, length)`` pairs in time order: what a timeline can draw at its resolution."""
    if not len(starts):
        return []
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    breaks = np.flatnonzero(starts[1:] > reach[:-1] + gap_ps) + 1
    firsts = np.concatenate(([0], breaks))
    lasts = np.concatenate((breaks - 1, [len(starts) - 1]))
    return [(int(starts[a]), int(reach[b] - starts[a])) for a, b in zip(firsts.tolist(), lasts.tolist())]


def _span_columns(result: SimulationResult) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The trace's busy spans as columns: NPU, whether on the compute track, start and end (ps), wait nodes' spans
    (the ``waiting`` track: not busy) left out; a span log's own columns when the result holds one (a whole model
    traced node by node has a million spans)."""
    spans = result.spans
    if isinstance(spans, SpanLog):
        compute_ids = [i for i, track in enumerate(spans.tracks) if track == "compute"]
        track = np.frombuffer(spans.track, dtype=np.int32)
        busy = ~np.isin(track, [i for i, name in enumerate(spans.tracks) if name == WAITING_TRACK])
        return (
            np.frombuffer(spans.npu, dtype=np.int32)[busy],
            np.isin(track, compute_ids)[busy],
            np.frombuffer(spans.start_ps, dtype=np.int64)[busy],
            np.frombuffer(spans.end_ps, dtype=np.int64)[busy],
        )
    rows = [
        (span.npu, span.track == "compute", span.start_ps, span.end_ps) for span in spans if span.track != WAITING_TRACK
    ]
    npus, compute, starts, ends = zip(*rows)
    return np.array(npus), np.array(compute), np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _timeline(title: str, result: SimulationResult, figure_type: Any) -> Any:
    """Per NPU shown, a compute lane and a communication lane (every other track), busy stretches as bars."""
    npus, compute, starts, ends = _span_columns(result)
    shown = sorted(set(npus.tolist()))[:TIMELINE_NPUS]
    scale, unit = _unit(result.total_time_ps / 1000)
    gap = result.total_time_ps / _PIXELS
    figure = figure_type(figsize=(11, 1.2 + 0.55 * len(shown)), layout="constrained")
    axes = figure.subplots()
    labels = []
    for row, npu in enumerate(shown):
        mine = npus == npu
        for lane, (name, colour, on) in enumerate((("compute", "C2", compute), ("communication", "C0", ~compute))):
            chosen = mine & on
            stretches = busy_stretches(starts[chosen], ends[chosen], gap)
            y = 2 * row + lane
            axes.broken_barh(
                [(a / 1000 / scale, n / 1000 / scale) for a, n in stretches],
                (y - 0.4, 0.8),
                color=colour,
                label=name if row == 0 else None,
            )
            labels.append(f"NPU {npu} {name}")
    axes.set_yticks(range(len(labels)), labels, fontsize=7)
    axes.invert_yaxis()
    more = (
        f" (the first {len(shown)} of {len(set(npus.tolist()))} traced)" if len(set(npus.tolist())) > len(shown) else ""
    )
    axes.set(xlabel=f"time ({unit})", title=f"{title}: timeline{more}")
    _legend(axes)
    return figure
