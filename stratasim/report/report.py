"""What a study produced, for people (:meth:`Report.to_text`) and for tools (:meth:`Report.to_dict`, files).

The JSON field names are a contract tools rely on: ``total_time_ps``, ``total_time_ns``, ``compute_time_ns``,
``exposed_comm_ns``, ``npus``, ``collectives`` (each with ``type``, ``bytes``, ``start_ns``, ``end_ns``,
``queue_delay_ns_per_phase``, ``network_delay_ns_per_phase``), ``per_npu``, ``wall_seconds``,
``events_processed``, ``operators`` (see :mod:`stratasim.report.operator_table`); from networks that model links
``links``, and from those that cut messages into packets ``packet_latency`` (``packets``, ``mean_ns``,
``min_ns``, ``p50_ns``, ``p99_ns``, ``max_ns``). Every ``*_ns`` value is the engine's integer picoseconds
divided by 1000.

Energy is what the compute backend says its operators take: ``compute_energy_pj`` (picojoules) per NPU and
summed over the study, and ``compute_power_w`` (watts), that energy over the study's total time — the mean
power of the compute, per NPU or of all NPUs together (1 pJ per ps is 1 W). Both are 0 without priced operators.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stratasim.report.chrome_trace import chrome_trace
from stratasim.kernel.errors import StrataSimError
from stratasim.report.operator_table import OperatorSummary, operator_lines
from stratasim.kernel.units import format_bytes, format_energy_pj, format_time_ps
from stratasim.system_layer.result import (
    CollectiveStats,
    CounterSample,
    LinkBusy,
    LinkStats,
    NpuStats,
    PacketLatencyStats,
    SimulationResult,
    TraceSpan,
)

__all__ = ["CollectiveSummary", "NpuSummary", "PacketLatencySummary", "Report"]

_MAX_COLLECTIVE_ROWS = 20
_MAX_NPU_ROWS = 16
_MAX_LINK_ROWS = 8


def _ns(ps: int) -> float:
    return ps / 1000


def _time(ns: float) -> str:
    return format_time_ps(round(ns * 1000))


@dataclass(frozen=True)
class CollectiveSummary:
    """One collective; per-phase delays are means over the group's chunks (see ``CollectiveStats``)."""

    id: int
    type: str
    bytes: int
    group_size: int
    start_ns: float
    end_ns: float
    queue_delay_ns_per_phase: tuple[float, ...]
    network_delay_ns_per_phase: tuple[float, ...]
    phase_dims: tuple[int, ...]
    phase_collectives: tuple[str, ...]
    queue_delay_ns_per_chunk: tuple[tuple[float, ...], ...]
    network_delay_ns_per_chunk: tuple[tuple[float, ...], ...]

    @classmethod
    def of(cls, stats: CollectiveStats) -> CollectiveSummary:
        return cls(
            stats.collective_id,
            stats.type,
            stats.bytes,
            stats.group_size,
            _ns(stats.start_ps),
            _ns(stats.end_ps),
            tuple(_ns(ps) for ps in stats.queue_delay_ps_per_phase),
            tuple(_ns(ps) for ps in stats.network_delay_ps_per_phase),
            stats.phase_dims,
            stats.phase_collectives,
            tuple(tuple(_ns(ps) for ps in chunk) for chunk in stats.queue_delay_ps_per_chunk),
            tuple(tuple(_ns(ps) for ps in chunk) for chunk in stats.network_delay_ps_per_chunk),
        )


@dataclass(frozen=True)
class NpuSummary:
    """One NPU: when it finished, its busy compute and communication time, communication left exposed (and
    split by what it waited on: a communicator name such as ``tp``/``dp``/``pp``, else ``collective``/``p2p``),
    the collective bytes it sent along each dimension (key ``"flat"``: phases over groups that are not a
    product of dimensions), and the most memory it held, when, and of what."""

    npu: int
    finish_ns: float
    compute_ns: float
    comm_ns: float
    exposed_comm_ns: float
    bytes_sent_per_dim: dict[str, int]
    exposed_comm_ns_by_kind: dict[str, float] = field(default_factory=dict)
    peak_memory_bytes: int = 0
    peak_memory_ns: float = 0.0
    memory_at_peak: dict[str, int] = field(default_factory=dict)
    compute_energy_pj: float = 0.0
    compute_power_w: float = 0.0

    @classmethod
    def of(cls, stats: NpuStats, total_ps: int = 0) -> NpuSummary:
        sent = {("flat" if dim < 0 else str(dim)): size for dim, size in stats.bytes_sent_per_dim}
        return cls(
            stats.npu, _ns(stats.finish_ps), _ns(stats.compute_ps), _ns(stats.comm_ps), _ns(stats.exposed_comm_ps),
            sent, {kind: _ns(ps) for kind, ps in stats.exposed_comm_ps_by_kind}, stats.peak_memory_bytes,
            _ns(stats.peak_memory_ps), dict(stats.memory_at_peak), stats.compute_energy_pj,
            _watts(stats.compute_energy_pj, total_ps),
        )


def _watts(energy_pj: float, time_ps: int) -> float:
    """Mean power in watts of ``energy_pj`` picojoules over ``time_ps`` picoseconds (1 pJ/ps = 1 W)."""
    return energy_pj / time_ps if time_ps > 0 else 0.0


@dataclass(frozen=True)
class LinkSummary:
    """One link of a network that models links: its busy time, what it carried, and the share of the run
    it spent transmitting."""

    link: str
    busy_ns: float
    bytes: int
    messages: int
    utilisation: float

    @classmethod
    def of(cls, stats: LinkStats, total_ps: int) -> LinkSummary:
        return cls(stats.link, _ns(stats.busy_ps), stats.bytes, stats.messages,
                   stats.busy_ps / total_ps if total_ps else 0.0)  # fmt: skip


@dataclass(frozen=True)
class PacketLatencySummary:
    """How long packets took (networks that cut messages into packets): from a message being sent to a packet's
    last flit arriving; the percentiles at most 1/32 above the exact ones (see ``PacketLatencyStats``)."""

    packets: int
    mean_ns: float
    min_ns: float
    p50_ns: float
    p99_ns: float
    max_ns: float

    @classmethod
    def of(cls, stats: PacketLatencyStats) -> PacketLatencySummary | None:
        """The summary, or None from a network that counted no packets."""
        if not stats.packets:
            return None
        return cls(stats.packets, stats.mean_ps / 1000, _ns(stats.min_ps), _ns(stats.p50_ps), _ns(stats.p99_ps),
                   _ns(stats.max_ps))  # fmt: skip


@dataclass(frozen=True)
class Report:
    """One study's results. ``compute_time_ns`` and ``exposed_comm_ns`` are those of ``critical_npu``, the
    NPU that finished last (the lowest id on ties). ``backends`` says where each layer ran; ``spans``,
    ``counters`` and ``link_busy`` (empty unless the run recorded a trace) feed the Chrome trace and are not part
    of the JSON report;
    ``simulated_npus`` is how many NPUs the engine simulated one by one (fewer than ``npus`` when symmetric NPUs
    were aggregated).
    """

    name: str
    total_time_ps: int
    total_time_ns: float
    compute_time_ns: float
    exposed_comm_ns: float
    critical_npu: int
    npus: int
    collectives: tuple[CollectiveSummary, ...]
    per_npu: tuple[NpuSummary, ...]
    wall_seconds: float
    events_processed: int
    backends: dict[str, str]
    spans: tuple[TraceSpan, ...] = field(default=(), repr=False)
    counters: tuple[CounterSample, ...] = field(default=(), repr=False)
    training: dict[str, Any] | None = None
    links: tuple[LinkSummary, ...] = ()
    serving: dict[str, float] | None = None
    warnings: tuple[str, ...] = ()
    simulated_npus: int = 0
    link_busy: tuple[LinkBusy, ...] = field(default=(), repr=False)
    packet_latency: PacketLatencySummary | None = None
    compute_energy_pj: float = 0.0
    compute_power_w: float = 0.0
    operators: tuple[OperatorSummary, ...] = ()

    @classmethod
    def from_result(
        cls,
        name: str,
        result: SimulationResult,
        wall_seconds: float,
        backends: dict[str, str],
        training: dict[str, Any] | None = None,
        *,
        serving: dict[str, float] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> Report:
        """Summarise an engine result; ``backends`` maps a layer to a label such as ``analytical (in-process)``;
        ``training`` holds a training workload's ``iteration_time_ns``, ``samples_per_second`` and
        ``tflops_per_npu`` and, if modelled, ``memory_per_npu_bytes`` and ``pipeline_bubble_fraction`` (added to
        the JSON at top level); ``serving`` an inference workload's ``ttft_ns``, ``tpot_ns`` and
        ``tokens_per_second`` (JSON key ``serving``); ``warnings`` what the user should know (over capacity...)."""
        critical = max(result.per_npu, key=lambda s: (s.finish_ps, -s.npu), default=None)
        energy = sum((npu.compute_energy_pj for npu in result.per_npu), 0.0)
        return cls(
            name=name,
            total_time_ps=result.total_time_ps,
            total_time_ns=_ns(result.total_time_ps),
            compute_time_ns=_ns(critical.compute_ps) if critical else 0.0,
            exposed_comm_ns=_ns(critical.exposed_comm_ps) if critical else 0.0,
            critical_npu=critical.npu if critical else 0,
            npus=result.npus,
            collectives=tuple(CollectiveSummary.of(c) for c in result.collectives),
            per_npu=tuple(NpuSummary.of(n, result.total_time_ps) for n in result.per_npu),
            wall_seconds=wall_seconds,
            events_processed=result.events_processed,
            backends=dict(backends),
            spans=result.spans,
            counters=result.counters,
            training=dict(training) if training else None,
            links=tuple(LinkSummary.of(link, result.total_time_ps) for link in result.links),
            serving=dict(serving) if serving else None,
            warnings=tuple(warnings),
            simulated_npus=result.simulated_npus,
            link_busy=result.link_busy,
            packet_latency=PacketLatencySummary.of(result.packet_latency),
            compute_energy_pj=energy,
            compute_power_w=_watts(energy, result.total_time_ps),
            operators=tuple(OperatorSummary.of(op) for op in result.operators),
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (lists, not tuples); the trace spans are left out."""

        def rows(items: Sequence[Any]) -> list[dict[str, Any]]:
            return [{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(item).items()} for item in items]

        skipped = ("collectives", "per_npu", "spans", "counters", "training", "links", "serving", "warnings",
                   "link_busy", "operators", "packet_latency")
        data = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in skipped}
        data.update(self.training or {})
        data["backends"] = dict(self.backends)
        data["collectives"] = rows(self.collectives)
        data["per_npu"] = rows(self.per_npu)
        data["operators"] = [op.to_dict() for op in self.operators]
        if self.links:
            data["links"] = rows(self.links)
        if self.packet_latency is not None:
            data["packet_latency"] = asdict(self.packet_latency)
        if self.serving:
            data["serving"] = dict(self.serving)
        data["warnings"] = list(self.warnings)
        return data

    def to_text(self) -> str:
        """A readable summary: headline numbers, the collectives (at most 20 rows) and the NPUs."""
        return "\n".join([*self._headline(), "", *self._collective_table(), "", *self._npu_table(), *self._link_table(),
                          *operator_lines(self.operators)])

    def _link_table(self) -> list[str]:
        if not self.links:
            return []
        busiest = sorted(self.links, key=lambda link: (-link.utilisation, link.link))[:_MAX_LINK_ROWS]
        lines = ["", f"busiest links (of {len(self.links)} that carried traffic)",
                 f"  {'link':<28}{'busy':>14}{'utilisation':>13}{'bytes':>14}{'messages':>10}"]  # fmt: skip
        for link in busiest:
            lines.append(
                f"  {link.link:<28}{_time(link.busy_ns):>14}{link.utilisation:>12.1%}"
                f"{format_bytes(link.bytes):>14}{link.messages:>10,}"
            )
        latency = self.packet_latency
        if latency is not None:
            lines.append(
                f"packet latency over {latency.packets:,} packets: mean {_time(latency.mean_ns)}, "
                f"p50 {_time(latency.p50_ns)}, p99 {_time(latency.p99_ns)}, max {_time(latency.max_ns)}"
            )
        return lines

    def _training_lines(self) -> list[str]:
        if not self.training:
            return []
        lines = [
            f"  training         {self.training['samples_per_second']:,.1f} samples/s, "
            f"{self.training['tflops_per_npu']:,.1f} TFLOPS per NPU"
        ]
        bubble = self.training.get("pipeline_bubble_fraction")
        if bubble is not None:
            lines.append(f"  pipeline bubble  {bubble:.1%} of the iteration (mean over NPUs)")
        memory = self.training.get("memory_per_npu_bytes")
        if memory:
            lines.append(f"  memory           up to {format_bytes(max(memory))} per NPU (NPU {memory.index(max(memory))})")
        return lines

    def _serving_lines(self) -> list[str]:
        if not self.serving:
            return []
        s = self.serving
        return [
            f"  serving          TTFT {_time(s['ttft_ns'])}, TPOT {_time(s['tpot_ns'])}, "
            f"{s['tokens_per_second']:,.1f} tokens/s"
        ]

    def _exposed_split(self) -> str:
        critical = next((n for n in self.per_npu if n.npu == self.critical_npu), None)
        if critical is None or not critical.exposed_comm_ns_by_kind:
            return ""
        parts = sorted(critical.exposed_comm_ns_by_kind.items(), key=lambda item: -item[1])
        return "  (" + ", ".join(f"{kind} {_time(ns)}" for kind, ns in parts) + ")"

    def _memory_line(self) -> list[str]:
        peak = max(self.per_npu, key=lambda n: (n.peak_memory_bytes, -n.npu), default=None)
        if peak is None or not peak.peak_memory_bytes:
            return []
        parts = ", ".join(f"{kind} {format_bytes(size)}" for kind, size in peak.memory_at_peak.items())
        return [f"  peak memory      {format_bytes(peak.peak_memory_bytes)} (NPU {peak.npu} at "
                f"{_time(peak.peak_memory_ns)}: {parts})"]  # fmt: skip

    def _energy_line(self) -> list[str]:
        if not self.compute_energy_pj:
            return []
        top = max(self.per_npu, key=lambda n: (n.compute_energy_pj, -n.npu))
        return [f"  compute energy   {format_energy_pj(self.compute_energy_pj)} in all, {self.compute_power_w:,.1f} W mean "
                f"(NPU {top.npu} the most: {format_energy_pj(top.compute_energy_pj)}, {top.compute_power_w:,.1f} W)"]  # fmt: skip

    def _headline(self) -> list[str]:
        where = ", ".join(f"{layer} {label}" for layer, label in self.backends.items())
        count = len(self.collectives)
        return [
            *(f"warning: {warning}" for warning in self.warnings),
            f"{self.name}: {self.npus} NPUs, {count} collective{'' if count == 1 else 's'}",
            f"  total time       {_time(self.total_time_ns)}  ({self.total_time_ps} ps)",
            f"  compute time     {_time(self.compute_time_ns)}  (NPU {self.critical_npu}, the last to finish)",
            f"  exposed comm     {_time(self.exposed_comm_ns)}{self._exposed_split()}",
            *self._training_lines(),
            *self._serving_lines(),
            *self._memory_line(),
            *self._energy_line(),
            f"  simulated in     {self.wall_seconds:.3f} s wall, {self.events_processed:,} events"
            + (f", {self.simulated_npus} NPUs standing for all" if 0 < self.simulated_npus < self.npus else ""),
            f"  backends         {where}",
        ]

    def _collective_table(self) -> list[str]:
        if not self.collectives:
            return ["collectives: none"]
        head = f"{'id':>5}  {'type':<14} {'bytes':>10} {'group':>6} {'start':>12} {'end':>12}"
        lines = ["collectives", f"  {head}  per phase: queue / network"]
        for c in self.collectives[:_MAX_COLLECTIVE_ROWS]:
            phases = ", ".join(
                f"{_time(q)} / {_time(n)}" for q, n in zip(c.queue_delay_ns_per_phase, c.network_delay_ns_per_phase)
            )
            lines.append(
                f"  {c.id:>5}  {c.type:<14} {format_bytes(c.bytes):>10} {c.group_size:>6} "
                f"{_time(c.start_ns):>12} {_time(c.end_ns):>12}  {phases}"
            )
        if len(self.collectives) > _MAX_COLLECTIVE_ROWS:
            lines.append(f"  ... {len(self.collectives) - _MAX_COLLECTIVE_ROWS} more")
        return lines

    def _npu_table(self) -> list[str]:
        columns = ("finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns")
        titles = ("finish", "compute", "comm", "exposed comm")
        if len(self.per_npu) <= _MAX_NPU_ROWS:
            lines = ["per NPU", "  " + f"{'npu':>5}" + "".join(f"{t:>14}" for t in titles)]
            for n in self.per_npu:
                lines.append("  " + f"{n.npu:>5}" + "".join(f"{_time(getattr(n, c)):>14}" for c in columns))
            return lines
        lines = [f"per NPU ({len(self.per_npu)} NPUs)", f"  {'':<14}{'min':>14}{'mean':>14}{'max':>14}"]
        for column, title in zip(columns, titles):
            values = [getattr(n, column) for n in self.per_npu]
            stats = (min(values), sum(values) / len(values), max(values))
            lines.append(f"  {title:<14}" + "".join(f"{_time(v):>14}" for v in stats))
        return lines

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``report.json`` and ``trace.json`` (the Chrome trace of ``spans``, ``counters`` and
        ``link_busy``) into ``out_dir``."""
        out = Path(out_dir)
        report_path, trace_path = out / "report.json", out / "trace.json"
        try:
            out.mkdir(parents=True, exist_ok=True)
            report_path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
            trace = chrome_trace(self.spans, self.counters, self.link_busy, self.npus)
            trace_path.write_text(json.dumps(trace, separators=(",", ":")), encoding="utf-8")
        except OSError as exc:
            raise StrataSimError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
        return report_path, trace_path
