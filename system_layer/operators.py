"""The one operator pricer: every operator's time comes from here, asked of the compute backend once per signature.

The engine (:mod:`stratasim.system_layer.engine.pricing`), serving (:mod:`stratasim.system_layer.serving`) and a
trace export price operators through an :class:`OperatorPricer`. It takes operator descriptors, asks the compute
backend in one request for those it has not priced yet, on one device and calibration, and caches each cost by
the operator's signature (everything but its name, :func:`signature`), so equal operators are priced once. A
compute model (a roofline, a model fitted to measurements, a remote backend) plugs in as the backend it asks.
"""

from __future__ import annotations

from collections.abc import Iterable

from stratasim.kernel.contracts import ComputeBackend, SizedWork
from stratasim.kernel.errors import BackendError
from stratasim.kernel.work_limit import MAX_WORK, excess_work
from stratasim.v1 import compute_pb2

__all__ = ["OperatorPricer", "PricingError", "signature"]


class PricingError(BackendError):
    """The compute backend could not price an operator; ``reason`` is the backend's own words."""

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(f"compute backend {label!r}: {reason}")
        self.reason = reason


def signature(op: compute_pb2.OperatorDesc) -> bytes:
    """What determines an operator's cost: everything but its name, so equal operators are priced once."""
    unnamed = compute_pb2.OperatorDesc()
    unnamed.CopyFrom(op)
    unnamed.ClearField("name")
    return unnamed.SerializeToString(deterministic=True)


class OperatorPricer:
    """Prices operators on ``device`` (with ``calibration``, if any) with ``compute``, caching every cost by
    signature; ``label`` names the backend in errors (default: its ``name``)."""

    def __init__(
        self,
        compute: ComputeBackend,
        device: str,
        calibration: compute_pb2.Calibration | None = None,
        label: str | None = None,
    ) -> None:
        self._compute, self._device, self._calibration = compute, device, calibration
        self._label = compute.name if label is None else label
        self._costs: dict[bytes, compute_pb2.OperatorCost] = {}

    def costs(self, ops: Iterable[compute_pb2.OperatorDesc]) -> list[compute_pb2.OperatorCost]:
        """The cost of each of ``ops``, in order; those not priced yet are asked for in one request."""
        listed = list(ops)
        keys = [signature(op) for op in listed]
        self.costs_by_signature(dict(zip(keys, listed)))
        return [self._costs[key] for key in keys]

    def costs_by_signature(self, ops: dict[bytes, compute_pb2.OperatorDesc]) -> dict[bytes, compute_pb2.OperatorCost]:
        """The cost of each operator of ``ops`` (keyed by its :func:`signature`, which the caller computed), those
        not priced yet asked for in one request, in the mapping's order."""
        new = {key: op for key, op in ops.items() if key not in self._costs}
        if new:
            request = compute_pb2.EstimateRequest(
                device=self._device, ops=list(new.values()), calibration=self._calibration
            )
            self._check_work(request)
            response = self._compute.estimate(request)
            if response.HasField("error"):
                raise PricingError(self._label, response.error.message)
            self._costs.update(zip(new, response.costs, strict=True))
        return {key: self._costs[key] for key in ops}

    def _check_work(self, request: compute_pb2.EstimateRequest) -> None:
        """Refuse, before any work, a request beyond :data:`~stratasim.kernel.work_limit.MAX_WORK` steps of a
        backend that counts its work beforehand (as a server does with its ``--max-work``)."""
        if isinstance(self._compute, SizedWork):
            said = f"the limit of {MAX_WORK:,} for one request"
            refusal = excess_work(
                self._compute.work(request), request.ops, MAX_WORK, said, "check the operator's sizes"
            )
            if refusal is not None:
                raise PricingError(self._label, refusal)

    def durations_ps(self, ops: Iterable[compute_pb2.OperatorDesc]) -> list[int]:
        """The picoseconds each of ``ops`` takes, in order (:meth:`costs`)."""
        return [cost.duration_ps for cost in self.costs(ops)]

    @property
    def distinct(self) -> int:
        """Distinct operators priced so far."""
        return len(self._costs)
