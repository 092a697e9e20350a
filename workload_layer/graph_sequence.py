"""A sequence of per-NPU execution graphs built on first access, so the engine pays only for the graphs it
reads (one per class of symmetric NPUs when it aggregates them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import overload

from stratasim.v1 import workload_pb2

__all__ = ["GraphSequence"]


class GraphSequence(Sequence[workload_pb2.ExecutionGraph]):
    """``count`` graphs, graph ``i`` being ``build(i)``, built once when first read."""

    def __init__(self, count: int, build: Callable[[int], workload_pb2.ExecutionGraph]) -> None:
        self._count = count
        self._build = build
        self._built: dict[int, workload_pb2.ExecutionGraph] = {}

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> workload_pb2.ExecutionGraph: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[workload_pb2.ExecutionGraph]: ...

    def __getitem__(self, index: int | slice) -> workload_pb2.ExecutionGraph | Sequence[workload_pb2.ExecutionGraph]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(f"graph {index} of {self._count}")
        index %= self._count
        graph = self._built.get(index)
        if graph is None:
            graph = self._built[index] = self._build(index)
        return graph
