"""The cost of every choice of the inter-chip pass under one dimension assignment, and the estimate of a mapping.

:class:`Prices` memoises the two injected time functions for one problem. :class:`AssignmentCosts` gives, for one
:class:`~stratasim.optimize.inter_chip_problem.DimAssignment`, the per-kernel and per-tensor terms of DFModel's
per-stage times (Sec. IV.B: compute, layout conversions, point-to-point sends), the once-per-iteration gradient
reductions and the memory a device holds. Both the MILP's coefficients and :func:`estimate` (the exact value of a
mapping, which exhaustive enumeration ranks) are built from these same terms, so the two cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeAlias

from stratasim.optimize.inter_chip_problem import CollectiveKind, DimAssignment, InterChipProblem
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError, Scheme, Tensor
from stratasim.workload_layer.dataflow.layouts import Conversion, conversion, gradient_conversion, weight_gradient_sum

__all__ = ["Prices", "AssignmentCosts", "LayoutCollective", "Mapping", "StageEstimate", "estimate"]

Direction: TypeAlias = Literal["forward", "backward"]


class Prices:
    """The problem's kernel and collective times, each asked once (a scheme the kernel cannot run on a group
    size costs infinity)."""

    def __init__(self, problem: InterChipProblem) -> None:
        self.problem = problem
        self._kernel: dict[tuple[int, int, int], float] = {}
        self._collective: dict[tuple[str, int, tuple[int, ...]], float] = {}

    def kernel(self, kernel: int, scheme: int, tp: int) -> float:
        """Picoseconds of kernel number ``kernel`` under its scheme number ``scheme`` on ``tp`` devices."""
        key = (kernel, scheme, tp)
        if key not in self._kernel:
            k = self.problem.graph.kernels[kernel]
            try:
                self._kernel[key] = float(self.problem.kernel_time(k, k.schemes[scheme], tp))
            except GraphError:
                self._kernel[key] = math.inf
        return self._kernel[key]

    def collective(self, kind: CollectiveKind, size: int, dims: tuple[int, ...]) -> float:
        """Picoseconds of a collective of ``size`` bytes over ``dims``; 0 when the group is one device."""
        group = math.prod(self.problem.dims[d].size for d in dims)
        if group <= 1 or size <= 0:
            return 0.0
        key = (kind, size, dims)
        if key not in self._collective:
            self._collective[key] = float(self.problem.collective_time(kind, size, dims))
        return self._collective[key]


@dataclass(frozen=True)
class LayoutCollective:
    """A collective a layout conversion runs per graph execution: on ``tensor``, in which pass, of what kind."""

    tensor: str
    direction: Direction
    kind: Conversion
    bytes: int


class AssignmentCosts:
    """The cost terms of one dimension assignment; kernels and schemes are numbered as in the graph."""

    def __init__(self, prices: Prices, option: DimAssignment) -> None:
        problem = prices.problem
        self.prices, self.option, self.problem = prices, option, problem
        self.tp, self.pp, self.dp = option.tp, option.pp, option.dp
        self.tp_dims, self.pp_dims, self.dp_dims = option.dims("tp"), option.dims("pp"), option.dims("dp")
        repeat = problem.graph.repeat
        self.repeats_per_stage = repeat // self.pp if repeat > 1 else 1
        self.micro_batches = problem.micro_batches // self.dp
        self.stage_count = 1 if repeat > 1 else self.pp
        """Stages the formulation distinguishes: when stages split repetitions, all are stage 0's copies."""

    def compute(self, kernel: int, scheme: int) -> float:
        """DFModel's h_c: one execution of the kernel on one device."""
        return self.prices.kernel(kernel, scheme, self.tp)

    def layout_collectives(self, tensor: Tensor, source: Scheme, target: Scheme) -> list[LayoutCollective]:
        """The conversions a tensor needs between its producer's and consumer's schemes (DFModel's C_j)."""
        found = []
        forward = conversion(source.output, target.inputs[tensor.slot])
        if forward is not None:
            found.append(LayoutCollective(tensor.name, "forward", forward, tensor.bytes))
        backward = gradient_conversion(source, target, tensor.slot) if self.problem.graph.training else None
        if backward is not None:
            found.append(LayoutCollective(tensor.name, "backward", backward, tensor.bytes))
        return found

    def conversion(self, tensor: Tensor, source: Scheme, target: Scheme) -> float:
        """DFModel's h_m (eq. 6): the conversions' time over the TP dimensions."""
        collectives = self.layout_collectives(tensor, source, target)
        return sum((self.prices.collective(c.kind, c.bytes, self.tp_dims) for c in collectives), 0.0)

    def send(self, size: int) -> float:
        """DFModel's h_p: a tensor crossing a stage boundary, each TP device sending its share."""
        return self.prices.collective("send", -(-size // self.tp), self.pp_dims)

    def held(self, kernel: int, scheme: int) -> int:
        """Weight bytes one device keeps (divided among the TP group when the scheme splits them)."""
        k = self.problem.graph.kernels[kernel]
        return -(-k.weight_bytes // self.tp) if k.schemes[scheme].weights_split else k.weight_bytes

    def weight_sum(self, kernel: int, scheme: int) -> float:
        """Once per iteration in training: the sum over TP of the weight gradients of a kernel whose work is
        split while each device holds all its weights."""
        k = self.problem.graph.kernels[kernel]
        if not (self.problem.graph.training and weight_gradient_sum(k.schemes[scheme])):
            return 0.0
        return self.prices.collective("all_reduce", k.weight_bytes, self.tp_dims)

    def dp_reduce(self, kernel: int, scheme: int) -> float:
        """Once per iteration in training: the DP all-reduce of the kernel's weight gradients a device holds (one
        all-reduce per kernel: no bucketing)."""
        if not self.problem.graph.training:
            return 0.0
        return self.prices.collective("all_reduce", self.held(kernel, scheme), self.dp_dims)

    def gradient(self, kernel: int, scheme: int) -> float:
        """Both gradient reductions of a kernel, which a stage runs after its last backward pass."""
        return self.weight_sum(kernel, scheme) + self.dp_reduce(kernel, scheme)

    def in_flight(self, stage: int) -> int:
        """Micro-batches whose activations stage ``stage`` keeps (1F1B: pp - stage in training, capped by the
        micro-batches a replica runs; one in inference)."""
        if not self.problem.graph.training:
            return 1
        return min(self.pp - stage, self.micro_batches)

    def memory(self, kernel: int, scheme: int, stage: int) -> float:
        """Bytes a device of stage ``stage`` holds for one copy of the kernel: its weights' share with their
        optimizer state, and its output tensors' share for every micro-batch in flight."""
        name = self.problem.graph.kernels[kernel].name
        produced = sum(-(-t.bytes // self.tp) for t in self.problem.graph.outputs_of(name))
        return self.held(kernel, scheme) * self.problem.weight_factor + produced * self.in_flight(stage)

    def stage_time(self, compute: float, network: float, p2p: float) -> float:
        """A stage's time per micro-batch from its three terms (eq. 7, or compute and network serialised)."""
        if self.problem.overlap:
            return max(compute, network, p2p)
        return max(compute + network, p2p)

    def iteration(self, stages: tuple[StageEstimate, ...]) -> float:
        """The pipeline's fill, steady state and drain at the slowest stage's pace, then the slowest stage's
        gradient reductions (every stage reduces its own weights at once)."""
        slowest = max(stage.time_ps for stage in stages)
        exposed = max(stage.weight_sum_ps + stage.dp_ps for stage in stages)
        return (self.micro_batches + self.pp - 1) * slowest + exposed


@dataclass(frozen=True)
class Mapping:
    """A mapping: each dimension's role, each kernel's scheme and stage (numbered as in the graph; when stages
    split the repetitions every stage runs the whole graph and ``stages`` are all 0)."""

    option: DimAssignment
    schemes: tuple[int, ...]
    stages: tuple[int, ...]


@dataclass(frozen=True)
class StageEstimate:
    """One pipeline stage's terms: per micro-batch ``compute_ps``, ``conversion_ps`` and ``p2p_ps`` (each
    ``repeats`` times the graph's when stages split repetitions), the ``time_ps`` they give, the once-per-iteration
    weight-gradient sums over TP (``weight_sum_ps``) and DP all-reduces (``dp_ps``), and ``memory_bytes`` per
    device."""

    compute_ps: float
    conversion_ps: float
    p2p_ps: float
    time_ps: float
    weight_sum_ps: float
    dp_ps: float
    memory_bytes: float


def estimate(costs: AssignmentCosts, mapping: Mapping) -> tuple[StageEstimate, ...]:
    """The terms of every stage of ``mapping`` (whose dimension assignment ``costs`` prices)."""
    graph = costs.problem.graph
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    rows = []
    for stage in range(costs.pp):
        slot = 0 if graph.repeat > 1 else stage
        members = [k for k in range(len(graph.kernels)) if mapping.stages[k] == slot]
        mult = costs.repeats_per_stage
        compute = mult * sum(costs.compute(k, mapping.schemes[k]) for k in members)
        network = mult * sum(
            costs.conversion(*_schemes(graph, index, mapping, t))
            for t in graph.tensors
            if mapping.stages[index[t.source]] == slot
        )
        if graph.repeat > 1:
            p2p = costs.send(costs.problem.boundary) if stage < costs.pp - 1 else 0.0
        else:
            p2p = sum(
                costs.send(t.bytes)
                for t in graph.tensors
                if mapping.stages[index[t.source]] <= stage < mapping.stages[index[t.target]]
            )
        weight_sum = mult * sum(costs.weight_sum(k, mapping.schemes[k]) for k in members)
        dp = mult * sum(costs.dp_reduce(k, mapping.schemes[k]) for k in members)
        memory = mult * sum(costs.memory(k, mapping.schemes[k], stage) for k in members)
        time = costs.stage_time(compute, network, p2p)
        rows.append(StageEstimate(compute, network, p2p, time, weight_sum, dp, memory))
    return tuple(rows)


def _schemes(
    graph: DataflowGraph, index: dict[str, int], mapping: Mapping, tensor: Tensor
) -> tuple[Tensor, Scheme, Scheme]:
    source, target = index[tensor.source], index[tensor.target]
    return (
        tensor,
        graph.kernels[source].schemes[mapping.schemes[source]],
        graph.kernels[target].schemes[mapping.schemes[target]],
    )
