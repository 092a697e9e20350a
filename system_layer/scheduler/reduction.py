"""What reducing received data into the local buffer costs an NPU.

Either from local memory bandwidth (two reads and a write per byte; ASTRA-sim's rounding under its preset),
or priced as an element-wise add on the study's device by the one operator pricer
(:class:`~stratasim.system_layer.operators.OperatorPricer`), once per distinct size.
Priced reductions also have an energy and are operators of the study: :meth:`ReductionCost.operator` gives
each size's descriptor and cost, for the report's energy and operator table. When NPU groups run different
devices, each NPU reduces at its own device's cost (:meth:`ReductionCost.of`).
"""

from __future__ import annotations

from collections.abc import Mapping

from stratasim.kernel import operators
from stratasim.kernel.errors import BackendError, WorkloadError
from stratasim.system_layer.collectives import astra_compat
from stratasim.system_layer.operators import OperatorPricer
from stratasim.system_layer.options import SystemOptions
from stratasim.v1 import compute_pb2

__all__ = ["ReductionCost"]


class ReductionCost:
    """``cost(size)``: picoseconds to reduce ``size`` received bytes; zero when no cost model is set.

    ``elsewhere`` holds the reduction cost of each NPU running another device (priced reductions only), and
    ``device`` names the device in the operator rows (empty: the study's one device).
    """

    def __init__(
        self,
        options: SystemOptions,
        pricer: OperatorPricer | None,
        elsewhere: Mapping[int, ReductionCost] | None = None,
        device: str = "",
    ) -> None:
        if options.reduction == "compute" and pricer is None:
            raise WorkloadError("system.reduction: 'compute' needs a compute section to price the reductions")
        self._options = options
        self._elsewhere = elsewhere or {}
        self.device = device
        self._compute = pricer if options.reduction == "compute" else None
        self._priced: dict[int, int] = {}
        self._operators: dict[int, tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorCost]] = {}
        self.costs = bool(self._compute is not None or options.local_mem_bw)
        """False when every reduction is free, so the hot path can skip asking."""
        self.priced = self._compute is not None
        """True when the compute layer prices reductions, so they are operators with an energy."""

    @property
    def uniform(self) -> bool:
        """Whether every NPU reduces at this cost (no NPU runs another device)."""
        return not self._elsewhere

    def of(self, npu: int) -> ReductionCost:
        """The reduction cost of ``npu``: its own device's."""
        return self._elsewhere.get(npu, self)

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
        op = operators.elementwise(
            [elements], dtype=dtype, flops_per_element=1, inputs=2, name="reduction", function=compute_pb2.ADD
        )
        try:
            (cost,) = self._compute.costs([op])
        except BackendError as error:
            raise BackendError(f"cannot price a reduction: {error}") from None
        self._operators[size] = (op, cost)
        self._priced[size] = cost.duration_ps
        return self._priced[size]

    def operator(self, size: int) -> tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorCost]:
        """The element-wise add reducing ``size`` bytes and its cost (``size`` must have been priced)."""
        return self._operators[size]
