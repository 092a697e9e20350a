"""Accelerators as the roofline sees them: what describes a device, and its datasheet and calibrated views.

A device is described by its dense peak throughput per dtype, its main-memory bandwidth and capacity, an optional
on-chip memory level (:class:`Sram`), how its compute units tile a matrix product (:class:`Tiling`), two efficiency
factors, a fixed per-operator launch overhead, its power and what it costs. A preset
(:mod:`stratasim.compute_layer.device_presets`) takes its peaks and memories from its datasheet; its efficiencies
are a model fitted once to published training throughput (``calibration_source`` cites the measurements;
docs/validation/calibration.md shows the fit), with size-dependent efficiency on, and :func:`datasheet` strips them
to the bare roofline. A figure the maker does not publish is left out (``None``) and the preset's ``source`` says
so. Other devices are described in a study (:mod:`stratasim.compute_layer.device_section`), travel to a backend as a
``RooflineDevice`` message (:mod:`stratasim.compute_layer.device_wire`), or are constructed as a :class:`Device` and
handed to a backend in a :func:`catalog`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from stratasim.compute_layer.catalog import by_name
from stratasim.compute_layer.comm_footprint import CommFootprint
from stratasim.compute_layer.device_bounds import MAX_CORES, MAX_ON_CHIP_BYTES, beyond
from stratasim.kernel.operators import DTYPES, DType, dtype_name
from stratasim.v1 import compute_pb2

__all__ = [
    "Device",
    "basis",
    "Sram",
    "Tiling",
    "calibrated",
    "catalog",
    "datasheet",
    "efficiency_statement",
]


@dataclass(frozen=True)
class Sram:
    """The on-chip memory between main memory and the compute units: ``capacity`` in bytes, ``bandwidth`` in bytes/s.

    The capacity decides how often a matrix product too big for it re-reads its operands from main memory; the
    bandwidth, when known, adds the level's own ceiling. ``bandwidth=None`` (unpublished) keeps the level as a
    capacity constraint only, which is how DFModel treats on-chip SRAM.
    """

    capacity: int
    bandwidth: float | None = None

    def problems(self) -> Iterator[str]:
        """What is wrong with the level, one message each (nothing when it is valid)."""
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity <= 0:
            yield f"sram.capacity must be a positive integer, got {self.capacity!r}"
        elif (problem := beyond("sram.capacity", self.capacity, MAX_ON_CHIP_BYTES, "bytes")) is not None:
            yield problem
        if self.bandwidth is not None and not self.bandwidth > 0:
            yield f"sram.bandwidth must be positive or None, got {self.bandwidth}"


_TILING_COUNTS = {"tile_m": "rows", "tile_n": "columns", "tile_k": "elements", "units": "compute units"}


@dataclass(frozen=True)
class Tiling:
    """How the compute units cover a matrix product: each computes one ``tile_m x tile_n`` output tile at a time,
    stepping through K in slices of ``tile_k``, and ``units`` of them run at once (SMs, clusters, MXUs).

    The tile sets how often operands are re-read from on-chip memory (the SRAM level's traffic) and, when the
    device's ``size_efficiency`` is on, how much of the hardware a small or ragged operator leaves idle.
    """

    tile_m: int
    tile_n: int
    units: int
    tile_k: int = 1

    def problems(self) -> Iterator[str]:
        """What is wrong with the tiling, one message each (nothing when it is valid)."""
        for attribute in ("tile_m", "tile_n", "tile_k", "units"):
            value = getattr(self, attribute)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                yield f"tiling.{attribute} must be a positive integer, got {value!r}"
            elif (problem := beyond(f"tiling.{attribute}", value, MAX_CORES, _TILING_COUNTS[attribute])) is not None:
                yield problem


@dataclass(frozen=True)
class Device:
    """One accelerator: throughputs in FLOP/s (OP/s for integers), bandwidth in bytes/s, capacity in bytes.

    ``peak_flops`` maps each supported dtype to its dense (no structured sparsity) peak; a dtype it omits is
    unsupported. ``compute_efficiency`` and ``memory_efficiency`` (0 < e <= 1) scale the peaks to what an
    operator achieves; ``launch_overhead_ps`` is added once per operator. ``tdp_w`` is the board power in
    watts (``None``: not published, so energy is not modelled) and ``source`` cites the public datasheet the
    numbers come from. ``price_usd`` (to buy one) and ``usd_per_hour`` (to rent one) are in US dollars, ``None``
    when unknown; a preset's rate is a dated snapshot of a cloud provider's published price (``source`` says
    which), which a study overrides (``compute.device: {preset: h100, usd_per_hour: 2.5}``).

    ``sram`` is the on-chip level of the hierarchical roofline (``None``: main memory only, the flat roofline);
    ``tiling`` describes the compute units (``None``: operands stream once from the nearest memory).
    ``size_efficiency`` scales compute efficiency by the share of the tiles' work that is useful
    (:func:`stratasim.compute_layer.efficiency.size_efficiency`); it needs ``tiling``. ``calibration_source`` says
    where the efficiencies and launch overhead come from (``fitted to`` the measurements); empty, they are not
    calibrated. ``comm`` is what collective kernels take of it while they run (its SMs and links,
    :mod:`stratasim.compute_layer.comm_footprint`; ``None``: not known).
    """

    name: str
    peak_flops: Mapping[DType, float] = field(hash=False)
    memory_bandwidth: float
    memory_capacity: int
    tdp_w: float | None
    source: str
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    launch_overhead_ps: int = 0
    sram: Sram | None = None
    tiling: Tiling | None = None
    size_efficiency: bool = False
    price_usd: float | None = None
    usd_per_hour: float | None = None
    calibration_source: str = ""
    comm: CommFootprint | None = None

    def __post_init__(self) -> None:
        problems = list(self._problems())
        if problems:
            raise ValueError(f"device {self.name!r}: {'; '.join(problems)}")
        # A read-only copy, so a frozen device cannot change through the caller's dict.
        object.__setattr__(self, "peak_flops", MappingProxyType(dict(self.peak_flops)))

    def _problems(self) -> Iterator[str]:
        if not self.name:
            yield "name must not be empty"
        if not self.peak_flops:
            yield "peak_flops must name at least one dtype"
        for dtype, peak in self.peak_flops.items():
            if dtype not in DTYPES:
                yield f"peak_flops names {dtype_name(dtype)}, which no operator can have"
            if not peak > 0:
                yield f"peak_flops[{dtype_name(dtype)}] must be positive, got {peak}"
        if not self.memory_bandwidth > 0:
            yield f"memory_bandwidth must be positive, got {self.memory_bandwidth}"
        if not self.memory_capacity > 0:
            yield f"memory_capacity must be positive, got {self.memory_capacity}"
        efficiencies = (("compute_efficiency", self.compute_efficiency), ("memory_efficiency", self.memory_efficiency))
        for attribute, value in efficiencies:
            if not 0 < value <= 1:
                yield f"{attribute} must be in (0, 1], got {value}"
        if not isinstance(self.launch_overhead_ps, int) or self.launch_overhead_ps < 0:
            yield f"launch_overhead_ps must be a non-negative integer, got {self.launch_overhead_ps!r}"
        for attribute in ("tdp_w", "price_usd", "usd_per_hour"):
            value = getattr(self, attribute)
            if value is not None and not value >= 0:
                yield f"{attribute} cannot be negative, got {value}"
        if self.sram is not None:
            yield from self.sram.problems()
        if self.tiling is not None:
            yield from self.tiling.problems()
        elif self.size_efficiency:
            yield "size_efficiency needs a tiling to measure operators against"

    def supported_dtypes(self) -> list[str]:
        """Names of the dtypes this device has a peak for, in the order given (``["bf16", "int8"]``)."""
        return [dtype_name(dtype) for dtype in self.peak_flops]


def datasheet(dev: Device) -> Device:
    """``dev`` as its datasheet has it: full efficiency, no launch overhead, no size dependence, not calibrated."""
    return replace(
        dev,
        compute_efficiency=1.0,
        memory_efficiency=1.0,
        launch_overhead_ps=0,
        size_efficiency=False,
        calibration_source="",
    )


def calibrated(dev: Device, calibration: compute_pb2.Calibration) -> Device:
    """``dev`` (its :func:`datasheet` form when the calibration says ``datasheet``) with the calibration's non-zero
    fields in place of its own (ValueError if out of range)."""
    base = datasheet(dev) if calibration.datasheet else dev
    fields = (
        calibration.compute_efficiency,
        calibration.memory_efficiency,
        calibration.launch_overhead_ps,
        calibration.size_efficiency,
    )
    source = base.calibration_source
    if any(fields):
        source = "set by the request's calibration" + (f", over a model {source}" if source else "")
    return replace(
        base,
        compute_efficiency=calibration.compute_efficiency or base.compute_efficiency,
        memory_efficiency=calibration.memory_efficiency or base.memory_efficiency,
        launch_overhead_ps=calibration.launch_overhead_ps or base.launch_overhead_ps,
        size_efficiency=calibration.size_efficiency or base.size_efficiency,
        calibration_source=source,
    )


def basis(dev: Device) -> compute_pb2.Basis.ValueType:
    """Where ``dev``'s roofline times come from: ``FITTED_TO_RUNS`` when its efficiencies are calibrated (a preset's
    model fitted to published training throughput, or a study's own ``compute.calibration``, one figure for every
    operator and so a whole-workload one), else ``DATASHEET``."""
    return compute_pb2.FITTED_TO_RUNS if dev.calibration_source else compute_pb2.DATASHEET


def efficiency_statement(dev: Device) -> str:
    """The efficiency model ``dev`` is priced with, and what it was fitted to, in words; empty when it has none."""
    if not dev.calibration_source:
        return ""
    parts = [
        f"compute {dev.compute_efficiency:.3g} of peak"
        + (" x tile and wave quantization" if dev.size_efficiency else ""),
        f"memory {dev.memory_efficiency:.3g} of bandwidth",
    ]
    if dev.launch_overhead_ps:
        parts.append(f"{dev.launch_overhead_ps / 1000:g} ns per operator")
    return f"{', '.join(parts)}; {dev.calibration_source}"


def catalog(devices: Iterable[Device]) -> Mapping[str, Device]:
    """A read-only ``{lower-case name: device}`` mapping; raises ValueError if two devices share a name."""
    return by_name(devices, "devices")
