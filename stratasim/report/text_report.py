"""A report as a readable summary: the headline figures, then tables of collectives, NPUs, busiest links, the
cluster view (NPU utilisation, queueing per link level, the busiest link's load by job) and operators, each kept
short. Times come straight from the engine's picoseconds through
:func:`~stratasim.kernel.units.format_time_ps`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from stratasim.kernel.units import format_bytes, format_energy_pj, format_time_ps
from stratasim.report.cluster import cluster_view
from stratasim.report.jobs import job_lines
from stratasim.report.operator_table import operator_lines
from stratasim.report.serving_text import serving_lines
from stratasim.system_layer.collective_log import columns
from stratasim.system_layer.result import CollectiveStats, SimulationResult

if TYPE_CHECKING:
    from stratasim.report.contents import ReportContents

__all__ = ["report_text"]

_MAX_GROUP_ROWS = 20
_MAX_NPU_ROWS = 16
_MAX_LINK_ROWS = 8
_MAX_LEVEL_ROWS = 8
_MAX_LEVEL_JOBS = 4  # jobs named on a level's line; the JSON has them all


def _time(ps: float) -> str:
    """A time given in picoseconds (a mean may be fractional), to the nearest ps."""
    return format_time_ps(round(ps))


def report_text(report: ReportContents) -> str:
    """Headline figures, the jobs of a study of several, the collectives grouped (at most 20 groups), the NPUs,
    the busiest links and the operators."""
    engine = report.engine
    if engine is None:  # a request-level study: no tables
        return "\n".join(_headline(report))
    return "\n".join(
        [
            *_headline(report),
            *job_lines(report.jobs),
            "",
            *_collective_table(engine),
            "",
            *_npu_table(engine),
            *_link_table(report, engine),
            *_cluster_lines(report, engine),
            *operator_lines(engine.operators),
        ]
    )


def _headline(report: ReportContents) -> list[str]:
    result, engine = report.result, report.engine
    where = ", ".join(f"{layer} {label}" for layer, label in report.backends.items())
    count = len(engine.collectives) if engine else 0
    return [
        *(f"warning: {warning}" for warning in report.warnings),
        f"{report.name}: {result.npus} NPUs, {count} collective{'' if count == 1 else 's'}",
        f"  total time       {_time(result.total_time_ps)}  ({result.total_time_ps} ps)",
        *_samples_line(report),
        *(
            []
            if engine is None
            else [
                f"  compute time     {_compute_time(report)}  (NPU {report.critical_npu}, the last to finish)",
                f"  exposed comm     {_exposed_comm(report)}",
            ]
        ),
        *_training_lines(report),
        *serving_lines(report),
        *_memory_line(report),
        *_energy_line(report),
        f"  simulated in     {report.wall_seconds:.3f} s wall, {result.events_processed:,} events"
        + (f", {report.simulated_npus} NPUs standing for all" if 0 < report.simulated_npus < result.npus else ""),
        f"  backends         {where}",
        *([f"  calibration      {report.calibration}"] if report.calibration else []),
        *([f"  devices          {_devices(report.devices)}"] if report.devices else []),
        *_cost_line(report),
    ]


def _cost_line(report: ReportContents) -> list[str]:
    """The system's price and power and the throughput per dollar and per watt, when the study has economics."""
    cost = report.cost
    if cost is None:
        return []
    unit = cost["throughput_unit"]
    return [
        f"  system cost      ${cost['system_price_usd']:,.0f}, {cost['system_power_w'] / 1000:,.1f} kW: "
        f"{cost['perf_per_dollar']:.4g} {unit} per $, {cost['perf_per_watt']:.4g} {unit} per W"
    ]


def _samples_line(report: ReportContents) -> list[str]:
    """The Monte-Carlo step-time distribution, when the run drew samples (the total time above is sample 0's)."""
    samples = report.samples
    if samples is None:
        return []
    ps = 1000  # ps in a ns
    return [
        f"  samples          {samples['count']:,} from seed {samples['seed']}: p50 {_time(samples['p50_ns'] * ps)}, "
        f"p99 {_time(samples['p99_ns'] * ps)}, mean {_time(samples['mean_ns'] * ps)}, "
        f"slowest rank {samples['slowest_rank_share']:.1%} of the step (total time: the first sample)"
    ]


def _compute_time(report: ReportContents) -> str:
    critical = report.critical
    return _time(critical.compute_ps if critical else 0)


def _exposed_comm(report: ReportContents) -> str:
    """The critical NPU's exposed communication, split by what it waited on, most first."""
    critical = report.critical
    if critical is None:
        return _time(0)
    split = ""
    if critical.exposed_comm_ps_by_kind:
        parts = sorted(critical.exposed_comm_ps_by_kind, key=lambda item: -item[1])
        split = "  (" + ", ".join(f"{kind} {_time(ps)}" for kind, ps in parts) + ")"
    return _time(critical.exposed_comm_ps) + split


def _training_lines(report: ReportContents) -> list[str]:
    training = report.training
    if not training:
        return []
    lines = [
        f"  training         {training['samples_per_second']:,.1f} samples/s, "
        f"{training['tflops_per_npu']:,.1f} TFLOPS per NPU"
    ]
    bubble = training.get("pipeline_bubble_fraction")
    if bubble is not None:
        lines.append(f"  pipeline bubble  {bubble:.1%} of the iteration (mean over NPUs)")
    split = training.get("work_split")
    if split:
        lines.append(
            f"  work split       layers per stage {'/'.join(map(str, split['stage_layers']))}, micro-batches per "
            f"DP rank {'/'.join(map(str, split['micro_batches_per_dp_rank']))}"
        )
    dropped = training.get("moe_dropped_tokens")
    if dropped is not None:
        lines.append(
            f"  MoE drops        {dropped:,} token-expert assignments ({training['moe_dropped_fraction']:.2%}) at full experts"
        )
    memory = training.get("memory_per_npu_bytes")
    if memory:
        lines.append(f"  memory           up to {format_bytes(max(memory))} per NPU (NPU {memory.index(max(memory))})")
    cost = training.get("cost_usd_per_iteration")
    if cost is not None:
        lines.append(f"  cost             ${cost:,.6g} per iteration (every NPU rented at its device's hourly rate)")
    goodput = training.get("goodput")
    if goodput:
        lines.append(_goodput_line(goodput))
    return lines


def _steps(count: int) -> str:
    """``count`` steps, as a reader says it (``1 step``, ``1,024 steps``)."""
    return f"{count:,} step{'' if count == 1 else 's'}"


_PLURAL = {"npu": "NPUs", "switch": "switches"}
"""How the goodput line names many components of a kind, where adding an s would not do."""


def _goodput_line(goodput: dict[str, Any]) -> str:
    """The expected useful fraction of a long run, at the interval it checkpoints at (and the optimum's)."""
    parts = " and ".join(f"{count:,} {_PLURAL.get(kind, kind + 's')}" for kind, count in goodput["components"].items())
    best = (
        "the optimum"
        if goodput["interval_steps"] == goodput["optimal_interval_steps"]
        else f"the optimum {_steps(goodput['optimal_interval_steps'])} gives {goodput['optimal_goodput']:.2%}"
    )
    return (
        f"  goodput          {goodput['goodput']:.2%} checkpointing every {_steps(goodput['interval_steps'])} ({best}); "
        f"job MTBF {goodput['job_mtbf_s'] / 3600:.3g} h ({parts}), checkpoint {goodput['checkpoint_s']:.3g} s, "
        f"a failure loses {goodput['lost_work_per_failure_s']:.3g} s of work and a {goodput['restart_s']:.3g} s restart"
    )


def _memory_line(report: ReportContents) -> list[str]:
    peak = max(report.per_npu, key=lambda n: (n.peak_memory_bytes, -n.npu), default=None)
    if peak is None or not peak.peak_memory_bytes:
        return []
    parts = ", ".join(f"{kind} {format_bytes(size)}" for kind, size in peak.memory_at_peak)
    return [
        f"  peak memory      {format_bytes(peak.peak_memory_bytes)} (NPU {peak.npu} at "
        f"{_time(peak.peak_memory_ps)}: {parts})"
    ]


def _energy_line(report: ReportContents) -> list[str]:
    energy = report.compute_energy_pj
    lines = []
    top = max(report.per_npu, key=lambda n: (n.compute_energy_pj, -n.npu), default=None)
    if energy and top is None:
        lines.append(f"  compute energy   {format_energy_pj(energy)} in all, {report.power_w(energy):,.1f} W mean")
    elif energy and top is not None:
        lines.append(
            f"  compute energy   {format_energy_pj(energy)} in all, {report.power_w(energy):,.1f} W mean "
            f"(NPU {top.npu} the most: {format_energy_pj(top.compute_energy_pj)}, "
            f"{report.power_w(top.compute_energy_pj):,.1f} W)"
        )
    network = report.network_energy_pj
    if network is not None:
        lines.append(
            f"  network energy   {format_energy_pj(network)}, {report.power_w(network):,.1f} W mean; with "
            f"compute {format_energy_pj(energy + network)}, {report.power_w(energy + network):,.1f} W"
        )
    return lines


def _collective_table(engine: SimulationResult) -> list[str]:
    """The collectives grouped by kind, communicator and the dimensions their phases ran along, most time
    first: how many, their sizes, mean and summed duration and the mean delays per phase — then a legend."""
    templates, kinds, starts, ends = columns(engine.collectives)
    if not len(kinds):
        return ["collectives: none"]
    counts = np.bincount(kinds, minlength=len(templates))
    spans = np.bincount(kinds, weights=(ends - starts).astype(np.float64), minlength=len(templates))
    groups: dict[tuple[str, str, tuple[int, ...]], _Group] = {}
    for template, (count, span) in enumerate(zip(counts.tolist(), spans.tolist())):
        if count:
            stats = templates[template]
            key = (stats.type, stats.communicator or "-", stats.phase_dims)
            groups.setdefault(key, _Group()).add(stats, count, span)
    head = f"{'kind':<16}{'communicator':<14}{'count':>9}{'bytes each':>22}{'mean':>13}{'total':>13}"
    lines = [f"collectives ({len(kinds):,} in all, grouped; most time first)", f"  {head}  per phase: queue / network"]
    for (kind, communicator, _), group in sorted(groups.items(), key=lambda item: -item[1].span_ps)[:_MAX_GROUP_ROWS]:
        phases = ", ".join(
            f"{_time(q / group.count)} / {_time(n / group.count)}" for q, n in zip(group.queue, group.network)
        )
        lines.append(
            f"  {kind:<16}{communicator:<14}{group.count:>9,}{group.sizes():>22}"
            f"{_time(group.span_ps / group.count):>13}{_time(group.span_ps):>13}  {phases}"
        )
    if len(groups) > _MAX_GROUP_ROWS:
        lines.append(f"  ... {len(groups) - _MAX_GROUP_ROWS} more groups in report.json's collectives")
    lines.append(
        "  mean: start to end of one; per phase, the mean over its chunks of queue: waiting for the phase's "
        "turn, network: running it"
    )
    return lines


class _Group:
    """Collectives of one kind, communicator and phase layout, summed: count, time, sizes, delays per phase."""

    def __init__(self) -> None:
        self.count = 0
        self.span_ps = 0.0
        self.smallest: int | None = None
        self.largest = 0
        self.queue: list[float] = []
        self.network: list[float] = []

    def add(self, stats: CollectiveStats, count: int, span_ps: float) -> None:
        self.count += count
        self.span_ps += span_ps
        self.smallest = stats.bytes if self.smallest is None else min(self.smallest, stats.bytes)
        self.largest = max(self.largest, stats.bytes)
        phases = len(stats.queue_delay_ps_per_phase)
        self.queue += [0.0] * (phases - len(self.queue))
        self.network += [0.0] * (phases - len(self.network))
        for phase, (queue, network) in enumerate(zip(stats.queue_delay_ps_per_phase, stats.network_delay_ps_per_phase)):
            self.queue[phase] += queue * count
            self.network[phase] += network * count

    def sizes(self) -> str:
        """One size, or the smallest to the largest."""
        if self.smallest is None or self.smallest == self.largest:
            return format_bytes(self.largest)
        return f"{format_bytes(self.smallest)}–{format_bytes(self.largest)}"


def _npu_table(engine: SimulationResult) -> list[str]:
    """One row per NPU, or their min, mean and max when there are many; the time wait nodes kept NPUs idle when
    any did."""
    per_npu = engine.per_npu
    columns: tuple[str, ...] = ("finish_ps", "compute_ps", "comm_ps", "exposed_comm_ps")
    titles: tuple[str, ...] = ("finish", "compute", "comm", "exposed comm")
    if any(n.waiting_ps for n in per_npu):
        columns, titles = (*columns, "waiting_ps"), (*titles, "waiting")
    if len(per_npu) <= _MAX_NPU_ROWS:
        lines = ["per NPU", "  " + f"{'npu':>5}" + "".join(f"{t:>14}" for t in titles)]
        for n in per_npu:
            lines.append("  " + f"{n.npu:>5}" + "".join(f"{_time(getattr(n, c)):>14}" for c in columns))
        return lines
    lines = [f"per NPU ({len(per_npu)} NPUs)", f"  {'':<14}{'min':>14}{'mean':>14}{'max':>14}"]
    for column, title in zip(columns, titles):
        values = [getattr(n, column) for n in per_npu]
        stats = (min(values), sum(values) / len(values), max(values))
        lines.append(f"  {title:<14}" + "".join(f"{_time(v):>14}" for v in stats))
    return lines


def _link_table(report: ReportContents, engine: SimulationResult) -> list[str]:
    """The busiest links, then how long packets took (from networks that cut messages into packets)."""
    links = engine.links
    if not links:
        return []
    busiest = sorted(links, key=lambda link: (-report.utilisation(link), link.link))[:_MAX_LINK_ROWS]
    lines = [
        "",
        f"busiest links (of {len(links)} that carried traffic)",
        f"  {'link':<28}{'busy':>14}{'utilisation':>13}{'bytes':>14}{'messages':>10}",
    ]
    for link in busiest:
        lines.append(
            f"  {link.link:<28}{_time(link.busy_ps):>14}{report.utilisation(link):>12.1%}"
            f"{format_bytes(link.bytes):>14}{link.messages:>10,}"
        )
    latency = engine.packet_latency
    if latency.packets:
        lines.append(
            f"packet latency over {latency.packets:,} packets: mean {_time(latency.mean_ps)}, "
            f"p50 {_time(latency.p50_ps)}, p99 {_time(latency.p99_ps)}, max {_time(latency.max_ps)}"
        )
    return lines


def _cluster_lines(report: ReportContents, engine: SimulationResult) -> list[str]:
    """The cluster view in a few lines: NPU utilisation, each link level's bytes and mean wait for a link per message
    (and the same for the first jobs, by name), and in a study of several jobs the most loaded link's bytes per job."""
    view = cluster_view(engine, report.torus_shape)
    if view is None:
        return []
    names = [job.name for job in report.jobs]

    def job(index: int) -> str:
        return names[index] if index < len(names) else f"job {index}"

    active = round(view.active_npu_share * engine.npus)
    lines = [
        "",
        f"cluster: NPUs computing {view.npu_utilisation:.1%} of NPU-time, {active} of {engine.npus} NPUs busy at all",
        "  by link level: bytes, mean wait for a link per message"
        + ("" if view.queue_measured else " (not measured by this network)"),
    ]
    for level in view.levels[:_MAX_LEVEL_ROWS]:
        wait = _time(level.mean_queue_ps) if view.queue_measured else "-"
        parts = [
            f"{job(index)} {format_bytes(size)}" + (f" {_time(queue / messages)}" if view.queue_measured else "")
            for index, size, messages, queue in level.by_job
            if messages
        ]
        more = len(parts) - _MAX_LEVEL_JOBS
        jobs = ", ".join(parts[:_MAX_LEVEL_JOBS]) + (f", {more} more" if more > 0 else "")
        lines.append(
            f"    {level.level:<24}{level.links:>5} links{format_bytes(level.bytes):>12}{wait:>14}"
            + (f"  ({jobs})" if jobs else "")
        )
    if view.jobs:
        top = view.busiest[0]
        split = ", ".join(f"{job(index)} {format_bytes(size)}" for index, size in top.bytes_by_job)
        lines.append(f"  most loaded link {top.link}: {format_bytes(top.bytes)} ({split})")
    return lines


def _devices(devices: dict[str, int]) -> str:
    """How many NPUs run each device: ``h100 x12, a100 x4``."""
    return ", ".join(f"{name} x{count}" for name, count in devices.items())
