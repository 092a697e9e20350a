"""What a study produced, for people (:meth:`Report.to_text`) and for tools (:meth:`Report.to_dict`, files).

A report is the engine's :class:`~stratasim.system_layer.result.SimulationResult` (integer picoseconds), or a
request-level study's :class:`~stratasim.kernel.serving.ServingResult`, plus what the composition root adds: the study's name, the wall time, where each layer ran, a training or inference workload's
figures and the warnings. It copies nothing: :mod:`stratasim.report.json_report` and :mod:`stratasim.report.text_report` render
the result as it is, converting units with :func:`~stratasim.kernel.units.ps_to_ns` and
:func:`~stratasim.kernel.units.format_time_ps` (the JSON field names, a contract tools rely on, are listed there).

Energy is what the compute backend says its operators take: ``compute_energy_pj`` (picojoules) per NPU and
summed over the study, and ``compute_power_w`` (watts), that energy over the study's total time — the mean
power of the compute, per NPU or of all NPUs together (1 pJ per ps is 1 W). Both are 0 without priced operators.
When the study gives the network an energy per bit, ``network_energy_pj`` prices the bits the NPUs sent, and
``energy_pj`` and ``power_w`` are compute and network together: a training study's energy per iteration.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.serving import ServingResult
from stratasim.kernel.units import power_w, ps_to_ns
from stratasim.report.chrome_trace import write_chrome_trace
from stratasim.report.json_report import report_dict, write_report
from stratasim.report.text_report import report_text
from stratasim.system_layer.result import LinkStats, NpuStats, SimulationResult

__all__ = ["Report"]


@dataclass(frozen=True)
class Report:
    """One study's results: the engine's ``result`` and what the study adds to it. The properties are the headline
    figures the report derives from the result; everything else the engine measured is read from ``result``.

    ``backends`` maps a layer to a label such as ``analytical (in-process)``; ``training`` holds a training
    workload's ``iteration_time_ns``, ``samples_per_second`` and ``tflops_per_npu`` and, if modelled,
    ``memory_per_npu_bytes``, ``pipeline_bubble_fraction`` and ``cost_usd_per_iteration`` (added to the JSON at
    top level); ``serving`` an
    inference workload's ``ttft_ps``, ``tpot_ps`` and ``tokens_per_second`` (in the JSON as ``ttft_ns``, ``tpot_ns``) (JSON key ``serving``), or a request-level serving study's
    percentiles, throughput and goodput (``ttft_p99_ps``...) and its ``serving_timeline`` (batch size, queue
    length and KV blocks over time); ``warnings``
    what the user should know (over capacity...); ``calibration`` the efficiency model the compute device is
    priced with and where it comes from (empty without a compute section). The result's trace spans, counters and link busy stretches
    (empty unless the run recorded a trace) feed the Chrome trace and are not part of the JSON report.
    """

    name: str
    result: SimulationResult | ServingResult
    wall_seconds: float
    backends: dict[str, str]
    training: dict[str, Any] | None = None
    serving: dict[str, float] | None = None
    serving_timeline: dict[str, list[float]] | None = None
    warnings: tuple[str, ...] = ()
    network_energy_per_bit_pj: tuple[float, ...] | None = None
    calibration: str = ""

    @property
    def energy_per_token_pj(self) -> float | None:
        """A serving study's energy (compute, and network when priced) per generated token; None otherwise."""
        rate = (self.serving or {}).get("tokens_per_second", 0.0)
        if not rate or self.result.total_time_ps <= 0:
            return None
        tokens = rate * self.result.total_time_ps / 1e12
        return (self.compute_energy_pj + (self.network_energy_pj or 0.0)) / tokens

    @property
    def engine(self) -> SimulationResult | None:
        """The engine's result, whose tables (collectives, NPUs, links, operators) the report shows; None for a
        request-level study, which has none."""
        return self.result if isinstance(self.result, SimulationResult) else None

    @property
    def per_npu(self) -> tuple[NpuStats, ...]:
        """Each simulated NPU's figures (none for a request-level study)."""
        return self.engine.per_npu if self.engine else ()

    @property
    def simulated_npus(self) -> int:
        """The NPUs the engine simulated one by one (0 for a request-level study)."""
        return self.engine.simulated_npus if self.engine else 0

    @property
    def stopped_at_ps(self) -> int | None:
        """When the run was stopped before its end (None: it ran to the end)."""
        return self.engine.stopped_at_ps if self.engine else None

    @property
    def network_energy_pj(self) -> float | None:
        """The energy of every bit the NPUs sent (None when the study prices no bit): collective bytes along
        each dimension and point-to-point bytes across each, at the dimension's pJ per bit; a flat phase's
        (dimension -1, all dimensions at once) at the dearest dimension's."""
        prices = self.network_energy_per_bit_pj
        if prices is None:
            return None
        flat = max(prices, default=0.0)
        bits = [0] * len(prices)
        flat_bits = 0
        for npu in self.per_npu:
            for dim, size in (*npu.bytes_sent_per_dim, *npu.p2p_bytes_per_dim):
                if 0 <= dim < len(bits):
                    bits[dim] += 8 * size
                else:
                    flat_bits += 8 * size
        return sum(price * count for price, count in zip(prices, bits)) + flat * flat_bits

    @property
    def critical(self) -> NpuStats | None:
        """The NPU that finished last (the lowest id on ties); None without NPUs."""
        return max(self.per_npu, key=lambda s: (s.finish_ps, -s.npu), default=None)

    @property
    def critical_npu(self) -> int:
        """The id of :attr:`critical` (0 without NPUs)."""
        critical = self.critical
        return critical.npu if critical else 0

    @property
    def total_time_ps(self) -> int:
        """When the last NPU finished, the study's headline figure."""
        return self.result.total_time_ps

    @property
    def total_time_ns(self) -> float:
        """:attr:`total_time_ps` in ns."""
        return ps_to_ns(self.result.total_time_ps)

    @property
    def compute_time_ns(self) -> float:
        """The busy compute time of :attr:`critical`."""
        critical = self.critical
        return ps_to_ns(critical.compute_ps) if critical else 0.0

    @property
    def exposed_comm_ns(self) -> float:
        """The communication :attr:`critical` left exposed (its time not computing before it finished)."""
        critical = self.critical
        return ps_to_ns(critical.exposed_comm_ps) if critical else 0.0

    @property
    def compute_energy_pj(self) -> float:
        """The compute energy of every NPU together."""
        return sum((npu.compute_energy_pj for npu in self.per_npu), 0.0)

    def power_w(self, energy_pj: float) -> float:
        """Mean power of ``energy_pj`` spent over the study's total time."""
        return power_w(energy_pj, self.result.total_time_ps)

    def utilisation(self, link: LinkStats) -> float:
        """The share of the study's total time ``link`` spent transmitting."""
        total = self.result.total_time_ps
        return link.busy_ps / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (lists, not tuples); the trace spans are left out."""
        return report_dict(self)

    def to_json(self) -> str:
        """The report as ``report.json`` holds it (the text of :meth:`to_dict`, written without building a dict
        per collective)."""
        text = io.StringIO()
        write_report(text, self)
        return text.getvalue()

    def to_dataframe(self, table: str = "per_npu") -> Any:
        """One of the report's tables as a pandas DataFrame (``per_npu``, ``collectives``, ``operators`` or
        ``links``; nested fields become dotted columns). pandas is not a dependency: install it to use this."""
        tables = ("per_npu", "collectives", "operators", "links")
        if table not in tables:
            raise StrataSimError(f"no table {table!r} in a report; expected one of {', '.join(tables)}")
        try:
            import pandas
        except ImportError:
            raise StrataSimError("Report.to_dataframe needs pandas: pip install pandas") from None
        return pandas.json_normalize(self.to_dict().get(table, []))

    def to_text(self) -> str:
        """A readable summary: headline numbers, the collectives grouped by kind and communicator, the NPUs."""
        return report_text(self)

    def write(self, out_dir: str | Path, *, trace: bool = True) -> tuple[Path, ...]:
        """Write ``report.json`` and, with ``trace``, ``trace.json`` (the Chrome trace of the result's spans,
        counters and link busy stretches, streamed event by event) into ``out_dir``; the paths written."""
        out = Path(out_dir)
        report_path, trace_path = out / "report.json", out / "trace.json"
        result, engine = self.result, self.engine
        try:
            out.mkdir(parents=True, exist_ok=True)
            with report_path.open("w", encoding="utf-8", buffering=1 << 20) as file:
                write_report(file, self)
            if not trace:
                return (report_path,)
            with trace_path.open("w", encoding="utf-8", buffering=1 << 20) as file:
                if engine is None:
                    write_chrome_trace(file, (), result.counters, (), result.npus, None)
                else:
                    write_chrome_trace(
                        file, engine.spans, engine.counters, engine.link_busy, engine.npus, engine.stands_for()
                    )
        except OSError as exc:
            raise StrataSimError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
        return report_path, trace_path
