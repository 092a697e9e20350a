"""The ``workload:`` section of ``kind: dataflow`` and the mapping of a graph onto TP x PP x DP NPUs it names,
checked against the graph.

A mapping gives the tensor-parallel degree ``tp`` (every kernel is sharded over a TP group by its scheme), the
pipeline degree ``pp`` (each kernel runs on one stage, or each stage runs ``repeat / pp`` of the graph's repeats),
the data-parallel degree ``dp`` (replicas reducing their
weight gradients), each kernel's scheme and stage, the micro-batches per iteration (the graph is one) and the
pipeline schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field

from stratasim.kernel.errors import WorkloadError, did_you_mean
from stratasim.kernel.schema import Section
from stratasim.workload_layer.dataflow.generated import GraphKey
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError, Kernel, Scheme
from stratasim.workload_layer.dataflow.sharding import sharded_operator
from stratasim.workload_layer.transformer.rank_layout import RankLayout

__all__ = ["MappingSection", "DataflowConfig", "DataflowPlan", "resolve"]


class MappingSection(Section):
    """``workload.mapping``: how the graph is laid over the NPUs."""

    tp: int = Field(default=1, ge=1)
    """Tensor-parallel degree: the NPUs every kernel is sharded over, by its scheme."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel degree: the stages the kernels are placed on (see stages)."""
    dp: int = Field(default=1, ge=1)
    """Data-parallel degree: replicas of the whole pipeline, all-reducing their weight gradients."""
    schemes: dict[str, str] = {}
    """Each kernel's sharding scheme by name (default: the first its kind or the file lists)."""
    stages: dict[str, int] = {}
    """Each kernel's pipeline stage, from 0, never smaller than its producers' (with pp above 1, every kernel or
    none: then each stage runs an equal share of the graph's repeats, DFModel's cut between layers)."""
    micro_batches: int = Field(default=1, ge=1)
    """Micro-batches per iteration; the graph is one micro-batch."""
    schedule: Literal["gpipe", "1f1b"] = "1f1b"
    """Pipeline schedule: gpipe or 1f1b."""


class DataflowConfig(Section):
    """``workload:`` keys of ``kind: dataflow``: a dataflow-graph file and its mapping onto the NPUs."""

    study_files: ClassVar[tuple[str, ...]] = ("graph",)
    graph: GraphKey
    """The dataflow-graph file (YAML, or JSON when it ends in .json), relative to the study file's folder, or a
    generator's call (``{generator: hpl, n: 65536, nb: 1024}``; generators gpt, gpt3_1t, hpl, hpl_5m, fft, fft_1t,
    dlrm, dlrm_793b, each with its function's arguments)."""
    mapping: MappingSection = MappingSection()
    """How the graph is laid over the NPUs: degrees, schemes, stages, micro-batches, schedule."""


@dataclass(frozen=True)
class DataflowPlan:
    """A graph with its mapping resolved: every kernel's ``schemes`` and ``stages`` entry filled in; with
    ``split_repeats`` every kernel is on every stage, which runs ``repeats_per_stage`` of the graph's repeats."""

    graph: DataflowGraph
    schemes: Mapping[str, Scheme]
    stages: Mapping[str, int]
    tp: int
    pp: int
    dp: int
    micro_batches: int
    schedule: str
    split_repeats: bool = False

    @property
    def repeats_per_stage(self) -> int:
        """The graph's repeats each stage runs per pass."""
        return self.graph.repeat // self.pp if self.split_repeats else self.graph.repeat

    @property
    def layout(self) -> RankLayout:
        """NPU ids by rank: TP innermost, then PP, then DP (as the transformer workload numbers them)."""
        return RankLayout(("tp", "pp", "dp"), {"tp": self.tp, "pp": self.pp, "dp": self.dp})

    def stage_kernels(self, stage: int) -> tuple[Kernel, ...]:
        """The kernels on pipeline ``stage``, producers first."""
        return tuple(k for k in self.graph.order() if self.split_repeats or self.stages[k.name] == stage)


def resolve(graph: DataflowGraph, mapping: MappingSection) -> DataflowPlan:
    """``mapping`` applied to ``graph``; :class:`WorkloadError` naming the key for a kernel or scheme the graph
    lacks, a stage out of range or before a producer's, a stage left empty, or a kernel its scheme cannot
    shard over ``tp``."""
    where = "workload.mapping"
    names = [k.name for k in graph.kernels]
    for key, listed in (("schemes", mapping.schemes), ("stages", mapping.stages)):
        for name in listed:
            if name not in names:
                raise WorkloadError(
                    f"{where}.{key}.{name}: the graph {graph.name!r} has no such kernel; "
                    f"{did_you_mean(name, names)}it has {', '.join(names)}"
                )
    schemes = {k.name: _scheme(k, mapping) for k in graph.kernels}
    split = mapping.pp > 1 and not mapping.stages
    if split and graph.repeat % mapping.pp:
        raise WorkloadError(
            f"{where}.pp: the graph's {graph.repeat} repeats do not split evenly over {mapping.pp} stages; give "
            f"each kernel a stage in {where}.stages, or a pp dividing the repeats"
        )
    stages = {k.name: 0 for k in graph.kernels} if split else _stages(graph, mapping)
    return DataflowPlan(
        graph, schemes, stages, mapping.tp, mapping.pp, mapping.dp, mapping.micro_batches, mapping.schedule, split
    )


def _scheme(kernel: Kernel, mapping: MappingSection) -> Scheme:
    """The scheme ``mapping`` gives ``kernel`` (its first by default), checked to shard it over ``tp``."""
    try:
        scheme = kernel.scheme(mapping.schemes[kernel.name]) if kernel.name in mapping.schemes else kernel.schemes[0]
        sharded_operator(kernel, scheme, mapping.tp)
    except GraphError as exc:
        raise WorkloadError(f"workload.mapping.schemes.{kernel.name}: {exc}") from None
    return scheme


def _stages(graph: DataflowGraph, mapping: MappingSection) -> dict[str, int]:
    """Every kernel's stage, checked: in range, listed for each kernel when pp > 1 (and some are), never before a
    producer's, every stage holding a kernel."""
    where = "workload.mapping.stages"
    if mapping.pp > 1:
        missing = [k.name for k in graph.kernels if k.name not in mapping.stages]
        if missing:
            raise WorkloadError(
                f"{where}: with pp = {mapping.pp} every kernel needs a stage, or none (the repeats split); "
                f"missing {', '.join(missing)}"
            )
    stages = {k.name: mapping.stages.get(k.name, 0) for k in graph.kernels}
    for name, stage in stages.items():
        if not 0 <= stage < mapping.pp:
            raise WorkloadError(f"{where}.{name}: stage {stage} does not exist; stages run from 0 to {mapping.pp - 1}")
    for tensor in graph.tensors:
        if stages[tensor.target] < stages[tensor.source]:
            raise WorkloadError(
                f"{where}.{tensor.target}: stage {stages[tensor.target]} comes before stage "
                f"{stages[tensor.source]} of {tensor.source!r}, whose tensor {tensor.name!r} it takes; "
                "stages must not decrease along tensors"
            )
    empty = sorted(set(range(mapping.pp)) - set(stages.values()))
    if empty:
        raise WorkloadError(f"{where}: stage {empty[0]} holds no kernel; give each of the {mapping.pp} stages one")
    return stages
