"""Coordinates on a multi-dimensional topology: NPU ids vary fastest in dimension 0.

Shared by the network layer (which dimension a message travels in) and the system layer (who an NPU's
peers are in each phase of a collective).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stratasim.kernel.errors import TopologyError
from stratasim.v1 import network_pb2

__all__ = ["Grid", "validate_topology"]


@dataclass(frozen=True)
class Grid:
    """The shape of a multi-dimensional topology: ``sizes[d]`` NPUs along dimension d."""

    sizes: tuple[int, ...]

    @classmethod
    def of(cls, topology: network_pb2.Topology) -> Grid:
        return cls(tuple(dim.size for dim in topology.dimensions))

    @property
    def npus(self) -> int:
        total = 1
        for size in self.sizes:
            total *= size
        return total

    def stride(self, dim: int) -> int:
        """Distance in NPU id between neighbours along ``dim``."""
        stride = 1
        for size in self.sizes[:dim]:
            stride *= size
        return stride

    def coordinate(self, npu: int, dim: int) -> int:
        return (npu // self.stride(dim)) % self.sizes[dim]

    def coords(self, npu: int) -> tuple[int, ...]:
        """``npu``'s coordinate along every dimension."""
        return tuple(self.coordinate(npu, dim) for dim in range(len(self.sizes)))

    def npu_at(self, coords: list[int] | tuple[int, ...]) -> int:
        """The NPU at ``coords`` (one coordinate per dimension)."""
        return sum(c * self.stride(dim) for dim, c in enumerate(coords))

    def dims_between(self, a: int, b: int) -> tuple[int, ...]:
        """The dimensions along which NPUs ``a`` and ``b`` differ: those a message between them crosses."""
        return tuple(dim for dim in range(len(self.sizes)) if self.coordinate(a, dim) != self.coordinate(b, dim))

    def line(self, npu: int, dim: int) -> tuple[int, ...]:
        """The NPUs that share every coordinate with ``npu`` except along ``dim``, in coordinate order."""
        stride = self.stride(dim)
        base = npu - self.coordinate(npu, dim) * stride
        return tuple(base + i * stride for i in range(self.sizes[dim]))


def validate_topology(topology: network_pb2.Topology) -> None:
    """Raise :class:`TopologyError` naming the first dimension whose description is impossible."""
    if not topology.dimensions:
        raise TopologyError("topology.dimensions: the topology has no dimensions")
    for index, dim in enumerate(topology.dimensions):
        where = f"topology.dimensions[{index}]"
        if dim.kind == network_pb2.Dimension.KIND_UNSPECIFIED:
            raise TopologyError(f"{where}.kind: unspecified; expected ring, fully_connected or switch")
        if dim.size < 1:
            raise TopologyError(f"{where}.size: must be at least 1, got {dim.size}")
        if not (dim.bandwidth_bytes_per_s > 0 and math.isfinite(dim.bandwidth_bytes_per_s)):
            raise TopologyError(f"{where}.bandwidth: must be positive, got {dim.bandwidth_bytes_per_s} B/s")
        if dim.latency_ps < 0:
            raise TopologyError(f"{where}.latency: must not be negative, got {dim.latency_ps} ps")
