"""What a study's system costs to buy and draws, and its performance per dollar and per watt: DFModel's economics.

A system is ``npus`` chips, each with its silicon and its main memory, and the network between them. The chip's
price and power come from DFModel's curves in its peak throughput (:mod:`stratasim.compute_layer.silicon`), the
memory's from its technology's figures per GB/s (:mod:`stratasim.compute_layer.memory_technology`), the network's
from its links' and switch ports' (:mod:`stratasim.network_layer.link_technology`); the study's ``economics:``
section (:class:`~stratasim.config.economics_section.EconomicsSection`) picks the technologies and overrides any
figure. An optimiser calls :func:`price_system` on candidate hardware, or :func:`study_economics` on a study, and
divides a throughput by :attr:`SystemEconomics.system_price_usd` or :attr:`SystemEconomics.system_power_w`.
docs/explanation/power-and-cost.md gives the formulas and their sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from stratasim.compute_layer.device_presets import device
from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.memory_technology import memory_technology
from stratasim.compute_layer.silicon import silicon_power_w, silicon_price_usd
from stratasim.config.economics_section import EconomicsSection
from stratasim.config.study_file import Study
from stratasim.kernel.errors import BackendError, ConfigError
from stratasim.network_layer.link_technology import LinkTechnology, NetworkBill, link_technology, network_bill
from stratasim.v1 import compute_pb2, network_pb2

__all__ = [
    "SystemEconomics",
    "SystemHardware",
    "achieved_throughput",
    "cost_figures",
    "price_system",
    "study_economics",
    "study_cost",
    "study_hardware",
]

_GB = 1e9


@dataclass(frozen=True)
class SystemHardware:
    """What the economics reads of a system: chips of ``peak_flops`` FLOP/s (dense) with ``memory_bandwidth``
    bytes/s of main memory each, as many as ``topology`` (a list of dimensions) connects."""

    peak_flops: float
    memory_bandwidth: float
    topology: network_pb2.Topology

    @property
    def npus(self) -> int:
        """The chips: the product of the topology's dimension sizes."""
        return math.prod(dim.size for dim in self.topology.dimensions)


@dataclass(frozen=True)
class SystemEconomics:
    """A system's price (US dollars) and power (W, everything at full use): ``npus`` chips of ``chip_price_usd`` and
    ``chip_power_w`` each, each with memory of ``memory_price_usd`` and ``memory_power_w``, and the ``network``."""

    npus: int
    chip_price_usd: float
    chip_power_w: float
    memory_price_usd: float
    memory_power_w: float
    network: NetworkBill

    @property
    def system_price_usd(self) -> float:
        """The whole system's price: its chips, their memory and the network."""
        return self.npus * (self.chip_price_usd + self.memory_price_usd) + self.network.price_usd

    @property
    def system_power_w(self) -> float:
        """The whole system's power: its chips, their memory and the network."""
        return self.npus * (self.chip_power_w + self.memory_power_w) + self.network.power_w

    def perf_per_dollar(self, throughput: float) -> float:
        """``throughput`` (any unit a second) per US dollar of the system."""
        return throughput / self.system_price_usd

    def perf_per_watt(self, throughput: float) -> float:
        """``throughput`` (any unit a second) per watt of the system."""
        return throughput / self.system_power_w


def _links(options: EconomicsSection, dimensions: int) -> list[LinkTechnology]:
    """Each dimension's link technology, with the section's overrides in place of its figures."""
    overrides = {
        field: value
        for field in (
            "link_price_usd_per_gbps",
            "link_power_w_per_gbps",
            "switch_price_usd_per_gbps",
            "switch_power_w_per_gbps",
        )
        if (value := getattr(options, field)) is not None
    }
    return [replace(link_technology(name), **overrides) for name in options.link_names(dimensions)]


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def price_system(hardware: SystemHardware, options: EconomicsSection | None = None) -> SystemEconomics:
    """The price and power of ``hardware`` with ``options``' technologies and overrides (default: HBM3 memory and
    NVLink4 links at DFModel's figures, the chip on DFModel's curves). ValueError for a fabric topology or a
    ``links`` list of the wrong length."""
    options = options or EconomicsSection()
    memory = memory_technology(options.memory)
    gbps = hardware.memory_bandwidth / _GB
    return SystemEconomics(
        npus=hardware.npus,
        chip_price_usd=_or(options.chip_price_usd, silicon_price_usd(hardware.peak_flops)),
        chip_power_w=_or(options.chip_power, silicon_power_w(hardware.peak_flops)),
        memory_price_usd=gbps * _or(options.memory_price_usd_per_gbps, memory.price_usd_per_gbps),
        memory_power_w=gbps * _or(options.memory_power_w_per_gbps, memory.power_w_per_gbps),
        network=network_bill(hardware.topology, _links(options, len(hardware.topology.dimensions))),
    )


def _roofline_device(study: Study) -> Device | None:
    """The study's compute device as the roofline describes it (a preset or a described device); None otherwise."""
    named = None if study.compute is None else study.compute.device
    if isinstance(named, DeviceSection):
        return named.device()
    if isinstance(named, str):
        try:
            return device(named)
        except BackendError:  # a device of another backend: its figures are not a roofline's
            return None
    return None


def _peak(found: Device) -> float:
    """A device's dense 16-bit peak (bf16, else fp16), else its highest."""
    peaks = found.peak_flops
    return peaks.get(compute_pb2.BF16) or peaks.get(compute_pb2.FP16) or max(peaks.values())


def study_hardware(study: Study) -> SystemHardware:
    """The hardware of ``study``: its topology, and its chip's peak and memory bandwidth from ``economics.peak`` and
    ``economics.memory_bandwidth`` or else its compute device. ConfigError naming the key when neither says."""
    options = study.economics or EconomicsSection()
    found = _roofline_device(study)
    peak = options.peak if options.peak is not None else (None if found is None else _peak(found))
    bandwidth = options.memory_bandwidth
    if bandwidth is None and found is not None:
        bandwidth = found.memory_bandwidth
    missing = [
        (f"economics.{key}", f"the study's compute device does not give the chip's {what}: give it here ({example})")
        for key, value, what, example in (
            ("peak", peak, "peak throughput", "peak: 989TFLOPS"),
            ("memory_bandwidth", bandwidth, "memory bandwidth", "memory_bandwidth: 3.35TB/s"),
        )
        if value is None
    ]
    if peak is None or bandwidth is None:
        raise ConfigError(study.source, missing)
    return SystemHardware(peak, bandwidth, study.topology_proto())


def study_economics(study: Study) -> SystemEconomics:
    """The price and power of ``study``'s system with its ``economics`` section (defaults without one)."""
    return price_system(study_hardware(study), study.economics)


def achieved_throughput(
    total_time_ps: int, training: dict[str, Any] | None, serving: dict[str, Any] | None
) -> tuple[float, str]:
    """The throughput a run achieved and its unit: a training run's samples a second, a serving run's tokens a
    second, else iterations (whole runs) a second."""
    if training and training.get("samples_per_second"):
        return float(training["samples_per_second"]), "samples/s"
    if serving and serving.get("tokens_per_second"):
        return float(serving["tokens_per_second"]), "tokens/s"
    return 1e12 / total_time_ps, "iterations/s"


def cost_figures(economics: SystemEconomics, throughput: float, unit: str) -> dict[str, Any]:
    """The report's ``cost`` block: the system's price and power, their parts, and ``throughput`` (in ``unit``) per
    dollar and per watt."""
    return {
        "system_price_usd": economics.system_price_usd,
        "system_power_w": economics.system_power_w,
        "chip_price_usd": economics.chip_price_usd,
        "chip_power_w": economics.chip_power_w,
        "memory_price_usd": economics.memory_price_usd,
        "memory_power_w": economics.memory_power_w,
        "network_price_usd": economics.network.price_usd,
        "network_power_w": economics.network.power_w,
        "throughput": throughput,
        "throughput_unit": unit,
        "perf_per_dollar": economics.perf_per_dollar(throughput),
        "perf_per_watt": economics.perf_per_watt(throughput),
    }


def study_cost(
    study: Study, total_time_ps: int, training: dict[str, Any] | None, serving: dict[str, Any] | None
) -> dict[str, Any]:
    """The report's ``cost`` block of ``study`` for a run of ``total_time_ps`` with these ``training`` or
    ``serving`` figures (:func:`achieved_throughput`)."""
    return cost_figures(study_economics(study), *achieved_throughput(total_time_ps, training, serving))
