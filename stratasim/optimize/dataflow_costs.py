"""The inter-chip pass's prices for a ``kind: dataflow`` study: its kernels on the study's compute device, its
collectives and sends in closed form on the study's topology.

:class:`DataflowCosts` opens the study's compute backend (closed by :meth:`DataflowCosts.close` or on leaving a
``with`` block) and prices a kernel as the engine does: the operator pricer's time for the share of its operator
one device of a TP group runs (:func:`~stratasim.workload_layer.dataflow.sharding.sharded_operator`), plus its
backward operators in training. Collectives are the system layer's closed forms
(:class:`~stratasim.optimize.first_order_groups.GroupTimer`) over the group of NPUs spanning the dimensions asked
for, with the study's algorithms, ``splits`` and endpoint delay; a ``send`` is the slowest hop from one pipeline
stage to the next. The NPUs are numbered as the dataflow workload numbers them (TP innermost, then PP, then DP), so
these prices are those of the mapping the event engine runs when the dimensions' roles follow that order.
"""

from __future__ import annotations

import itertools
import math
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING

from stratasim.kernel.errors import StrataSimError
from stratasim.optimize.first_order_groups import GroupTimer
from stratasim.optimize.inter_chip_problem import CollectiveKind, NetworkDim
from stratasim.study.compute_setup import open_pricer
from stratasim.workload_layer.dataflow.graph import Kernel, Scheme
from stratasim.workload_layer.dataflow.sharding import backward_operators, sharded_operator

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["DataflowCosts", "DataflowStudyError"]


class DataflowStudyError(StrataSimError):
    """A dataflow study the optimiser cannot map; the message names the key or figure at fault."""


class DataflowCosts:
    """The kernel and collective prices of one study (``training`` adds each kernel's backward operators)."""

    def __init__(self, study: Study, training: bool) -> None:
        if study.compute is None:
            raise DataflowStudyError(
                "compute: the optimiser prices the graph's kernels: the study needs a compute section"
            )
        if study.compute.groups:
            raise DataflowStudyError("compute.groups: the optimiser prices one device for every NPU")
        topology = study.topology_proto()
        try:
            self._timer = GroupTimer(topology, study.system)
        except ValueError as exc:
            raise DataflowStudyError(f"system: {exc}") from None
        self._dims = tuple(topology.dimensions)
        self._training = training
        self._stack = ExitStack()
        self._pricer = open_pricer(study.compute, self._stack)

    def __enter__(self) -> DataflowCosts:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the compute backend."""
        self._stack.close()

    def network_dims(self) -> tuple[NetworkDim, ...]:
        """The topology's dimensions as the inter-chip problem sees them (size, bandwidth in bytes/s, latency)."""
        return tuple(NetworkDim(d.size, float(d.bandwidth_bytes_per_s), d.latency_ps) for d in self._dims)

    def kernel_time(self, kernel: Kernel, scheme: Scheme, tp: int) -> float:
        """Picoseconds of one device's share of ``kernel`` under ``scheme`` on ``tp`` devices, forward (and
        backward in training), as the engine prices its compute nodes."""
        share = sharded_operator(kernel, scheme, tp)
        ops = (share, *backward_operators(share)) if self._training else (share,)
        return float(sum(self._pricer.durations_ps(ops)))

    def collective_time(self, kind: CollectiveKind, size: int, dims: tuple[int, ...]) -> float:
        """Picoseconds of ``kind`` on ``size`` bytes over the group spanning ``dims`` (from NPU 0), or of a send
        of ``size`` bytes between consecutive pipeline stages laid along ``dims`` (the slowest pair)."""
        grid = self._timer.grid
        if kind == "send":
            stride = grid.stride(min(dims))
            stages = math.prod(self._dims[d].size for d in dims)
            return float(max(self._timer.send_ps(size, s * stride, (s + 1) * stride) for s in range(stages - 1)))
        lines = [range(size_) if d in dims else range(1) for d, size_ in enumerate(grid.sizes)]
        group = tuple(sorted(grid.npu_at(coords) for coords in itertools.product(*lines)))
        return float(self._timer.collective_ps(kind, size, group))
