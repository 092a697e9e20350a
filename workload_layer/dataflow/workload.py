"""A dataflow graph run as a study's workload: ``workload: {kind: dataflow, graph: FILE, mapping: {...}}``.

The graph file (:mod:`stratasim.workload_layer.dataflow.file`) says what runs; the mapping
(:mod:`stratasim.workload_layer.dataflow.mapping`) how it is laid over ``tp x pp x dp`` NPUs, ranks numbered TP
innermost, then PP, then DP; :mod:`stratasim.workload_layer.dataflow.emit` writes each NPU's execution graph.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import Grid
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.dataflow.emit import build_graph, weight_shares
from stratasim.workload_layer.dataflow.generated import graph_of
from stratasim.workload_layer.dataflow.graph import DataflowGraph
from stratasim.workload_layer.dataflow.mapping import DataflowConfig, DataflowPlan, resolve
from stratasim.workload_layer.graph_sequence import GraphSequence
from stratasim.workload_layer.rank_symmetry import Partners, translated_representatives

__all__ = ["DataflowWorkload", "DataflowConfig"]


class DataflowWorkload:
    """One iteration of a dataflow graph on every NPU of its mapping; the graph file is read when it is built, so
    ``stratasim check`` reports its defects and the mapping's."""

    name = "dataflow"
    fills_topology = True
    Config = DataflowConfig

    def __init__(self, config: DataflowConfig, graph: DataflowGraph | None = None) -> None:
        """``config``'s graph file read and its mapping resolved; ``graph``, when given (built in memory, by a
        generator or an optimiser), is run in place of the file's."""
        self.config = config
        self.plan: DataflowPlan = resolve(graph_of(config.graph) if graph is None else graph, config.mapping)

    def npus_required(self) -> int:
        """``tp * pp * dp``."""
        return self.plan.tp * self.plan.pp * self.plan.dp

    def estimate(self, npus: int) -> WorkEstimate:
        """A graph per NPU; per pass and repeat, at most a compute node and a collective per kernel, two backward
        operators, and a conversion and a transfer per tensor."""
        plan, graph = self.plan, self.plan.graph
        passes = plan.micro_batches * (2 if graph.training else 1) * graph.repeat
        kernels, tensors = len(graph.kernels), len(graph.tensors)
        largest = max([t.bytes for t in graph.tensors] + [max(weight_shares(plan, s)) for s in range(plan.pp)])
        drivers = "workload.mapping.micro_batches and the graph's repeat and kernels"
        return WorkEstimate(
            npus, passes * (4 * kernels + 2 * tensors) + 2, passes * (kernels + 2 * tensors) + 2, largest, drivers
        )

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        required = self.npus_required()
        if npus != required:
            raise WorkloadError(
                f"workload.mapping: tp * pp * dp = {self.plan.tp} * {self.plan.pp} * {self.plan.dp} = {required} NPUs, "
                f"but the workload runs on {npus}"
            )
        return GraphSequence(npus, lambda npu: build_graph(self.plan, npu))

    def representatives(self, grid: Grid) -> tuple[int, ...] | None:
        """Every TP and DP rank of a pipeline stage runs the graph of the stage's rank 0 (TP 0, DP 0), moved along
        the topology, when the topology's coordinates keep the groups and peers aligned."""
        layout = self.plan.layout
        return translated_representatives(
            grid,
            self.npus_required(),
            lambda npu: layout.npu({"tp": 0, "pp": layout.rank(npu, "pp"), "dp": 0}),
            self._partners,
        )

    def _partners(self, npu: int) -> Partners:
        """Everyone ``npu`` talks to, by role: its TP and DP groups, then its peer on each stage (none where the
        stages exchange no tensor)."""
        plan, layout = self.plan, self.plan.layout
        stage, pipeline = layout.rank(npu, "pp"), layout.group(npu, "pp")
        crossing = {(plan.stages[t.source], plan.stages[t.target]) for t in plan.graph.tensors}
        if plan.split_repeats:  # each stage hands the graph's outputs on to the next
            crossing = {(s, s + 1) for s in range(plan.pp - 1)}
        peers = tuple(
            (pipeline[s],) if s != stage and {(stage, s), (s, stage)} & crossing else () for s in range(plan.pp)
        )
        return (layout.group(npu, "tp"), layout.group(npu, "dp"), *peers)
