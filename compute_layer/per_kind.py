"""Fidelity per operator kind: one compute backend per kind of operator, within one run.

:class:`PerKindCompute` is a :class:`~stratasim.kernel.contracts.ComputeBackend` made of others — e.g. a Timeloop-style
model for GEMMs and a roofline for everything else. Each request is split by operator kind, each part goes to
its backend as one batch (in the order the operators came), and the costs are put back in request order; an
error from any part is the request's error, naming the backend it came from. The parts may be in-process
backends or gRPC clients alike, so a split run gives the same numbers in-process and spawned.

It takes built backends and is not in the registry: the study (``compute.per_kind``) builds it. Its device
facts are the routed backends' together: the least memory capacity any of them knows, since one NPU must hold
its memory whichever model prices its operators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.operators import kind_of
from stratasim.v1 import common_pb2, compute_pb2

__all__ = ["KIND_NAMES", "PerKindCompute", "kind_name"]

KIND_NAMES: tuple[str, ...] = tuple(
    name.lower()
    for name in compute_pb2.OperatorKind.keys()  # noqa: SIM118 (an enum wrapper, not a dict)
    if name != "OPERATOR_KIND_UNSPECIFIED"
)
"""The operator kinds a route may name (``gemm``, ``conv``, ``elementwise``, ``attention``), besides ``*`` for every other kind."""


def kind_name(kind: compute_pb2.OperatorKind.ValueType) -> str:
    """``gemm`` for ``compute_pb2.GEMM``; ``*`` for a kind that has no name."""
    return compute_pb2.OperatorKind.Name(kind).lower() if kind in compute_pb2.OperatorKind.values() else "*"


class PerKindCompute:
    """Routes each operator to ``routes[its kind name]``, else to ``routes["*"]`` (which must be present), priced
    on ``devices[that kind]`` when the route has a device of its own (backends name their devices differently: a
    Timeloop-style array for GEMMs beside a roofline GPU), else on the request's.

    ``devices()`` are those every routed backend without a device of its own has. Closing closes every distinct
    backend once.
    """

    name = "per_kind"

    def __init__(self, routes: Mapping[str, ComputeBackend], devices: Mapping[str, str] | None = None) -> None:
        if "*" not in routes:
            raise ValueError("per-kind routes need a '*' entry for the kinds they do not name")
        unknown = [kind for kind in routes if kind != "*" and kind not in KIND_NAMES]
        if unknown:
            raise ValueError(f"unknown operator kind(s) {', '.join(unknown)}; expected {', '.join(KIND_NAMES)} or *")
        self._routes = dict(routes)
        self._devices = dict(devices or {})  # kind -> the device its route prices on, when not the request's
        self._backends = list({id(backend): backend for backend in routes.values()}.values())

    def _pairs(self) -> list[tuple[ComputeBackend, str | None]]:
        """Each distinct (backend, its own device or None for the request's) the routes use."""
        pairs = {
            (id(backend), self._devices.get(kind)): (backend, self._devices.get(kind))
            for kind, backend in self._routes.items()
        }
        return list(pairs.values())

    def devices(self) -> list[str]:
        """The devices every backend pricing on the request's device can price (compared case-insensitively),
        sorted: routes with a device of their own do not narrow it."""
        common: set[str] | None = None
        for backend, own in self._pairs():
            if own is None:
                names = {device.lower() for device in backend.devices()}
                common = names if common is None else common & names
        return sorted(common or ())

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price each kind's operators with its backend, one batch per backend, costs in request order."""
        parts: dict[tuple[int, str], list[int]] = {}  # (backend id, device) -> positions of the ops it prices
        chosen: dict[tuple[int, str], ComputeBackend] = {}
        for index, op in enumerate(request.ops):
            route = kind_name(kind_of(op))
            route = route if route in self._routes else "*"
            backend = self._routes[route]
            key = (id(backend), self._devices.get(route, request.device))
            parts.setdefault(key, []).append(index)
            chosen[key] = backend
        costs: list[compute_pb2.OperatorCost | None] = [None] * len(request.ops)
        for key, positions in parts.items():
            backend = chosen[key]
            part = compute_pb2.EstimateRequest(device=key[1], ops=[request.ops[i] for i in positions])
            if request.HasField("calibration"):
                part.calibration.CopyFrom(request.calibration)
            response = backend.estimate(part)
            if response.HasField("error"):
                return _renumbered(response.error, backend.name, positions)
            for position, cost in zip(positions, response.costs):
                costs[position] = cost
        return compute_pb2.EstimateResponse(costs=[cost for cost in costs if cost is not None])

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each device's facts from every routed backend: the least memory capacity any of them knows, else
        unknown with every backend's reason; an error from any of them is the response's, naming it."""
        answers: list[tuple[str, Sequence[compute_pb2.DeviceFacts]]] = []
        for backend, own in self._pairs():
            asked = request if own is None else compute_pb2.DescribeRequest(devices=[own] * len(request.devices))
            response = backend.describe(asked)
            if response.HasField("error"):
                error = common_pb2.Error()
                error.CopyFrom(response.error)
                error.message = f"{backend.name}: {error.message}"
                return compute_pb2.DescribeResponse(error=error)
            answers.append((backend.name, response.devices))
        merged = [_merged(name, answers, index) for index, name in enumerate(request.devices)]
        return compute_pb2.DescribeResponse(devices=merged)

    def close(self) -> None:
        """Close every routed backend."""
        for backend in self._backends:
            backend.close()


def _merged(
    device: str, answers: Sequence[tuple[str, Sequence[compute_pb2.DeviceFacts]]], index: int
) -> compute_pb2.DeviceFacts:
    """One device's facts from each backend's answer (``facts[index]``): the least known capacity, else why not;
    the backends' efficiency models, each named when they differ (one not calibrated leaves the whole empty)."""
    ours = [(name, facts[index]) for name, facts in answers]
    statements = {fact.calibration for _, fact in ours}
    calibration = "" if "" in statements else "; ".join(f"{name}: {fact.calibration}" for name, fact in ours)
    if len(statements) == 1:
        calibration = statements.pop()
    known = [fact.memory_capacity_bytes for _, fact in ours if fact.HasField("memory_capacity_bytes")]
    if known:
        return compute_pb2.DeviceFacts(device=device, memory_capacity_bytes=min(known), calibration=calibration)
    reasons = "; ".join(f"{name}: {fact.memory_capacity_unknown}" for name, fact in ours)
    return compute_pb2.DeviceFacts(device=device, memory_capacity_unknown=reasons, calibration=calibration)


def _renumbered(error: common_pb2.Error, backend: str, positions: list[int]) -> compute_pb2.EstimateResponse:
    """A part's error with its ``ops[i]`` numbers turned back into the request's, and the backend named."""
    message, where = error.message, error.where
    for local in sorted(range(len(positions)), reverse=True):  # ops[12] before ops[1]
        message = message.replace(f"ops[{local}]", f"ops[#{positions[local]}]")
        where = where.replace(f"ops[{local}]", f"ops[#{positions[local]}]")
    renumbered = common_pb2.Error()
    renumbered.CopyFrom(error)
    renumbered.message = f"{backend}: " + message.replace("ops[#", "ops[")
    renumbered.where = where.replace("ops[#", "ops[")
    return compute_pb2.EstimateResponse(error=renumbered)
