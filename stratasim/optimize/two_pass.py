"""DFModel's two passes chained (its Fig. 1 and 5): the inter-chip pass maps a dataflow graph onto a system of
DataflowChips, then the intra-chip pass maps what one chip of each pipeline stage runs onto the chip.

1. Inter-chip (:func:`~stratasim.optimize.inter_chip.solve_inter_chip`): every kernel priced kernel by kernel on the
   chip (all its tiles; :func:`~stratasim.optimize.two_pass_system.kernel_by_kernel_time`), layout conversions
   and pipeline sends by the closed-form collectives on the system's dimensions. It chooses the TP/PP/DP roles of
   the dimensions, each kernel's sharding and the pipeline cut.
2. Intra-chip (:func:`~stratasim.optimize.intra_chip.solve_intra_chip`), for each pipeline stage (one solve when
   stages split the graph's repetitions: every stage runs the same ``repeats_per_stage`` layers): the stage's
   kernels as one chip runs them (:func:`~stratasim.optimize.chip_workload.chip_workload` with the chosen schemes
   and ``tp``), each kernel carrying the seconds of the layout conversions the inter-chip solution gives it (a
   forward conversion on the kernel producing the tensor, a backward one on the gradient kernel producing the
   tensor's gradient), executed in the chip's style: ``dataflow`` fuses kernels into at most ``max_partitions``
   partitions, each streaming the ``micro_batches / dp`` micro-batches its stage runs an iteration through once
   configured (its weights cross DRAM once for them, DFModel's steady state) (and falls back to kernel-by-kernel when the solver finds nothing faster within its time), while
   ``kernel_by_kernel`` puts each kernel alone on the whole chip.
3. Recomposition: stage ``s`` takes ``T_s = max(intra_s, p2p_s)`` per micro-batch, where ``intra_s`` is its
   intra-chip time (compute, DRAM and network overlapped within each partition, partitions in sequence, times the
   layers it runs) and ``p2p_s`` its pipeline sends from the inter-chip solution (overlapped, as eq. 7 overlaps
   them); the iteration is the inter-chip pass's pipeline formula with the stage time replaced:
   ``(micro_batches / dp + pp - 1) x max_s T_s + gradient``, ``gradient`` being the inter-chip solution's exposed
   gradient reductions (weight-gradient sums over TP and the DP all-reduces, once an iteration).

Time limits apply to each solve; the result's ``status`` is ``optimal`` only when every solve proved its optimum,
and ``gap`` the largest relative gap any of them left.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from stratasim.compute_layer.dataflow_chips import DataflowChip, Execution
from stratasim.optimize.chip_workload import ChipWorkload, chip_workload
from stratasim.optimize.inter_chip import InterChipProblem, InterChipSolution, solve_inter_chip
from stratasim.optimize.intra_chip import InfeasibleMapping, IntraChipSolution, solve_intra_chip
from stratasim.optimize.two_pass_system import inter_chip_problem
from stratasim.v1 import network_pb2
from stratasim.workload_layer.dataflow.graph import DataflowGraph
from stratasim.workload_layer.dataflow.sharding import backward_operators

__all__ = ["Breakdown", "IntraCache", "TwoPassResult", "solve_two_pass", "model_flops"]

_PS = 1e12

IntraCache: TypeAlias = dict[tuple[object, ...], IntraChipSolution]
"""Intra-chip solutions by what determines them (chip, style, limits, sharding, layers, micro-batches streamed and
network seconds)."""
_BACKWARD = ("dgrad", "wgrad", "backward")


@dataclass(frozen=True)
class Breakdown:
    """Where an iteration's time goes (DFModel's Fig. 11): each partition of the slowest stage's critical time to
    what bounds it (``compute``, ``memory``: DRAM, ``network``: its layout conversions), times the micro-batches
    the pipeline runs at that stage's pace; the stage's pipeline sends when they set its pace, and the exposed
    gradient reductions, to ``network``. The three add up to the iteration time."""

    compute_s: float
    memory_s: float
    network_s: float


@dataclass(frozen=True)
class TwoPassResult:
    """Both passes' solutions and the iteration they give on ``chips`` chips like ``chip`` executing as
    ``execution``: ``intra`` one solution per distinct pipeline stage, ``stage_s`` each stage's time per
    micro-batch, ``iteration_s`` the recomposed iteration, ``model_flops`` the graph's FLOPs an iteration, and
    ``breakdown`` its parts."""

    chip: DataflowChip
    execution: Execution
    chips: int
    inter: InterChipSolution
    intra: tuple[IntraChipSolution, ...]
    stage_s: tuple[float, ...]
    iteration_s: float
    model_flops: float
    breakdown: Breakdown

    @property
    def utilisation(self) -> float:
        """Model FLOPs over the iteration at every chip's peak."""
        return self.model_flops / (self.iteration_s * self.chip.peak_flops * self.chips)

    @property
    def status(self) -> Literal["optimal", "time_limit"]:
        """``optimal`` when every solve proved its optimum, else ``time_limit``."""
        proved = self.inter.status == "optimal" and all(s.status == "optimal" for s in self.intra)
        return "optimal" if proved else "time_limit"

    @property
    def gap(self) -> float:
        """The largest relative optimality gap any of the solves left."""
        return max((self.inter.gap, *(s.gap for s in self.intra)))


def model_flops(graph: DataflowGraph, micro_batches: int) -> float:
    """The FLOPs of an iteration of ``graph``: every kernel's forward (and in training backward) operators, times
    the graph's repetitions and the micro-batches."""
    per_pass = 0.0
    for kernel in graph.kernels:
        ops = (kernel.operator, *backward_operators(kernel.operator)) if graph.training else (kernel.operator,)
        per_pass += sum(op.flops for op in ops)
    return per_pass * graph.repeat * micro_batches


def solve_two_pass(
    graph: DataflowGraph,
    chip: DataflowChip,
    topology: network_pb2.Topology,
    *,
    micro_batches: int = 1,
    execution: Execution | None = None,
    max_partitions: int | None = None,
    max_stages: int = 128,
    inter_time_limit_s: float = 60.0,
    intra_time_limit_s: float = 60.0,
    cache: IntraCache | None = None,
) -> TwoPassResult:
    """``graph`` (one micro-batch, ``micro_batches`` an iteration) on ``topology``'s chips like ``chip``, mapped by
    both passes (see the module); ``execution`` overrides the chip's own style, ``max_partitions`` bounds a dataflow
    chip's partitions per stage (default: one per kernel, so kernel-by-kernel execution is among the mappings the
    solver starts from). ``cache`` (a dict the caller keeps for one graph) reuses intra-chip solutions of
    identical stages across systems. Raises what the passes raise:
    :class:`~stratasim.optimize.inter_chip.InterChipError` or
    :class:`~stratasim.optimize.intra_chip.InfeasibleMapping` naming the constraint that binds."""
    style = execution or chip.execution
    problem = inter_chip_problem(graph, chip, topology, micro_batches, max_stages)
    inter = solve_inter_chip(problem, time_limit_s=inter_time_limit_s)
    network = _network_seconds(problem, inter)
    work = chip_workload(graph, schemes=inter.schemes, tp=inter.tp, network_seconds=network)
    memo = {} if cache is None else cache
    streamed = max(micro_batches // inter.dp, 1)
    intra = []
    for names in _stages(graph, inter):
        key = (
            chip,
            style,
            max_partitions,
            intra_time_limit_s,
            tuple(sorted(inter.schemes.items())),
            inter.tp,
            inter.repeats_per_stage,
            streamed,
            frozenset(names),
            tuple(sorted(network.items())),
        )
        if key not in memo:
            stage_work = replace(_stage_workload(work, names), repeat=inter.repeats_per_stage, streamed=streamed)
            memo[key] = _intra(stage_work, chip, style, max_partitions, intra_time_limit_s)
        intra.append(memo[key])
    return _recompose(graph, chip, style, inter, tuple(intra), micro_batches)


def _recompose(
    graph: DataflowGraph,
    chip: DataflowChip,
    style: Execution,
    inter: InterChipSolution,
    intra: tuple[IntraChipSolution, ...],
    micro_batches: int,
) -> TwoPassResult:
    """Each stage's time the longer of its intra-chip time and its sends; the inter-chip pipeline formula."""
    stage_s = tuple(
        max(intra[min(s, len(intra) - 1)].total_s, estimate.p2p_ps / _PS)
        for s, estimate in enumerate(inter.stage_estimates)
    )
    pipeline = micro_batches // inter.dp + inter.pp - 1
    gradient_s = inter.gradient_ps / _PS
    iteration_s = pipeline * max(stage_s) + gradient_s
    slowest = max(range(len(stage_s)), key=lambda s: stage_s[s])
    breakdown = _breakdown(intra[min(slowest, len(intra) - 1)], stage_s[slowest], pipeline, gradient_s)
    flops = model_flops(graph, micro_batches)
    chips = inter.tp * inter.pp * inter.dp
    return TwoPassResult(chip, style, chips, inter, intra, stage_s, iteration_s, flops, breakdown)


def _intra(
    work: ChipWorkload, chip: DataflowChip, style: Execution, max_partitions: int | None, time_limit_s: float
) -> IntraChipSolution:
    """The stage on the chip in ``style``. A dataflow chip keeps kernel-by-kernel execution (it can always run that
    way) when the solver finds no faster fusion within its time or its partitions, with ``status`` ``time_limit``
    and ``gap`` 1 when it found no fusion at all."""
    by_kernel = solve_intra_chip(work, chip, execution="kernel_by_kernel", time_limit_s=time_limit_s)
    if style == "kernel_by_kernel":
        return by_kernel
    parts = len(work.kernels) if max_partitions is None else min(max_partitions, len(work.kernels))
    try:
        fused = solve_intra_chip(work, chip, execution="dataflow", max_partitions=parts, time_limit_s=time_limit_s)
    except (InfeasibleMapping, TimeoutError):
        return replace(by_kernel, status="time_limit", gap=1.0)
    return fused if fused.total_s <= by_kernel.total_s else replace(by_kernel, status=fused.status, gap=fused.gap)


def _network_seconds(problem: InterChipProblem, inter: InterChipSolution) -> dict[str, float]:
    """Each chip kernel's layout-conversion seconds from the inter-chip solution's collectives over the TP
    dimensions: a forward conversion on the tensor's producer, a backward one on the gradient kernel producing the
    tensor's gradient (a GEMM consumer's ``dgrad`` for its first input, ``wgrad`` for its second; any other
    kernel's ``backward``)."""
    graph = problem.graph
    tp_dims = tuple(d for d, role in enumerate(inter.roles) if role == "tp")
    tensors = {t.name: t for t in graph.tensors}
    seconds: dict[str, float] = {}
    for collective in inter.collectives:
        tensor = tensors[collective.tensor]
        if collective.direction == "forward":
            name = tensor.source
        else:
            gemm = graph.kernel(tensor.target).operator.WhichOneof("shape") == "gemm"
            suffix = ("dgrad" if tensor.slot == 0 else "wgrad") if gemm else "backward"
            name = f"{tensor.target}.{suffix}"
        time = problem.collective_time(collective.kind, collective.bytes, tp_dims) / _PS
        seconds[name] = seconds.get(name, 0.0) + time
    return seconds


def _stages(graph: DataflowGraph, inter: InterChipSolution) -> list[set[str]]:
    """The forward kernels of each distinct pipeline stage: the whole graph once when stages split its
    repetitions, else each stage's kernels."""
    if graph.repeat > 1:
        return [{k.name for k in graph.kernels}]
    return [{name for name, stage in inter.stages.items() if stage == s} for s in range(inter.pp)]


def _stage_workload(work: ChipWorkload, names: set[str]) -> ChipWorkload:
    """The part of ``work`` one stage's chip runs: the kernels of ``names`` and their gradient kernels, and the
    tensors between them (those crossing stages are the pipeline's sends)."""
    members = {f"{name}.{suffix}" for name in names for suffix in _BACKWARD} | names
    kept = [i for i, k in enumerate(work.kernels) if k.name in members]
    if len(kept) == len(work.kernels):
        return work
    number = {old: new for new, old in enumerate(kept)}
    tensors = tuple(
        replace(t, source=number[t.source], target=number[t.target])
        for t in work.tensors
        if t.source in number and t.target in number
    )
    kernels = tuple(work.kernels[i] for i in kept)
    held = None if work.held_bytes is None else 2 * sum(k.weight_bytes for k in kernels if k.name in names)
    return replace(work, kernels=kernels, tensors=tensors, held_bytes=held)


def _breakdown(intra: IntraChipSolution, stage_s: float, pipeline: int, gradient_s: float) -> Breakdown:
    parts = {"compute": 0.0, "memory": 0.0, "network": 0.0}
    if stage_s > intra.total_s:
        parts["network"] = stage_s
    else:
        for partition in intra.partitions:
            parts[partition.bound] += partition.time_s * intra.repeat
    return Breakdown(
        compute_s=pipeline * parts["compute"],
        memory_s=pipeline * parts["memory"],
        network_s=pipeline * parts["network"] + gradient_s,
    )
