"""The inter-chip mapping problem (DFModel Sec. IV): a dataflow graph, a multi-dimensional network and the choices.

A mapping assigns each network dimension whole to tensor (``tp``), pipeline (``pp``) or data (``dp``) parallelism
(DFModel IV.C: a dimension is never subdivided), picks each kernel's sharding scheme and cuts the graph into
pipeline stages. :func:`assignments` lists the valid dimension assignments of a problem.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from stratasim.kernel.errors import StrataSimError
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Scheme

__all__ = [
    "Role",
    "CollectiveKind",
    "KernelTime",
    "CollectiveTime",
    "NetworkDim",
    "InterChipProblem",
    "InterChipError",
    "DimAssignment",
    "assignments",
]

Role: TypeAlias = Literal["tp", "pp", "dp"]
ROLES: tuple[Role, ...] = ("tp", "pp", "dp")
CollectiveKind: TypeAlias = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send"]

KernelTime: TypeAlias = Callable[[Kernel, Scheme, int], float]
"""``kernel_time(kernel, scheme, tp)``: picoseconds of one graph execution's work (forward and, in training,
backward) of ``kernel`` on one device when ``tp`` devices share it under ``scheme``. It may raise
:class:`~stratasim.workload_layer.dataflow.graph.GraphError` for a scheme the kernel cannot run on ``tp`` devices
(for example heads that do not divide): the mapping then never pairs that scheme with that ``tp``."""

CollectiveTime: TypeAlias = Callable[[CollectiveKind, int, tuple[int, ...]], float]
"""``collective_time(kind, bytes, dims)``: picoseconds of one collective over the group spanning network
dimensions ``dims`` (indices, innermost first). ``bytes`` is the whole tensor: what an all-reduce sums, what an
all-gather assembles; for ``send`` it is what one device sends to its peer in the next pipeline stage."""


class InterChipError(StrataSimError):
    """An inter-chip problem that is malformed, or has no mapping (the message says which constraint binds)."""


@dataclass(frozen=True)
class NetworkDim:
    """One network dimension: ``size`` devices, ``bandwidth`` in bytes/s, ``latency_ps`` per message."""

    size: int
    bandwidth: float
    latency_ps: int = 0


@dataclass(frozen=True)
class InterChipProblem:
    """Everything the inter-chip pass needs; the two time functions are injected so the formulation stays pure.

    ``graph`` is one micro-batch (``graph.repeat`` identical layers in sequence, ``graph.training`` adds the
    backward pass); ``micro_batches`` per iteration are shared among the data-parallel replicas.
    ``memory_bytes`` is each device's capacity. A device holds its weights times ``bytes_per_weight_byte`` (None:
    8 in training, Megatron's 16 bytes per bf16 parameter with gradients and Adam's state; 1 in inference) and
    the activations of the micro-batches in flight. ``overlap`` True is DFModel's eq. 7 (a stage's compute,
    layout conversions and point-to-point sends all overlap across micro-batches); False serialises compute and
    conversions per micro-batch, as an event simulation of blocking collectives runs them, with the sends still
    overlapped. ``boundary_bytes`` is the activation one repetition of the graph hands the next (None: the largest
    tensor a source kernel produces). ``roles`` fixes each dimension's role (None: the pass chooses them), to
    find the best sharding and pipeline cut of one given TP/PP/DP split.
    """

    graph: DataflowGraph
    dims: tuple[NetworkDim, ...]
    memory_bytes: int
    kernel_time: KernelTime
    collective_time: CollectiveTime
    micro_batches: int = 1
    max_stages: int = 64
    overlap: bool = True
    bytes_per_weight_byte: float | None = None
    boundary_bytes: int | None = None
    roles: tuple[Role, ...] | None = None

    def __post_init__(self) -> None:
        problems = [f"network dimension {i}: {what}" for i, dim in enumerate(self.dims) for what in _dim_problems(dim)]
        for name, value in (("memory_bytes", self.memory_bytes), ("micro_batches", self.micro_batches)):
            if value < 1:
                problems.append(f"{name} must be at least 1, not {value}")
        if self.max_stages < 1:
            problems.append(f"max_stages must be at least 1, not {self.max_stages}")
        if self.bytes_per_weight_byte is not None and not self.bytes_per_weight_byte >= 0:
            problems.append(f"bytes_per_weight_byte must be at least 0, not {self.bytes_per_weight_byte}")
        if self.boundary_bytes is not None and self.boundary_bytes < 0:
            problems.append(f"boundary_bytes must be at least 0, not {self.boundary_bytes}")
        if self.roles is not None and (len(self.roles) != len(self.dims) or not set(self.roles) <= set(ROLES)):
            problems.append(
                f"roles must give each of the {len(self.dims)} dimensions one of tp, pp, dp, not {self.roles}"
            )
        if problems:
            raise InterChipError(f"inter-chip problem for graph {self.graph.name!r}: " + "; ".join(problems))

    @property
    def weight_factor(self) -> float:
        """Bytes a device holds per byte of weights it keeps."""
        if self.bytes_per_weight_byte is not None:
            return self.bytes_per_weight_byte
        return 8.0 if self.graph.training else 1.0

    @property
    def boundary(self) -> int:
        """Bytes one repetition of the graph passes to the next (what a pipeline stage sends when stages split
        the repetitions)."""
        if self.boundary_bytes is not None:
            return self.boundary_bytes
        fed = {t.target for t in self.graph.tensors}
        sources = {k.name for k in self.graph.kernels if k.name not in fed}
        return max((t.bytes for t in self.graph.tensors if t.source in sources), default=0)


def _dim_problems(dim: NetworkDim) -> list[str]:
    problems = []
    if dim.size < 1:
        problems.append(f"size must be at least 1, not {dim.size}")
    if not (dim.bandwidth > 0 and math.isfinite(dim.bandwidth)):
        problems.append(f"bandwidth must be a positive number of bytes/s, not {dim.bandwidth}")
    if dim.latency_ps < 0:
        problems.append(f"latency_ps must be at least 0, not {dim.latency_ps}")
    return problems


@dataclass(frozen=True)
class DimAssignment:
    """Each network dimension's role, and the group sizes they give (tp x pp x dp = every device)."""

    roles: tuple[Role, ...]
    sizes: tuple[int, ...]

    def dims(self, role: Role) -> tuple[int, ...]:
        """The indices of the dimensions given to ``role`` (innermost first)."""
        return tuple(i for i, r in enumerate(self.roles) if r == role)

    def size(self, role: Role) -> int:
        """How many devices a group of ``role`` spans."""
        return math.prod(self.sizes[i] for i in self.dims(role))

    @property
    def tp(self) -> int:
        return self.size("tp")

    @property
    def pp(self) -> int:
        return self.size("pp")

    @property
    def dp(self) -> int:
        return self.size("dp")


def assignments(problem: InterChipProblem) -> tuple[DimAssignment, ...]:
    """Every valid assignment of the dimensions to TP/PP/DP: ``pp`` at most ``max_stages`` (and, when stages split
    the graph's repetitions, dividing ``repeat``; else at most the number of kernels); ``dp`` dividing
    ``micro_batches``. All-TP is always valid.

    Equal adjacent dimensions are interchangeable (every group spans the same sequence of dimension descriptions
    whichever of them it takes), so assignments that only permute roles among them are listed once: with roles in
    the order tp, pp, dp along each run of equal dimensions.
    """
    sizes = tuple(d.size for d in problem.dims)
    if problem.roles is not None:
        fixed = DimAssignment(problem.roles, sizes)
        why = _invalid(problem, fixed)
        if why:
            raise InterChipError(
                f"graph {problem.graph.name!r}: the roles {', '.join(problem.roles)} are not valid: {why}"
            )
        return (fixed,)
    valid = []
    for roles in itertools.product(ROLES, repeat=len(sizes)):
        if any(
            problem.dims[i] == problem.dims[i + 1] and ROLES.index(roles[i]) > ROLES.index(roles[i + 1])
            for i in range(len(roles) - 1)
        ):
            continue
        option = DimAssignment(roles, sizes)
        if not _invalid(problem, option):
            valid.append(option)
    return tuple(valid)


def _invalid(problem: InterChipProblem, option: DimAssignment) -> str:
    """Why ``option`` is not a valid assignment ("" when it is)."""
    graph = problem.graph
    if option.pp > problem.max_stages:
        return f"pp = {option.pp} is more than max_stages = {problem.max_stages}"
    if graph.repeat > 1 and graph.repeat % option.pp:
        return f"pp = {option.pp} does not divide the graph's {graph.repeat} repetitions"
    if graph.repeat == 1 and option.pp > len(graph.kernels):
        return f"pp = {option.pp} is more than the graph's {len(graph.kernels)} kernels"
    if problem.micro_batches % option.dp:
        return f"dp = {option.dp} does not divide micro_batches = {problem.micro_batches}"
    return ""
