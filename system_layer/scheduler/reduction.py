"""What reducing received data into the local buffer costs an NPU.

Either from local memory bandwidth (two reads and a write per byte; ASTRA-sim's rounding under its preset),
or priced by the compute layer as an element-wise add on the study's device, asked once per distinct size.
Priced reductions also have an energy and are operators of the study: :meth:`ReductionCost.operator` gives
each size's descriptor and cost, for the report's energy and operator table.
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError, WorkloadError
from stratasim.system_layer.collectives import astra_compat
from stratasim.system_layer.options import SystemOptions
from stratasim.v1 import compute_pb2

__all__ = ["ReductionCost"]


class ReductionCost:
    """``cost(size)``: picoseconds to reduce ``size`` received bytes; zero when no cost model is set."""

    def __init__(
        self,
        options: SystemOptions,
        compute: ComputeBackend | None,
        device: str,
        calibration: compute_pb2.Calibration | None = None,
    ) -> None:
        if options.reduction == "compute" and compute is None:
            raise WorkloadError("system.reduction: 'compute' needs a compute section to price the reductions")
        self._options = options
        self._compute = compute if options.reduction == "compute" else None
        self._device = device
        self._calibration = calibration
        self._priced: dict[int, int] = {}
        self._operators: dict[int, tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorCost]] = {}
        self.costs = bool(self._compute is not None or options.local_mem_bw)
        """False when every reduction is free, so the hot path can skip asking."""
        self.priced = self._compute is not None
        """True when the compute layer prices reductions, so they are operators with an energy."""

    def __call__(self, size: int) -> int:
        if self._compute is not None:
            return self._priced[size] if size in self._priced else self._price(size)
        bandwidth = self._options.local_mem_bw
        if not bandwidth:
            return 0
        if self._options.semantics.reduction_in_whole_ns:
            return astra_compat.reduction_ps(size, bandwidth)
        return -(-3 * size * 10**12 // bandwidth)

    def _price(self, size: int) -> int:
        assert self._compute is not None
        dtype = operators.parse_dtype(self._options.reduction_dtype)
        elements = max(1, -(-size // operators.dtype_bytes(dtype)))
        op = operators.elementwise([elements], dtype=dtype, flops_per_element=1, inputs=2, name="reduction")
        request = compute_pb2.EstimateRequest(device=self._device, ops=[op], calibration=self._calibration)
        response = self._compute.estimate(request)
        if response.HasField("error"):
            raise BackendError(
                f"compute backend {self._compute.name!r} cannot price a reduction: {response.error.message}"
            )
        self._operators[size] = (op, response.costs[0])
        self._priced[size] = response.costs[0].duration_ps
        return self._priced[size]

    def operator(self, size: int) -> tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorCost]:
        """The element-wise add reducing ``size`` bytes and its cost (``size`` must have been priced)."""
        return self._operators[size]
