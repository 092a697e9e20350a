"""The distinct execution graphs of one simulation, each with what the run keeps for it (:class:`PlanRun`).

NPUs may share one graph object (a workload that repeats a rank's graph, or symmetric NPUs standing in for
others): the graph is planned, priced and fused once per device, and every NPU that runs it on that device reads
the same :class:`PlanRun`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import Grid
from stratasim.system_layer.engine.blocks import inline_blocks
from stratasim.system_layer.engine.collective_table import CollectiveTable
from stratasim.system_layer.engine.fusion import fuse_compute_runs
from stratasim.system_layer.engine.graph_plan import GraphPlan, plan_graph
from stratasim.system_layer.engine.macros import runnable_whole
from stratasim.system_layer.engine.pricing import Pricing
from stratasim.system_layer.options import SystemOptions
from stratasim.v1 import network_pb2, workload_pb2

__all__ = ["PlanRun", "plan_runs", "distinct", "mark_blocks_run_whole", "count_runs", "physical_grid", "unrolled_size"]


@dataclass(eq=False)
class PlanRun:
    """One distinct graph on one device: the NPUs simulated with it, its plan and, once priced, its node durations
    and energy; ``device`` is the device it is priced on (empty: the simulation's one device).

    ``whole`` holds the positions of the block nodes its NPU runs whole (:mod:`~stratasim.system_layer.engine.macros`);
    ``plan`` is first the graph's plan, then (:meth:`inline`) that plan with the other blocks inlined, then
    (:meth:`fuse`) with its compute runs fused; ``priced`` is the inlined plan, whose operators the pricing counts.
    """

    graph: workload_pb2.ExecutionGraph
    npus: list[int]
    plan: GraphPlan
    whole: frozenset[int] = frozenset()
    priced: GraphPlan | None = None
    durations: tuple[int, ...] = ()
    slow: tuple[float, ...] | None = None  # each node's slow-down while collectives run (None: none)
    energy_pj: float = 0.0
    device: str = ""

    def inline(self) -> None:
        """Inline every block node but those run whole, as the last of its NPUs sees the plan."""
        self.plan = self.priced = inline_blocks(self.plan, keep=self.whole, npu=self.npus[-1])

    def take_prices(self, pricing: Pricing) -> None:
        """Keep the durations and energy ``pricing`` found for the inlined plan."""
        self.durations = pricing.durations[self.plan]
        self.slow = pricing.slow.get(self.plan)
        self.energy_pj = pricing.energies[self.plan]

    def fuse(self, members: bool = False) -> None:
        """Make each fusible run of compute nodes one node (same times, fewer events); not for a plan whose
        collectives slow its compute (:meth:`communicates`), where each node's slow-down is its own. With
        ``members`` the fused plan keeps each run's members (``GraphPlan.fused``), for node times."""
        self.plan, self.durations = fuse_compute_runs(self.plan, self.durations, members)
        self.slow = None  # nothing communicates beside its compute: nothing slows it

    def communicates(self) -> bool:
        """Whether the plan's own nodes hold a collective (those of blocks run whole stay inside their runs)."""
        return workload_pb2.COMM_COLL_NODE in self.plan.kinds


def plan_runs(
    graphs: Mapping[int, workload_pb2.ExecutionGraph],
    npus: int,
    physical: Grid,
    options: SystemOptions,
    device_of: Mapping[int, str] | None = None,
) -> tuple[dict[int, PlanRun], Grid]:
    """The plan run of each NPU in ``graphs`` (NPUs sharing a graph object and a device share one; ``device_of``:
    the device of each NPU running another than the simulation's) and the grid collectives run on, with every
    distinct collective checked, so an impossible study fails before it runs."""
    by_graph: dict[tuple[int, str], PlanRun] = {}  # by id(graph): graphs are unhashable messages, NPUs may share one
    of_npu: dict[int, PlanRun] = {}
    devices = device_of or {}
    for npu, graph in graphs.items():
        key = (id(graph), devices.get(npu, ""))
        run = by_graph.get(key)
        if run is None:
            run = by_graph[key] = PlanRun(graph, [], plan_graph(graph, npu, npus), device=key[1])
        run.npus.append(npu)
        of_npu[npu] = run
    grid = _logical_grid(physical, options)
    _preflight([run.plan for run in by_graph.values()], grid, options, npus)
    return of_npu, grid


def distinct(runs: Mapping[int, PlanRun]) -> list[PlanRun]:
    """The distinct plan runs among ``runs``, in the order their first NPU comes."""
    return list(dict.fromkeys(runs.values()))


def mark_blocks_run_whole(runs: Mapping[int, PlanRun], stand_in: Sequence[int] | None, npus: int) -> None:
    """Mark the block nodes each graph's NPU may run whole, for graphs one simulated NPU runs (on a network
    pricing messages on the spot: the caller's condition)."""
    stands_in: Callable[[int], int] = (lambda member: member) if stand_in is None else stand_in.__getitem__
    for run in distinct(runs):
        if len(run.npus) == 1:
            run.whole = runnable_whole(run.plan, run.npus[0], stands_in, npus)


def count_runs(runs: Mapping[int, PlanRun], stand_in: Sequence[int] | None, npus: int) -> dict[GraphPlan, int]:
    """By priced plan (the pricing's key), how many NPUs of the study follow it."""
    counts: Counter[GraphPlan] = Counter()
    for npu in range(npus):
        run = runs[npu if stand_in is None else stand_in[npu]]
        assert run.priced is not None, "count_runs follows pricing, which inlines every plan"
        counts[run.priced] += 1
    return counts


def unrolled_size(plan: GraphPlan) -> int:
    """How many nodes ``plan`` runs, each block node counted as the nodes of its block."""
    sizes = [unrolled_size(block) for block in plan.blocks]
    return len(plan.nodes) - len(plan.block_runs) + sum(sizes[block] for block in plan.block_runs.values())


def physical_grid(topology: network_pb2.Topology, npus: int) -> Grid:
    """The topology's grid, refusing a workload that names more NPUs than it holds."""
    physical = Grid.of(topology)
    if npus > physical.npus:
        raise WorkloadError(f"workload needs {npus} NPUs but the topology has {physical.npus}")
    return physical


def _preflight(plans: list[GraphPlan], grid: Grid, options: SystemOptions, npus: int) -> None:
    """Plan every distinct collective of ``plans`` once."""
    table = CollectiveTable(grid, options, npus)
    table.preflight(
        [
            node
            for plan in plans
            for part in (plan, *plan.blocks)
            for node, kind in zip(part.nodes, part.kinds)
            if kind == workload_pb2.COMM_COLL_NODE
        ],
        foreign_names=any(plan.foreign_names for plan in plans),
    )


def _logical_grid(physical: Grid, options: SystemOptions) -> Grid:
    """The grid collectives run on: the physical topology's, or the logical one the options name."""
    if options.logical_topology is None:
        return physical
    logical = Grid(options.logical_topology)
    if logical.npus != physical.npus:
        raise WorkloadError(
            f"system.logical_topology: {list(logical.sizes)} holds {logical.npus} NPUs but the physical topology "
            f"has {physical.npus}"
        )
    return logical
