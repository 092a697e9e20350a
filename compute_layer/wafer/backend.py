"""The ``wafer`` compute backend: operators on PALM-style tiled / wafer-scale accelerators.

GEMMs (batched too), convolutions and element-wise operators (their element count, with ``flops`` and ``bytes``
filled), as :func:`~stratasim.compute_layer.requests.checked_shape` decodes them, are priced by
:func:`~stratasim.compute_layer.wafer.model.plan`: the fastest split over the wafer's cores, PALM's SRAM strategy for
each core's share, and the DRAM traffic through the contended edge channels and NoC. Fused attention is priced as
the batched GEMMs its kernel runs, scaled by its causal share (:mod:`stratasim.compute_layer.fused_attention`).

``traffic`` lists ``"dram"`` (every used core's Algorithm 1 bytes), ``"noc"`` (those bytes times the mesh hops
they travel to the edge) and ``"sram"`` (each core's operands read or written once: a lower bound). ``bound`` is
``COMPUTE`` when the cores set the time, ``MEMORY`` when a DRAM channel does and ``NETWORK`` when a NoC link
does. PALM has no energy model; ``energy_pj`` is the FLOPs and the bytes of every level priced by the wafer's
:class:`~stratasim.compute_layer.wafer.accelerator.WaferEnergy` (Horowitz's 45 nm figures by default). The basis is
``DATASHEET``: an analytical model of a described wafer, nothing measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from stratasim.compute_layer.fused_attention import priced_as_products
from stratasim.compute_layer.requests import (
    Rejected,
    adjusts,
    checked_shape,
    described,
    element_bytes,
    label,
    unknown_capacity,
)
from stratasim.compute_layer.wafer.accelerator import PRESETS, Wafer, catalog, wafer
from stratasim.compute_layer.wafer.model import Plan, plan
from stratasim.compute_layer.wafer.split import Conv, Elementwise, Gemm, Shape
from stratasim.compute_layer.wafer.wafer_wire import wafer_from_message
from stratasim.kernel.errors import BackendError
from stratasim.kernel.operator_shapes import AttentionShape, ConvShape, GemmShape
from stratasim.kernel.operators import dtype_name, signature
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["from_section", "WaferCompute", "shape_of"]

_INT64_MAX = 2**63 - 1


def shape_of(op: compute_pb2.OperatorDesc, index: int = 0) -> Shape:
    """What the splitter needs of ``op`` (``ops[index]`` of its request); raises ``Rejected`` when it is unusable
    (a fused attention is several operators: see :func:`~stratasim.compute_layer.fused_attention.priced_as_products`)."""
    shape = checked_shape(op, index, "wafer")
    element = element_bytes(op, index)
    if isinstance(shape, AttentionShape):
        message = f"{label(op, index)}: a fused attention runs several products, not one split"
        raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].shape")
    if isinstance(shape, GemmShape):
        return Gemm(shape.batch, shape.m, shape.k, shape.n, element)
    if isinstance(shape, ConvShape):
        return Conv(shape.n, shape.k, shape.c, shape.p, shape.q, shape.r, shape.s, shape.stride, element)
    return Elementwise(shape.elements, op.flops, op.bytes, element)


class WaferCompute:
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` pricing operators on tiled / wafer-scale accelerators.

    ``wafers`` replaces the presets (:data:`~stratasim.compute_layer.wafer.accelerator.PRESETS`, plus any
    ``palm-wafer-<X>x<Y>``); a request carrying a ``wafer_device`` prices on that description instead of looking
    its name up. Results are cached per instance by (wafer, operator signature). A calibration changing a figure is refused: describe
    the wafer's real parameters instead.
    """

    name = "wafer"

    def __init__(self, wafers: Iterable[Wafer] | None = None) -> None:
        self._table = None if wafers is None else catalog(wafers)
        self._cache: dict[tuple[Wafer, bytes], compute_pb2.OperatorCost] = {}

    def devices(self) -> list[str]:
        """Names of the wafers this instance offers, sorted."""
        return sorted(PRESETS if self._table is None else self._table)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of ``request``; an unknown device or operator comes back as ``error``."""
        where = "wafer_device" if request.HasField("wafer_device") else "device"
        try:
            if where == "device":
                chosen = wafer(request.device, self._table)
            else:
                chosen = wafer_from_message(request.wafer_device)
        except (BackendError, ValueError) as exc:
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=str(exc), where=where)
            return compute_pb2.EstimateResponse(error=error)
        if adjusts(request):
            message = "the wafer backend takes no calibration; describe the wafer's real parameters instead"
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=message, where="calibration")
            return compute_pb2.EstimateResponse(error=error)
        try:
            costs = [self._cached(index, op, chosen) for index, op in enumerate(request.ops)]
        except Rejected as rejected:
            return compute_pb2.EstimateResponse(error=rejected.error)
        return compute_pb2.EstimateResponse(costs=costs)

    def best_plan(self, device: str, op: compute_pb2.OperatorDesc) -> Plan:
        """The plan (split, SRAM strategy, times) this backend prices ``op`` by on ``device``."""
        try:
            return _plan(0, op, wafer(device, self._table))
        except Rejected as rejected:
            raise BackendError(rejected.error.message) from None

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each wafer's facts: its memory capacity is unknown, PALM modelling the edge DRAM's bandwidth only (its
        SRAM holds tiles of operators, not what an NPU keeps); a described wafer is checked like a preset."""

        given = {message.name: message for message in request.wafer_devices}

        def facts(name: str) -> compute_pb2.DeviceFacts:
            if name in given:
                wafer_from_message(given[name])
            else:
                wafer(name, self._table)
            return unknown_capacity(name, "the wafer model gives edge DRAM a bandwidth, not a capacity")

        return described(request, facts)

    def close(self) -> None:
        """Drop the cache; the backend is not used afterwards."""
        self._cache.clear()

    def _cached(self, index: int, op: compute_pb2.OperatorDesc, chosen: Wafer) -> compute_pb2.OperatorCost:
        key = (chosen, signature(op))
        cost = self._cache.get(key)
        if cost is None:
            shape = checked_shape(op, index, "wafer")
            if isinstance(shape, AttentionShape):
                cost = priced_as_products(op, shape, lambda product: self._cached(index, product, chosen))
            else:
                cost = _cost(index, op, chosen)
            self._cache[key] = cost
        return cost


def _plan(index: int, op: compute_pb2.OperatorDesc, chosen: Wafer) -> Plan:
    shape = shape_of(op, index)
    peak = chosen.core_peak(op.dtype)
    if peak is None:
        message = (
            f"{label(op, index)}: wafer {chosen.name!r} cannot compute in {dtype_name(op.dtype)}; "
            f"it supports {', '.join(chosen.supported_dtypes())}"
        )
        raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].dtype")
    return plan(chosen, shape, peak)


def _cost(index: int, op: compute_pb2.OperatorDesc, chosen: Wafer) -> compute_pb2.OperatorCost:
    best = _plan(index, op, chosen)
    if best.duration_ps > _INT64_MAX:
        message = f"{label(op, index)}: takes {best.duration_ps} ps on {chosen.name!r}, more than a 64-bit duration"
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}]")
    work, edge = best.work, best.edge
    if best.compute_ps >= edge.memory_ps:
        bound = compute_pb2.COMPUTE
    else:
        bound = compute_pb2.MEMORY if edge.channel_ps >= edge.link_ps else compute_pb2.NETWORK
    sram = best.cores * (work.inputs + work.weights + work.outputs)
    dram = best.cores * best.allocation.dram_bytes
    traffic = [
        compute_pb2.MemoryTraffic(level="sram", bytes=sram),
        compute_pb2.MemoryTraffic(level="dram", bytes=dram),
        compute_pb2.MemoryTraffic(level="noc", bytes=edge.byte_hops),
    ]
    rates = chosen.energy
    energy_pj = (
        op.flops * rates.flop_pj
        + sram * rates.sram_byte_pj
        + dram * rates.dram_byte_pj
        + edge.byte_hops * rates.noc_byte_hop_pj
    )
    return compute_pb2.OperatorCost(
        duration_ps=best.duration_ps, energy_pj=energy_pj, traffic=traffic, bound=bound, basis=compute_pb2.DATASHEET
    )


def from_section(section: BackendSection | None = None) -> WaferCompute:
    """The backend the registry builds from the study's compute section (None: its defaults).

    It reads no key of it."""
    return WaferCompute()
