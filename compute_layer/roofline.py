"""The roofline compute backend: an operator takes as long as its slowest level — compute, on-chip memory or DRAM.

For an operator with F FLOPs of ``dtype`` on a device, with its traffic Q_sram and Q_dram from
:mod:`stratasim.compute_layer.roofline_levels` (the minimum bytes while the operator fits on chip, the best tiling's
bytes when it does not)::

    compute_ps  = F · 10^12 / (peak[dtype] · compute_efficiency · size_efficiency)
    sram_ps     = Q_sram · 10^12 / sram_bandwidth                      (a device with a known SRAM bandwidth)
    dram_ps     = Q_dram · 10^12 / (memory_bandwidth · memory_efficiency)
    duration_ps = ceil(max(compute_ps, sram_ps, dram_ps)) + launch_overhead_ps

computed with exact rational arithmetic, so every run and every platform gives the same picoseconds.
``size_efficiency`` is 1 unless the device turns it on (:mod:`stratasim.compute_layer.efficiency`: tile and wave
quantization). ``memory_efficiency`` (a calibration of sustained HBM bandwidth) scales DRAM only. This is the
compute and memory part of DFModel's hierarchical roofline, max(compute, memory, network): the network part
belongs to the collectives, which the network layer simulates as events of their own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from stratasim.compute_layer.device_presets import PRESETS, device
from stratasim.compute_layer.device_wire import device_from_message
from stratasim.compute_layer.devices import Device, basis, calibrated, catalog, efficiency_statement
from stratasim.compute_layer.efficiency import gemm_efficiency
from stratasim.compute_layer.requests import DescriptionCache, Rejected, described, device_facts, label
from stratasim.compute_layer.roofline_levels import dram_bytes, gemm_view, sram_bytes
from stratasim.kernel.errors import BackendError
from stratasim.kernel.operators import dtype_name, signature
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["from_section", "RooflineCompute", "LevelTimes", "level_times"]

_PS_PER_SECOND = 10**12
# OperatorCost.duration_ps is an int64.
_INT64_MAX = 2**63 - 1


class RooflineCompute:
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` pricing each operator on the roofline of a device.

    ``energy_pj`` is the device's TDP times the duration (1 W · 1 ps = 1 pJ): an upper bound, since a real
    operator seldom draws full board power (0 for a device whose TDP is not published). ``traffic`` lists the bytes at ``"dram"`` and, for a device with
    an on-chip level, at ``"sram"``. ``bound`` names the level that set the time: ``COMPUTE`` when compute time
    is at least every memory time (so also for an empty operator, which costs only the launch overhead), else
    ``MEMORY`` (DRAM) when DRAM time is at least SRAM time, else ``SRAM``. ``basis`` is ``FITTED_TO_RUNS`` on a
    device with calibrated efficiencies, else ``DATASHEET`` (:func:`~stratasim.compute_layer.devices.basis`).

    ``devices`` replaces the preset devices (:data:`~stratasim.compute_layer.device_presets.PRESETS`) with others; a request
    carrying a ``roofline_device`` prices on that description instead of looking its name up. Results are cached per
    instance by (device, operator signature), so repeated operators are priced once.
    """

    name = "roofline"

    def __init__(self, devices: Iterable[Device] | None = None) -> None:
        self._devices = PRESETS if devices is None else catalog(devices)
        self._cache: dict[tuple[Device, bytes], compute_pb2.OperatorCost] = {}
        self._described: DescriptionCache[compute_pb2.RooflineDevice, Device] = DescriptionCache(device_from_message)

    def devices(self) -> list[str]:
        """Names of the devices this instance can price, sorted."""
        return sorted(self._devices)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of ``request``; an unknown device or unsupported dtype comes back as ``error``."""
        where = "device"
        try:
            if request.HasField("roofline_device"):
                where = "roofline_device"
                dev = self._device(request.device, request.roofline_device)
            else:
                dev = self._device(request.device, None)
            if request.HasField("calibration"):
                where = "calibration"
                dev = calibrated(dev, request.calibration)
        except (BackendError, ValueError) as exc:
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=str(exc), where=where)
            return compute_pb2.EstimateResponse(error=error)
        try:
            costs = [self._cached(index, op, dev) for index, op in enumerate(request.ops)]
        except Rejected as rejected:
            return compute_pb2.EstimateResponse(error=rejected.error)
        return compute_pb2.EstimateResponse(costs=costs)

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each device's memory capacity (its HBM, from the datasheet) and efficiency model; an unknown device is
        the error."""

        given = {message.name: message for message in request.roofline_devices}

        def facts(name: str) -> compute_pb2.DeviceFacts:
            found = self._device(name, given.get(name))
            # Every roofline model's efficiency stands for whole runs (fitted to them, or the datasheet's figures
            # that nothing was measured against): counting collective contention on top is the study's choice.
            return device_facts(name, found, efficiency_statement(found), absorbed=True)

        return described(request, facts)

    def _device(self, name: str, description: compute_pb2.RooflineDevice | None) -> Device:
        """The device ``description`` gives (built once per distinct description), else the preset ``name``."""
        if description is None:
            return device(name, self._devices)
        return self._described.get(name, description)

    def close(self) -> None:
        """Drop the cache; the backend is not used afterwards."""
        self._cache.clear()
        self._described.clear()

    def _cached(self, index: int, op: compute_pb2.OperatorDesc, dev: Device) -> compute_pb2.OperatorCost:
        key = (dev, signature(op))
        cost = self._cache.get(key)
        if cost is None:
            cost = self._cache[key] = _price(index, op, dev)
        return cost


@dataclass(frozen=True)
class LevelTimes:
    """One operator on one device, level by level: times in exact picoseconds (before rounding and launch
    overhead; ``sram_ps`` is ``None`` without a known SRAM bandwidth), bytes per level and the compute
    efficiency's size factor."""

    compute_ps: Fraction
    sram_ps: Fraction | None
    dram_ps: Fraction
    traffic: tuple[tuple[str, int], ...]
    size_efficiency: Fraction

    @property
    def bound(self) -> compute_pb2.Bound.ValueType:
        """The level that sets the time: compute wins ties, then DRAM."""
        sram = self.sram_ps if self.sram_ps is not None else Fraction(-1)
        if self.compute_ps >= max(self.dram_ps, sram):
            return compute_pb2.COMPUTE
        return compute_pb2.MEMORY if self.dram_ps >= sram else compute_pb2.SRAM

    @property
    def slowest_ps(self) -> Fraction:
        """The time of the bounding level."""
        return max(self.compute_ps, self.dram_ps, self.sram_ps if self.sram_ps is not None else Fraction(0))


def level_times(op: compute_pb2.OperatorDesc, dev: Device) -> LevelTimes:
    """Price ``op`` on ``dev`` level by level; ``op.dtype`` must be one ``dev`` has a peak for (KeyError if not)."""
    # Each time is one exact ratio of integers (a float's as_integer_ratio is its exact binary value), so no
    # rounding happens before the final ceil.
    view = gemm_view(op)
    tiling = dev.tiling if dev.size_efficiency else None
    share = Fraction(1) if view is None or tiling is None else gemm_efficiency(view, tiling)
    peak, efficiency = dev.peak_flops[op.dtype].as_integer_ratio(), dev.compute_efficiency.as_integer_ratio()
    compute_ps = Fraction(
        op.flops * _PS_PER_SECOND * peak[1] * efficiency[1] * share.denominator,
        peak[0] * efficiency[0] * share.numerator,
    )
    dram = dram_bytes(op, view, dev)
    memory, sustained = dev.memory_bandwidth.as_integer_ratio(), dev.memory_efficiency.as_integer_ratio()
    dram_ps = Fraction(dram * _PS_PER_SECOND * memory[1] * sustained[1], memory[0] * sustained[0])
    if dev.sram is None:
        return LevelTimes(compute_ps, None, dram_ps, (("dram", dram),), share)
    sram = sram_bytes(op, view, dev, dram)
    bandwidth = dev.sram.bandwidth
    on_chip = None if bandwidth is None else bandwidth.as_integer_ratio()
    sram_ps = None if on_chip is None else Fraction(sram * _PS_PER_SECOND * on_chip[1], on_chip[0])
    return LevelTimes(compute_ps, sram_ps, dram_ps, (("dram", dram), ("sram", sram)), share)


def _price(index: int, op: compute_pb2.OperatorDesc, dev: Device) -> compute_pb2.OperatorCost:
    """The roofline cost of ``op``, which is ``ops[index]`` of its request, on ``dev``."""
    peak = dev.peak_flops.get(op.dtype)
    if peak is None:
        message = (
            f"{label(op, index)}: device {dev.name!r} cannot compute in {dtype_name(op.dtype)}; "
            f"it supports {', '.join(dev.supported_dtypes())}"
        )
        raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].dtype")
    times = level_times(op, dev)
    duration_ps = math.ceil(times.slowest_ps) + dev.launch_overhead_ps
    if duration_ps > _INT64_MAX:
        message = f"{label(op, index)}: takes {duration_ps} ps on {dev.name!r}, more than a 64-bit duration holds"
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}]")
    return compute_pb2.OperatorCost(
        duration_ps=duration_ps,
        energy_pj=(dev.tdp_w or 0) * duration_ps,
        traffic=[compute_pb2.MemoryTraffic(level=level, bytes=size) for level, size in times.traffic],
        bound=times.bound,
        basis=basis(dev),
    )


def from_section(section: BackendSection | None = None) -> RooflineCompute:
    """The backend the registry builds from the study's compute section (None: its defaults).

    It reads no key of it."""
    return RooflineCompute()
