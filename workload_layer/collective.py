"""A collective microbenchmark: the same collective run ``repeat`` times back to back on every NPU."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from stratasim.kernel.collective_types import COLLECTIVE_TYPES
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.schema import Bytes, Section
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import workload_pb2

__all__ = ["CollectiveWorkload"]


class CollectiveConfig(Section):
    """``workload:`` keys of ``kind: collective``; ``size`` is the whole buffer on each NPU; ``root`` is the
    root NPU of a broadcast or reduce (default: NPU 0)."""

    collective: Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce"]
    """The collective to run."""
    size: Bytes = Field(gt=0)
    """The whole buffer on each NPU (an all-gather's output, a reduce-scatter's input)."""
    repeat: int = Field(default=1, ge=1)
    """Times the collective runs, one after the other."""
    npus: int | None = Field(default=None, ge=1)
    """NPUs taking part (default: every NPU of the topology)."""
    root: int | None = Field(default=None, ge=0)
    """Root NPU of a broadcast or reduce (default: NPU 0)."""


class CollectiveWorkload:
    """Every NPU issues the collective ``repeat`` times, each after the previous one finished."""

    name = "collective"
    Config = CollectiveConfig

    def __init__(self, config: CollectiveConfig) -> None:
        self.config = config

    def npus_required(self) -> int | None:
        return self.config.npus

    def estimate(self, npus: int) -> WorkEstimate:
        """One graph shared by every NPU: ``repeat`` collectives of ``size``."""
        repeat = self.config.repeat
        return WorkEstimate(1, repeat, repeat, self.config.size, "workload.repeat")

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        if self.config.root is not None and self.config.root >= npus:
            raise WorkloadError(f"workload.root: NPU {self.config.root} does not exist; there are {npus} NPUs")
        graph = workload_pb2.ExecutionGraph()
        for index in range(self.config.repeat):
            graph.nodes.add(
                id=index,
                name=f"{self.config.collective} {index}",
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=COLLECTIVE_TYPES[self.config.collective],
                comm_bytes=self.config.size,
                ctrl_deps=[index - 1] if index else [],
                root=self.config.root,
            )
        return [graph] * npus
