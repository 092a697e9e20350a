"""The roofline compute backend: an operator takes as long as its FLOPs or its DRAM traffic, whichever is slower.

For an operator with F FLOPs and B bytes of ``dtype`` on a device::

    compute_ps  = F · 10^12 / (peak[dtype] · compute_efficiency)
    memory_ps   = B · 10^12 / (memory_bandwidth · memory_efficiency)
    duration_ps = ceil(max(compute_ps, memory_ps)) + launch_overhead_ps

computed with exact rational arithmetic, so every run and every platform gives the same picoseconds.
"""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Iterable
from fractions import Fraction

from compute_layer.devices import PRESETS, Device, catalog, device
from stratasim.errors import BackendError
from stratasim.operators import dtype_name, signature
from stratasim.v1 import common_pb2, compute_pb2

__all__ = ["RooflineCompute"]

_PS_PER_SECOND = 10**12
# OperatorCost.duration_ps is an int64.
_INT64_MAX = 2**63 - 1


class RooflineCompute:
    """A :class:`~stratasim.contracts.ComputeBackend` pricing each operator on the roofline of a device.

    ``energy_pj`` is the device's TDP times the duration (1 W · 1 ps = 1 pJ): an upper bound, since a real
    operator seldom draws full board power. ``traffic`` is one ``"dram"`` entry with the operator's bytes;
    ``bound`` is ``COMPUTE`` when compute time is at least memory time (so also for an empty operator, which
    costs only the launch overhead), else ``MEMORY``.

    ``devices`` replaces the preset devices (:data:`~compute_layer.devices.PRESETS`) with others. Results are
    cached per instance by (device, operator signature), so repeated operators are priced once.
    """

    name = "roofline"

    def __init__(self, devices: Iterable[Device] | None = None) -> None:
        self._devices = PRESETS if devices is None else catalog(devices)
        self._cache: dict[tuple[Device, bytes], compute_pb2.OperatorCost] = {}

    def devices(self) -> list[str]:
        """Names of the devices this instance can price, sorted."""
        return sorted(self._devices)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of ``request``; an unknown device or unsupported dtype comes back as ``error``."""
        try:
            dev = device(request.device, self._devices)
            if request.HasField("calibration"):
                dev = _calibrated(dev, request.calibration)
        except (BackendError, ValueError) as exc:
            where = "calibration" if isinstance(exc, ValueError) else "device"
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=str(exc), where=where)
            return compute_pb2.EstimateResponse(error=error)
        try:
            costs = [self._cached(index, op, dev) for index, op in enumerate(request.ops)]
        except _Rejected as rejected:
            return compute_pb2.EstimateResponse(error=rejected.error)
        return compute_pb2.EstimateResponse(costs=costs)

    def close(self) -> None:
        """Drop the cache; the backend is not used afterwards."""
        self._cache.clear()

    def _cached(self, index: int, op: compute_pb2.OperatorDesc, dev: Device) -> compute_pb2.OperatorCost:
        key = (dev, signature(op))
        cost = self._cache.get(key)
        if cost is None:
            cost = self._cache[key] = _price(index, op, dev)
        return cost


def _calibrated(dev: Device, calibration: compute_pb2.Calibration) -> Device:
    """``dev`` with the calibration's non-zero fields in place of its own (ValueError if out of range)."""
    return replace(
        dev,
        compute_efficiency=calibration.compute_efficiency or dev.compute_efficiency,
        memory_efficiency=calibration.memory_efficiency or dev.memory_efficiency,
        launch_overhead_ps=calibration.launch_overhead_ps or dev.launch_overhead_ps,
    )


class _Rejected(Exception):
    """Raised by :func:`_price` for an operator the device cannot price; carries the wire error."""

    def __init__(self, code: common_pb2.Error.Code.ValueType, message: str, where: str) -> None:
        super().__init__(message)
        self.error = common_pb2.Error(code=code, message=message, where=where)


def _price(index: int, op: compute_pb2.OperatorDesc, dev: Device) -> compute_pb2.OperatorCost:
    """The roofline cost of ``op``, which is ``ops[index]`` of its request, on ``dev``."""
    label = f"ops[{index}]" + (f" ({op.name!r})" if op.name else "")
    peak = dev.peak_flops.get(op.dtype)
    if peak is None:
        message = (
            f"{label}: device {dev.name!r} cannot compute in {dtype_name(op.dtype)}; "
            f"it supports {', '.join(dev.supported_dtypes())}"
        )
        raise _Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].dtype")
    # Fraction(float) is the float's exact binary value, so no rounding happens before the final ceil.
    compute_ps = Fraction(op.flops * _PS_PER_SECOND) / (Fraction(peak) * Fraction(dev.compute_efficiency))
    memory_ps = Fraction(op.bytes * _PS_PER_SECOND) / (
        Fraction(dev.memory_bandwidth) * Fraction(dev.memory_efficiency)
    )
    duration_ps = math.ceil(max(compute_ps, memory_ps)) + dev.launch_overhead_ps
    if duration_ps > _INT64_MAX:
        message = f"{label}: takes {duration_ps} ps on {dev.name!r}, more than a 64-bit duration holds"
        raise _Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}]")
    return compute_pb2.OperatorCost(
        duration_ps=duration_ps,
        energy_pj=dev.tdp_w * duration_ps,
        traffic=[compute_pb2.MemoryTraffic(level="dram", bytes=op.bytes)],
        bound=compute_pb2.COMPUTE if compute_ps >= memory_ps else compute_pb2.MEMORY,
    )

