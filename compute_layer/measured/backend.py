"""The ``measured`` compute backend: operators on H100 and H200 priced by the operator-level model fitted to
measured profiles (:mod:`stratasim.compute_layer.measured`), not by a roofline.

It prices GEMMs (batched or not), fused attention forward and backward, decode attention and element-wise or
normalisation operators in bf16 or fp16 (the profiles measured bf16; fp16 runs the same tensor-core and memory
paths); any other kind or dtype is the contract's UNSUPPORTED error naming it. The devices are the ``h100`` and
``h200`` presets (:data:`~stratasim.compute_layer.device_presets.PRESETS`): their memory capacity, prices and L2 come
from there. A device fitted by ``stratasim profile`` (``compute.device: {file: NAME.device.yaml}``) arrives with
each request as a ``measured_device`` (:mod:`~stratasim.compute_layer.measured.fitted_device`) and prices on the
structure of the preset its fit assumed. A request's calibration is ignored: the model is fitted to measurements.
Under ``compute.launch: eager`` each operator costs at least the host's time to issue its kernels
(:mod:`~stratasim.compute_layer.measured.launch`); the bound stays the modelled one.
Durations are the modelled seconds rounded up to a picosecond; energy is the preset's TDP times the duration (an
upper bound, as the roofline's); the basis is ``FITTED_TO_OPERATORS``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from stratasim.compute_layer.device_presets import device
from stratasim.compute_layer.devices import catalog
from stratasim.compute_layer.measured.fitted_device import FittedDevice, fitted_device, shipped_devices
from stratasim.compute_layer.measured.launch import Launch, eager_seconds
from stratasim.compute_layer.measured.parameters import FittedModel, load_parameters
from stratasim.compute_layer.measured.pricing import price_shape
from stratasim.compute_layer.requests import (
    DescriptionCache,
    Rejected,
    checked_shape,
    described,
    device_facts,
    element_bytes,
    label,
)
from stratasim.kernel.errors import BackendError
from stratasim.kernel.operators import dtype_name, signature
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["MeasuredCompute", "from_section"]

_KINDS = (compute_pb2.GEMM, compute_pb2.ATTENTION, compute_pb2.ELEMENTWISE)
_DTYPES = (compute_pb2.BF16, compute_pb2.FP16)
_PS_PER_SECOND = 10**12


class MeasuredCompute:
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` pricing with the fitted operator-level model (see the
    module), its kernels launched as ``launch`` says (default: graph). A request carrying a ``measured_device``
    prices on that fit instead of looking its name up. Results are cached per instance by (device, operator
    signature)."""

    name = "measured"

    def __init__(self, model: FittedModel | None = None, launch: Launch | None = None) -> None:
        self._launch = launch or Launch()
        self._shipped = shipped_devices(load_parameters() if model is None else model)
        self._devices = catalog(entry.device for entry in self._shipped.values())
        self._described: DescriptionCache[compute_pb2.MeasuredDevice, FittedDevice] = DescriptionCache(fitted_device)
        self._cache: dict[tuple[FittedDevice, bytes], compute_pb2.OperatorCost] = {}

    def devices(self) -> list[str]:
        """The devices the shipped model was fitted for, sorted."""
        return sorted(self._devices)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator; an unknown device, a malformed fit, eager launch without a host time, or an
        operator kind or dtype without a model, is ``error``."""
        described = request.measured_device if request.HasField("measured_device") else None
        where = "device" if described is None else "measured_device"
        try:
            fitted = self._fitted(request.device, described)
            where = "launch"
            host_s = self._launch.host_seconds(fitted.eager_launch_s, fitted.device.name)
        except (BackendError, ValueError) as exc:
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=str(exc), where=where)
            return compute_pb2.EstimateResponse(error=error)
        try:
            costs = [self._cached(index, op, fitted, host_s) for index, op in enumerate(request.ops)]
        except Rejected as rejected:
            return compute_pb2.EstimateResponse(error=rejected.error)
        return compute_pb2.EstimateResponse(costs=costs)

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each device's memory capacity and prices (its structure preset's, unless the fit gives a capacity; a
        fitted device's prices are unknown), what its model was fitted to and, launched eagerly, at what host time."""
        given = {message.name: message for message in request.measured_devices}

        def facts(name: str) -> compute_pb2.DeviceFacts:
            fitted = self._fitted(name, given.get(name))
            found = fitted.device
            launch = self._launch.described(self._launch.host_seconds(fitted.eager_launch_s, found.name))
            return device_facts(name, found, fitted.calibration + launch, absorbed=False)  # operators timed alone

        return described(request, facts)

    def close(self) -> None:
        """Drop the caches; the backend is not used afterwards."""
        self._cache.clear()
        self._described.clear()

    def _fitted(self, name: str, description: compute_pb2.MeasuredDevice | None) -> FittedDevice:
        """The fit ``description`` gives (checked once per distinct description), else the shipped device ``name``."""
        if description is None:
            return self._shipped[device(name, self._devices).name]
        return self._described.get(name, description)

    def _cached(
        self, index: int, op: compute_pb2.OperatorDesc, fitted: FittedDevice, host_s: float | None
    ) -> compute_pb2.OperatorCost:
        key = (fitted, signature(op))
        cost = self._cache.get(key)
        if cost is None:
            cost = self._cache[key] = self._price(index, op, fitted, host_s)
        return cost

    def _price(
        self, index: int, op: compute_pb2.OperatorDesc, fitted: FittedDevice, host_s: float | None
    ) -> compute_pb2.OperatorCost:
        """``op`` on ``fitted``; launched eagerly (``host_s``: the host's issue time per kernel), at least its
        kernels' issue time."""
        dev = fitted.device
        shape = checked_shape(op, index, self.name, _KINDS)
        if op.dtype not in _DTYPES:
            message = (
                f"{label(op, index)}: the measured backend has no model for {dtype_name(op.dtype)} on {dev.name!r}; "
                f"it prices {' and '.join(dtype_name(dtype) for dtype in _DTYPES)}"
            )
            raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].dtype")
        priced = price_shape(op, shape, fitted.classes, dev, element_bytes(op, index))
        seconds = priced.seconds if host_s is None else eager_seconds(priced.seconds, priced.kernels, host_s)
        duration_ps = math.ceil(seconds * _PS_PER_SECOND)
        return compute_pb2.OperatorCost(
            duration_ps=duration_ps,
            energy_pj=(dev.tdp_w or 0) * duration_ps,
            traffic=[compute_pb2.MemoryTraffic(level="dram", bytes=priced.bytes)],
            bound=priced.bound,
            basis=compute_pb2.FITTED_TO_OPERATORS,
        )


def from_section(section: BackendSection | None = None) -> MeasuredCompute:
    """The backend the registry builds from the study's compute section (None: its defaults): it reads ``launch``."""
    return MeasuredCompute(launch=Launch.of(None if section is None else section.launch))
