"""The part of a ComputeBackend every adapter shares: device check, per-instance cache, errors on the wire.

Subclasses customise it by setting ``name``, ``tool`` and ``extra`` and overriding :meth:`ToolBackend.devices`,
:meth:`ToolBackend._device` (parse a device name), :meth:`ToolBackend._load` (import the simulator) and
:meth:`ToolBackend._price` (run it on one layer). Nothing is raised to the caller: a bad device, an operator
the simulator cannot take, a missing package or the simulator's own failure come back as
``EstimateResponse.error`` with one message naming the operator and the remedy.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from stratasim.adapters._tool import ToolFailure, layer_of
from stratasim.compute_layer.requests import Rejected, adjusts, described, label, unknown_capacity
from stratasim.kernel.operator_shapes import ConvShape, GemmShape
from stratasim.kernel.operators import signature
from stratasim.v1 import common_pb2, compute_pb2

__all__ = ["ToolBackend"]

Device = TypeVar("Device", bound=Hashable)


class ToolBackend(Generic[Device]):
    """A compute backend running a third-party simulator once per distinct (device, operator)."""

    name = "tool"
    tool = "the simulator"
    extra = "tool"

    def __init__(self) -> None:
        self._cache: dict[tuple[Device, bytes], compute_pb2.OperatorCost] = {}
        self._lock = threading.Lock()  # the simulators redirect process-wide output: one run at a time

    def devices(self) -> list[str]:
        """Names of the devices offered, sorted."""
        raise NotImplementedError

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of ``request``; anything that goes wrong comes back as ``error``."""
        try:
            device = self._device(request.device)
            if adjusts(request):
                message = f"the {self.name} backend takes no calibration; {self.tool} models the device as it is"
                raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, "calibration")
            costs = [self._cached(index, op, device) for index, op in enumerate(request.ops)]
        except Rejected as rejected:
            return compute_pb2.EstimateResponse(error=rejected.error)
        return compute_pb2.EstimateResponse(costs=costs)

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each device's facts: its memory capacity is unknown, the simulator modelling on-chip buffers only."""

        def facts(name: str) -> compute_pb2.DeviceFacts:
            self._device(name)
            return unknown_capacity(name, f"{self.tool} models an accelerator's on-chip buffers, not its memory")

        return described(request, facts)

    def close(self) -> None:
        """Drop the cache; the backend is not used afterwards."""
        self._cache.clear()

    def _device(self, name: str) -> Device:
        """The device called ``name``; :class:`Rejected` (``where="device"``) if there is none."""
        raise NotImplementedError

    def _load(self) -> Any:
        """The imported simulator; :class:`Rejected` naming the extra to install if it cannot be used."""
        raise NotImplementedError

    def _price(
        self, tool: Any, layer: GemmShape | ConvShape, device: Device, op: compute_pb2.OperatorDesc, index: int
    ) -> compute_pb2.OperatorCost:
        """Run ``tool`` on ``layer`` (``op`` is ``ops[index]``); may raise :class:`Rejected` or :class:`ToolFailure`."""
        raise NotImplementedError

    def _unknown_device(self, name: str, pattern: str = "") -> Rejected:
        known = ", ".join(self.devices()) + (f" (and any {pattern})" if pattern else "")
        message = f"unknown device {name!r} for the {self.name} backend; known devices: {known}"
        return Rejected(common_pb2.Error.INVALID_ARGUMENT, message, "device")

    def _cached(self, index: int, op: compute_pb2.OperatorDesc, device: Device) -> compute_pb2.OperatorCost:
        key = (device, signature(op))
        cost = self._cache.get(key)
        if cost is not None:
            return cost
        layer = layer_of(op, index, self.name)
        tool = self._load()
        try:
            with self._lock:
                cost = self._price(tool, layer, device, op, index)
        except ToolFailure as exc:
            message = f"{label(op, index)}: {self.tool} failed on this operator: {exc}"
            raise Rejected(common_pb2.Error.INTERNAL, message, f"ops[{index}]") from None
        self._cache[key] = cost
        return cost
