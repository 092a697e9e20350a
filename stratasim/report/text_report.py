"""A report as a readable summary: the headline figures, then tables of collectives, NPUs, busiest links and
operators, each kept short. Times come straight from the engine's picoseconds through
:func:`~stratasim.kernel.units.format_time_ps`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.units import format_bytes, format_energy_pj, format_time_ps
from stratasim.report.operator_table import operator_lines

if TYPE_CHECKING:
    from stratasim.report.report import Report

__all__ = ["report_text"]

_MAX_COLLECTIVE_ROWS = 20
_MAX_NPU_ROWS = 16
_MAX_LINK_ROWS = 8


def _time(ps: float) -> str:
    """A time given in picoseconds (a mean may be fractional), to the nearest ps."""
    return format_time_ps(round(ps))


def report_text(report: Report) -> str:
    """Headline figures, the collectives (at most 20 rows), the NPUs, the busiest links and the operators."""
    return "\n".join([*_headline(report), "", *_collective_table(report), "", *_npu_table(report),
                      *_link_table(report), *operator_lines(report.result.operators)])  # fmt: skip


def _headline(report: Report) -> list[str]:
    result = report.result
    where = ", ".join(f"{layer} {label}" for layer, label in report.backends.items())
    count = len(result.collectives)
    return [
        *(f"warning: {warning}" for warning in report.warnings),
        f"{report.name}: {result.npus} NPUs, {count} collective{'' if count == 1 else 's'}",
        f"  total time       {_time(result.total_time_ps)}  ({result.total_time_ps} ps)",
        f"  compute time     {_compute_time(report)}  (NPU {report.critical_npu}, the last to finish)",
        f"  exposed comm     {_exposed_comm(report)}",
        *_training_lines(report),
        *_serving_lines(report),
        *_memory_line(report),
        *_energy_line(report),
        f"  simulated in     {report.wall_seconds:.3f} s wall, {result.events_processed:,} events"
        + (f", {result.simulated_npus} NPUs standing for all" if 0 < result.simulated_npus < result.npus else ""),
        f"  backends         {where}",
    ]


def _compute_time(report: Report) -> str:
    critical = report.critical
    return _time(critical.compute_ps if critical else 0)


def _exposed_comm(report: Report) -> str:
    """The critical NPU's exposed communication, split by what it waited on, most first."""
    critical = report.critical
    if critical is None:
        return _time(0)
    split = ""
    if critical.exposed_comm_ps_by_kind:
        parts = sorted(critical.exposed_comm_ps_by_kind, key=lambda item: -item[1])
        split = "  (" + ", ".join(f"{kind} {_time(ps)}" for kind, ps in parts) + ")"
    return _time(critical.exposed_comm_ps) + split


def _training_lines(report: Report) -> list[str]:
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
    memory = training.get("memory_per_npu_bytes")
    if memory:
        lines.append(f"  memory           up to {format_bytes(max(memory))} per NPU (NPU {memory.index(max(memory))})")
    cost = training.get("cost_usd_per_iteration")
    if cost is not None:
        lines.append(f"  cost             ${cost:,.6g} per iteration (every NPU rented at the device's hourly rate)")
    return lines


def _serving_lines(report: Report) -> list[str]:
    """TTFT and TPOT, which the inference workload gives in nanoseconds."""
    serving = report.serving
    if not serving:
        return []
    line = (f"  serving          TTFT {_time(serving['ttft_ps'])}, TPOT {_time(serving['tpot_ps'])}, "
            f"{serving['tokens_per_second']:,.1f} tokens/s")  # fmt: skip
    energy = report.energy_per_token_pj
    if energy:
        line += f", {format_energy_pj(energy)} per token"
    cost = serving.get("cost_usd_per_million_tokens")
    if cost is not None:
        line += f", ${cost:,.4g} per million tokens"
    return [line]


def _memory_line(report: Report) -> list[str]:
    peak = max(report.result.per_npu, key=lambda n: (n.peak_memory_bytes, -n.npu), default=None)
    if peak is None or not peak.peak_memory_bytes:
        return []
    parts = ", ".join(f"{kind} {format_bytes(size)}" for kind, size in peak.memory_at_peak)
    return [f"  peak memory      {format_bytes(peak.peak_memory_bytes)} (NPU {peak.npu} at "
            f"{_time(peak.peak_memory_ps)}: {parts})"]  # fmt: skip


def _energy_line(report: Report) -> list[str]:
    energy = report.compute_energy_pj
    lines = []
    if energy:
        top = max(report.result.per_npu, key=lambda n: (n.compute_energy_pj, -n.npu))
        lines.append(f"  compute energy   {format_energy_pj(energy)} in all, {report.power_w(energy):,.1f} W mean "
                     f"(NPU {top.npu} the most: {format_energy_pj(top.compute_energy_pj)}, "
                     f"{report.power_w(top.compute_energy_pj):,.1f} W)")  # fmt: skip
    network = report.network_energy_pj
    if network is not None:
        lines.append(f"  network energy   {format_energy_pj(network)}, {report.power_w(network):,.1f} W mean; with "
                     f"compute {format_energy_pj(energy + network)}, {report.power_w(energy + network):,.1f} W")  # fmt: skip
    return lines


def _collective_table(report: Report) -> list[str]:
    collectives = report.result.collectives
    if not collectives:
        return ["collectives: none"]
    head = f"{'id':>5}  {'type':<14} {'bytes':>10} {'group':>6} {'start':>12} {'end':>12}"
    lines = ["collectives", f"  {head}  per phase: queue / network"]
    for c in collectives[:_MAX_COLLECTIVE_ROWS]:
        phases = ", ".join(
            f"{_time(q)} / {_time(n)}" for q, n in zip(c.queue_delay_ps_per_phase, c.network_delay_ps_per_phase)
        )
        lines.append(
            f"  {c.collective_id:>5}  {c.type:<14} {format_bytes(c.bytes):>10} {c.group_size:>6} "
            f"{_time(c.start_ps):>12} {_time(c.end_ps):>12}  {phases}"
        )
    if len(collectives) > _MAX_COLLECTIVE_ROWS:
        lines.append(f"  ... {len(collectives) - _MAX_COLLECTIVE_ROWS} more")
    return lines


def _npu_table(report: Report) -> list[str]:
    """One row per NPU, or their min, mean and max when there are many."""
    per_npu = report.result.per_npu
    columns = ("finish_ps", "compute_ps", "comm_ps", "exposed_comm_ps")
    titles = ("finish", "compute", "comm", "exposed comm")
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


def _link_table(report: Report) -> list[str]:
    """The busiest links, then how long packets took (from networks that cut messages into packets)."""
    links = report.result.links
    if not links:
        return []
    busiest = sorted(links, key=lambda link: (-report.utilisation(link), link.link))[:_MAX_LINK_ROWS]
    lines = ["", f"busiest links (of {len(links)} that carried traffic)",
             f"  {'link':<28}{'busy':>14}{'utilisation':>13}{'bytes':>14}{'messages':>10}"]  # fmt: skip
    for link in busiest:
        lines.append(
            f"  {link.link:<28}{_time(link.busy_ps):>14}{report.utilisation(link):>12.1%}"
            f"{format_bytes(link.bytes):>14}{link.messages:>10,}"
        )
    latency = report.result.packet_latency
    if latency.packets:
        lines.append(
            f"packet latency over {latency.packets:,} packets: mean {_time(latency.mean_ps)}, "
            f"p50 {_time(latency.p50_ps)}, p99 {_time(latency.p99_ps)}, max {_time(latency.max_ps)}"
        )
    return lines
