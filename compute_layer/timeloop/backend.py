"""The ``timeloop`` compute backend: each operator priced by the best mapping the mapper finds.

GEMMs (batched too), convolutions and element-wise operators are read from the wire by
:func:`~stratasim.compute_layer.requests.checked_shape`; fused attention is priced as the batched GEMMs its kernel
runs, scaled by its causal share (:mod:`stratasim.compute_layer.fused_attention`).

    duration_ps = ceil(cycles · 10^12 / clock_hz)

with exact integers; ``energy_pj`` is the mapping's energy; ``traffic`` lists the bytes read and written at
every shared level (words times the operator's element size); ``bound`` is ``COMPUTE`` when the PE array sets
the cycles and ``MEMORY`` when a level's bandwidth does; the basis is ``DATASHEET`` (an analytical model of an
accelerator described by its architecture, nothing measured).
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
from stratasim.compute_layer.timeloop.accelerator import Accelerator, catalog
from stratasim.compute_layer.timeloop.accelerator_presets import PRESETS, accelerator
from stratasim.compute_layer.timeloop.accelerator_wire import accelerator_from_message
from stratasim.compute_layer.timeloop.analysis import Evaluation
from stratasim.compute_layer.timeloop.mapper import OBJECTIVES, factoring_steps, search
from stratasim.compute_layer.timeloop.mapping import MappingError
from stratasim.compute_layer.timeloop.problem import Problem, conv2d, elementwise, gemm
from stratasim.kernel.errors import BackendError
from stratasim.kernel.operator_shapes import AttentionShape, ConvShape, GemmShape
from stratasim.kernel.operators import signature
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["from_section", "TimeloopCompute", "problem_of"]

_PS_PER_SECOND = 10**12
_INT64_MAX = 2**63 - 1


def problem_of(op: compute_pb2.OperatorDesc, index: int = 0) -> Problem:
    """The loop nest of ``op`` (``ops[index]`` of its request); raises ``Rejected`` when it has none (a fused
    attention is several: see :func:`~stratasim.compute_layer.fused_attention.priced_as_products`)."""
    shape = checked_shape(op, index, "timeloop")
    if isinstance(shape, AttentionShape):
        message = f"{label(op, index)}: a fused attention runs several products, not one loop nest"
        raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].shape")
    if isinstance(shape, GemmShape):
        return gemm(shape.m, shape.k, shape.n, batch=shape.batch)
    if isinstance(shape, ConvShape):
        return conv2d(shape.n, shape.k, shape.c, shape.p, shape.q, shape.r, shape.s, stride=shape.stride)
    elements = shape.elements
    size = element_bytes(op, index)
    inputs = max(0, op.bytes // (elements * size) - 1) if op.bytes else 1
    points = elements * max(1, inputs)
    return elementwise(elements, inputs=inputs, ops_per_point=max(1, -(-op.flops // points)))


def _extents(op: compute_pb2.OperatorDesc, index: int) -> list[int]:
    """The dimension extents the mapper factors to price ``ops[index]`` (a fused attention's products')."""
    shape = checked_shape(op, index, "timeloop")
    if isinstance(shape, AttentionShape):
        problems = [gemm(p.m, p.k, p.n, batch=p.batch) for p in shape.products()]
    else:
        problems = [problem_of(op, index)]
    return [problem.size(dim) for problem in problems for dim in problem.names]


class TimeloopCompute:
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` pricing operators by searching mappings (Timeloop-style).

    ``accelerators`` replaces the presets (:data:`~stratasim.compute_layer.timeloop.accelerator_presets.PRESETS`, plus any
    ``systolic-<R>x<C>-<os|ws|is>``); a request carrying a ``timeloop_accelerator`` prices on that description
    instead of looking its name up. ``objective`` is ``latency`` (default), ``energy`` or ``edp``; ``samples``
    and ``seed`` drive the random search of large mapping spaces. Results are cached per instance by
    (accelerator, operator signature). A calibration changing a figure is refused: calibrate the accelerator itself.
    """

    name = "timeloop"

    def __init__(
        self,
        accelerators: Iterable[Accelerator] | None = None,
        objective: str = "latency",
        samples: int = 300,
        seed: int = 0,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}")
        self._table = None if accelerators is None else catalog(accelerators)
        self._objective, self._samples, self._seed = objective, samples, seed
        self._cache: dict[tuple[Accelerator, bytes], compute_pb2.OperatorCost] = {}

    def devices(self) -> list[str]:
        """Names of the accelerators this instance offers, sorted."""
        return sorted(PRESETS if self._table is None else self._table)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of ``request``; an unknown device or operator comes back as ``error``."""
        where = "timeloop_accelerator" if request.HasField("timeloop_accelerator") else "device"
        try:
            if where == "device":
                acc = accelerator(request.device, self._table)
            else:
                acc = accelerator_from_message(request.timeloop_accelerator)
        except (BackendError, ValueError) as exc:
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=str(exc), where=where)
            return compute_pb2.EstimateResponse(error=error)
        if adjusts(request):
            message = "the timeloop backend takes no calibration; describe the accelerator's real parameters instead"
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=message, where="calibration")
            return compute_pb2.EstimateResponse(error=error)
        try:
            costs = [self._cached(index, op, acc) for index, op in enumerate(request.ops)]
        except Rejected as rejected:
            return compute_pb2.EstimateResponse(error=rejected.error)
        return compute_pb2.EstimateResponse(costs=costs)

    def work(self, request: compute_pb2.EstimateRequest) -> list[int]:
        """Each operator's trial divisions (:func:`~stratasim.compute_layer.timeloop.mapper.factoring_steps`) over
        the dimension extents no earlier operator of ``request`` has (the mapper's factorings are cached), plus one;
        an operator it would refuse counts one (:meth:`estimate` says why)."""
        seen: set[int] = set()
        steps = []
        for index, op in enumerate(request.ops):
            try:
                new = set(_extents(op, index)) - seen
            except Rejected:
                new = set()
            seen |= new
            steps.append(1 + sum(factoring_steps(extent) for extent in new))
        return steps

    def best_mapping(self, device: str, op: compute_pb2.OperatorDesc) -> Evaluation:
        """The mapping (with its evaluation) this backend prices ``op`` by on ``device``."""
        try:
            problem = problem_of(op)
        except Rejected as rejected:
            raise BackendError(rejected.error.message) from None
        acc = accelerator(device, self._table)
        return search(problem, acc, self._objective, samples=self._samples, seed=self._seed)

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each accelerator's facts: its memory capacity is unknown, its outermost level being unbounded."""

        given = {message.name: message for message in request.timeloop_accelerators}

        def facts(name: str) -> compute_pb2.DeviceFacts:
            acc = accelerator_from_message(given[name]) if name in given else accelerator(name, self._table)
            outermost = acc.levels[-1].name
            return unknown_capacity(name, f"the timeloop model's outermost storage level ({outermost!r}) is unbounded")

        return described(request, facts)

    def close(self) -> None:
        """Drop the cache; the backend is not used afterwards."""
        self._cache.clear()

    def _cached(self, index: int, op: compute_pb2.OperatorDesc, acc: Accelerator) -> compute_pb2.OperatorCost:
        key = (acc, signature(op))
        cost = self._cache.get(key)
        if cost is None:
            shape = checked_shape(op, index, "timeloop")
            if isinstance(shape, AttentionShape):
                cost = priced_as_products(op, shape, lambda product: self._cached(index, product, acc))
            else:
                cost = self._price(index, op, acc)
            self._cache[key] = cost
        return cost

    def _price(self, index: int, op: compute_pb2.OperatorDesc, acc: Accelerator) -> compute_pb2.OperatorCost:
        problem = problem_of(op, index)
        size, where = element_bytes(op, index), label(op, index)
        try:
            best = search(problem, acc, self._objective, samples=self._samples, seed=self._seed)
        except MappingError as exc:
            raise Rejected(common_pb2.Error.INVALID_ARGUMENT, f"{where}: {exc}", f"ops[{index}]") from None
        duration_ps = -(-best.cycles * _PS_PER_SECOND // acc.clock_hz)
        if duration_ps > _INT64_MAX:
            message = f"{where}: takes {duration_ps} ps on {acc.name!r}, more than a 64-bit duration holds"
            raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}]")
        traffic = [
            compute_pb2.MemoryTraffic(level=level.name, bytes=(level.reads + level.writes) * size)
            for level in best.levels[1:]
        ]
        return compute_pb2.OperatorCost(
            duration_ps=duration_ps,
            energy_pj=best.energy_pj,
            traffic=traffic,
            bound=compute_pb2.COMPUTE if best.bound == "compute" else compute_pb2.MEMORY,
            basis=compute_pb2.DATASHEET,
        )


def from_section(section: BackendSection | None = None) -> TimeloopCompute:
    """The backend the registry builds from the study's compute section (None: its defaults).

    It reads its mapper's ``objective``."""
    if section is None or section.objective is None:
        return TimeloopCompute()
    return TimeloopCompute(objective=section.objective)
