"""The system layer's policies: collective algorithms, chunking, scheduling and endpoint costs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = ["Preset", "Scheduling", "SystemOptions", "ALGORITHMS"]

# Algorithms a dimension can run, by the name a study uses.
ALGORITHMS = ("ring", "direct", "ring_bidirectional", "halving_doubling", "double_binary_tree")


class Scheduling(str, Enum):
    """Which collective's chunks the dispatcher issues first when several are ready."""

    LIFO = "lifo"
    FIFO = "fifo"


class Preset(str, Enum):
    """Whose semantics the system layer follows: StrataSim's own, or ASTRA-sim 2.x's analytical ones."""

    DEFAULT = "default"
    ASTRA_COMPAT = "astra_compat"


@dataclass(frozen=True)
class SystemOptions:
    """How collectives run.

    ``algorithms`` maps a collective name (``all_reduce``...) to one algorithm per topology dimension; the key
    ``"*"`` is the fallback for collectives not named. ``splits`` chunks per collective; at most
    ``active_chunks`` chunks run at once in each phase; ``endpoint_delay_ps`` is paid by an NPU each time a
    message arrives before it acts on it. With ``local_mem_bandwidth`` (bytes/s, an integer) an NPU also
    spends reading two operands and writing the result of every byte it reduces; without it reduction is free.
    ``local_bw_aware`` runs a multi-dimensional all-reduce in the enhanced order (reduce-scatter up the
    dimensions, all-gather down) instead of an all-reduce per dimension; ``preset`` picks the semantics.
    ``aggregate`` lets the engine simulate NPUs that are equivalent by symmetry once (same results).
    ``queues_per_dim`` logical scheduling queues serve each dimension (odd ones run rings the other way);
    ``logical_dims``, when given, is the logical grid collectives run on instead of the physical topology.
    ``reduce_on_compute`` prices reductions on the compute layer (an element-wise add of ``reduction_dtype``
    elements) instead of from ``local_mem_bandwidth``.
    """

    algorithms: dict[str, tuple[str, ...]] = field(default_factory=lambda: {"*": ("ring",)})
    splits: int = 1
    active_chunks: int = 1
    scheduling: Scheduling = Scheduling.LIFO
    endpoint_delay_ps: int = 0
    local_mem_bandwidth: int | None = None
    local_bw_aware: bool = False
    preset: Preset = Preset.DEFAULT
    aggregate: bool = True
    queues_per_dim: int = 1
    reduce_on_compute: bool = False
    reduction_dtype: str = "bf16"
    logical_dims: tuple[int, ...] | None = None
    record_trace: bool = False

    def algorithm_for(self, collective: str, dimension: int) -> str:
        """The algorithm ``collective`` runs on ``dimension``; a short list repeats its last entry."""
        names = self.algorithms.get(collective) or self.algorithms.get("*") or ("ring",)
        return names[min(dimension, len(names) - 1)]
