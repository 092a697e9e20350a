"""The contents of a report: a study's figures, as :class:`~stratasim.report.report.Report` holds them.

The renderers (:mod:`stratasim.report.json_report`, :mod:`stratasim.report.text_report`,
:mod:`stratasim.report.figures`) read a :class:`ReportContents`; :class:`~stratasim.report.report.Report` adds the
methods that call them, so the renderers and the report do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stratasim.kernel.serving import ServingResult
from stratasim.kernel.units import power_w, ps_to_ns
from stratasim.report.jobs import JobFigures
from stratasim.report.layers import LayerRow, layer_rows
from stratasim.report.serving_layers import ServingLayerRow
from stratasim.system_layer.result import LinkStats, NpuStats, SimulationResult, TraceSpan

__all__ = ["ReportContents"]


@dataclass(frozen=True)
class ReportContents:
    """One study's results: the engine's ``result`` and what the study adds to it. The properties are the headline
    figures the report derives from the result; everything else the engine measured is read from ``result``.

    ``backends`` maps a layer to a label such as ``analytical (in-process)``; ``training`` holds a training
    workload's ``iteration_time_ns``, ``samples_per_second`` and ``tflops_per_npu`` and, if modelled,
    ``memory_per_npu_bytes``, ``pipeline_bubble_fraction``, ``cost_usd_per_iteration``, ``moe_dropped_tokens`` and
    ``moe_dropped_fraction`` (token-to-expert assignments dropped at full experts, with ``model.routing``) and
    ``work_split`` (the
    layers per stage and micro-batches per DP rank of a plan that splits them unevenly; added to the JSON at
    top level); ``serving`` an
    inference workload's ``ttft_ps``, ``tpot_ps`` and ``tokens_per_second`` (in the JSON as ``ttft_ns``, ``tpot_ns``) (JSON key ``serving``), or a request-level serving study's
    percentiles, throughput and goodput (``ttft_p99_ps``...) and its ``serving_timeline`` (batch size, queue
    length and KV blocks over time); ``warnings``
    what the user should know (over capacity...); ``calibration`` the efficiency model the compute device is
    priced with and where it comes from (empty without a compute section); ``jobs`` each job's figures in a study of
    several jobs (:class:`~stratasim.report.jobs.JobFigures`; empty otherwise); ``samples`` the Monte-Carlo step-time
    distribution (:func:`stratasim.study.samples.sample_figures`; None without samples); ``devices`` how many NPUs
    run each device when NPU groups run different devices (``compute.groups``; None otherwise); ``torus_shape`` the
    shape of the torus or mesh fabric the study ran on (the cluster view groups its links by dimension; empty on other
    topologies); ``cost`` the system's price, power and throughput per dollar and per watt when the study has an
    ``economics`` section (:func:`stratasim.study.economics.cost_figures`; None otherwise); ``serving_layers`` a
    request-level serving run's per-layer breakdown when asked for (:mod:`stratasim.report.serving_layers`; empty
    otherwise) and ``serving_layer_spans`` its ``layers`` trace track when a trace was asked for too. The result's trace
    spans, counters and link busy stretches (empty unless the run recorded a trace) feed the Chrome trace and are not
    part of the JSON report.
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
    jobs: tuple[JobFigures, ...] = ()
    samples: dict[str, Any] | None = None
    devices: dict[str, int] | None = None
    torus_shape: tuple[int, ...] = ()
    cost: dict[str, Any] | None = None
    serving_layers: tuple[ServingLayerRow, ...] = ()
    serving_layer_spans: tuple[TraceSpan, ...] = ()

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
    def layers(self) -> tuple[LayerRow, ...]:
        """The critical NPU's per-layer breakdown (:mod:`stratasim.report.layers`; empty without one)."""
        critical = self.critical
        return layer_rows(critical) if critical else ()

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
        """The compute energy of every NPU together (a request-level study's as its run counted it)."""
        if isinstance(self.result, ServingResult):
            return self.result.compute_energy_pj
        return sum((npu.compute_energy_pj for npu in self.per_npu), 0.0)

    def power_w(self, energy_pj: float) -> float:
        """Mean power of ``energy_pj`` spent over the study's total time."""
        return power_w(energy_pj, self.result.total_time_ps)

    def utilisation(self, link: LinkStats) -> float:
        """The share of the study's total time ``link`` spent transmitting."""
        total = self.result.total_time_ps
        return link.busy_ps / total if total else 0.0
