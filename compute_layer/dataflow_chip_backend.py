"""The ``dataflow_chip`` compute backend: operators priced kernel by kernel on DFModel's chips
(:mod:`stratasim.compute_layer.dataflow_chips`), so that ``stratasim run`` simulates any workload on an SN30, an
SN10, a WSE-2, or DFModel's H100 and TPU v4.

``compute: {backend: dataflow_chip, device: sn30, memory: ddr4}``: ``device`` names a preset chip
(:data:`~stratasim.compute_layer.dataflow_chips.DATAFLOW_CHIPS`), ``memory`` its DRAM (``ddr4`` or ``hbm3``; absent:
the chip's own), ``chip`` any of its fields replaced key by key (``{tiles: 320}``). Each operator runs alone on all
the chip's tiles and takes::

    duration = max(kernel_seconds(op, tiles), op.bytes / dram_bandwidth)

the chip model's quantised compute time (the one DFModel's passes use) or its bytes through DRAM, whichever is
longer: exactly what the inter-chip pass prices a kernel at
(:func:`~stratasim.optimize.two_pass_system.kernel_by_kernel_time`). The engine runs kernels one by one, so on a
``dataflow`` chip this is its kernel-by-kernel execution; fusion into streaming partitions is the intra-chip pass's
(``stratasim optimize``). The model has one throughput for every dtype (DFModel's), no launch overhead and no power
model (``energy_pj`` is 0); ``describe`` gives the DRAM's capacity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stratasim.compute_layer.dataflow_chips import DATAFLOW_CHIPS, MEMORIES, DataflowChip, dataflow_chip
from stratasim.compute_layer.requests import Rejected, adjusts, described, label
from stratasim.kernel.operators import signature
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["DataflowChipCompute", "from_section", "chip_price_ps"]

_PS = 1e12
_INT64_MAX = 2**63 - 1


def chip_price_ps(op: compute_pb2.OperatorDesc, chip: DataflowChip) -> tuple[int, bool]:
    """``op`` alone on all of ``chip``'s tiles, in whole picoseconds (rounded up), and whether its compute (not its
    DRAM traffic) sets the time."""
    compute_s = chip.kernel_seconds(op, chip.tiles)
    memory_s = op.bytes / chip.dram_bandwidth
    return math.ceil(max(compute_s, memory_s) * _PS), compute_s >= memory_s


class DataflowChipCompute:
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` pricing operators on DFModel's chips (see the module),
    their DRAM ``memory`` replaced when given; results cached by (chip, operator signature)."""

    name = "dataflow_chip"

    def __init__(self, memory: str | None = None, chip: Mapping[str, object] | None = None) -> None:
        if memory is not None and memory not in MEMORIES:
            raise ValueError(f"compute.memory: unknown memory {memory!r}; expected one of {', '.join(MEMORIES)}")
        self._memory = memory
        self._overrides = dict(chip or {})
        self._cache: dict[tuple[str, bytes], compute_pb2.OperatorCost] = {}

    def devices(self) -> list[str]:
        """The preset chips' names, sorted."""
        return sorted(DATAFLOW_CHIPS)

    def chip(self, name: str) -> DataflowChip:
        """The chip ``name`` with this backend's memory and field overrides; ValueError naming the presets when
        there is none, or the override at fault."""
        return dataflow_chip(name, self._memory, **self._overrides)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of ``request`` on its chip; an unknown chip or a calibration is the error."""
        if adjusts(request):
            message = "the dataflow_chip backend takes no calibration: its chips are DFModel's models"
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=message, where="calibration")
            return compute_pb2.EstimateResponse(error=error)
        try:
            chip = self.chip(request.device)
        except ValueError as exc:
            error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=str(exc), where="device")
            return compute_pb2.EstimateResponse(error=error)
        try:
            costs = [self._cached(index, op, chip) for index, op in enumerate(request.ops)]
        except Rejected as rejected:
            return compute_pb2.EstimateResponse(error=rejected.error)
        return compute_pb2.EstimateResponse(costs=costs)

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each chip's memory capacity: its DRAM's."""

        def facts(name: str) -> compute_pb2.DeviceFacts:
            chip = self.chip(name)
            said = f"DFModel's chip model: {chip.tiles} tiles of {chip.lanes} x {chip.stages}, {chip.source}"
            return compute_pb2.DeviceFacts(device=name, memory_capacity_bytes=chip.dram_capacity, calibration=said)

        return described(request, facts)

    def close(self) -> None:
        """Drop the cache; the backend is not used afterwards."""
        self._cache.clear()

    def _cached(self, index: int, op: compute_pb2.OperatorDesc, chip: DataflowChip) -> compute_pb2.OperatorCost:
        key = (chip.name, signature(op))
        cost = self._cache.get(key)
        if cost is None:
            cost = self._cache[key] = _cost(index, op, chip)
        return cost


def _cost(index: int, op: compute_pb2.OperatorDesc, chip: DataflowChip) -> compute_pb2.OperatorCost:
    duration_ps, compute_bound = chip_price_ps(op, chip)
    if duration_ps > _INT64_MAX:
        message = f"{label(op, index)}: takes {duration_ps} ps on {chip.name!r}, more than a 64-bit duration holds"
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}]")
    return compute_pb2.OperatorCost(
        duration_ps=duration_ps,
        traffic=[compute_pb2.MemoryTraffic(level="dram", bytes=op.bytes)],
        bound=compute_pb2.COMPUTE if compute_bound else compute_pb2.MEMORY,
        basis=compute_pb2.DATASHEET,
    )


def from_section(section: BackendSection | None = None) -> DataflowChipCompute:
    """The backend the registry builds from the study's compute section: its ``memory`` (None: each chip's own
    DRAM) and ``chip`` (fields replaced key by key) keys."""
    if section is None:
        return DataflowChipCompute()
    return DataflowChipCompute(section.memory, section.chip)
