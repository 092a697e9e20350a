"""DFModel's inter-chip pass (Sec. IV): the optimal sharding, pipeline cut and parallelism split of a dataflow
graph on a multi-dimensional network, as a mixed-integer program solved by HiGHS.

:func:`solve_inter_chip` builds the program of :mod:`stratasim.optimize.inter_chip_milp` and reads its answer
back as an :class:`InterChipSolution`, whose figures are recomputed from the chosen mapping by the same cost terms
the program was built from. :func:`enumerate_inter_chip` searches the same space exhaustively (for tests and tiny
problems). A problem no mapping fits raises :class:`InterChipError` naming the binding constraint: the program is
solved again without its memory rows for the least memory any mapping needs. The formulation is derived in
docs/explanation/optimal-mapping.md.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

from stratasim.optimize.inter_chip_costs import (
    AssignmentCosts,
    LayoutCollective,
    Mapping,
    Prices,
    StageEstimate,
    estimate,
)
from stratasim.optimize.inter_chip_milp import build_model
from stratasim.optimize.inter_chip_problem import (
    DimAssignment,
    InterChipError,
    InterChipProblem,
    NetworkDim,
    Role,
    assignments,
)
from stratasim.optimize.milp import SolverError, Status

__all__ = [
    "InterChipProblem",
    "InterChipSolution",
    "InterChipError",
    "NetworkDim",
    "LayoutCollective",
    "StageEstimate",
    "solve_inter_chip",
    "enumerate_inter_chip",
]

_GIB = 2**30


@dataclass(frozen=True)
class InterChipSolution:
    """A mapping and its first-order estimate.

    ``roles`` gives each network dimension's parallelism (innermost first) and ``tp``/``pp``/``dp`` the group
    sizes; ``schemes`` each kernel's sharding scheme by name; ``stages`` each kernel's pipeline stage (all 0 when
    stages split the graph's repetitions, ``repeats_per_stage`` each). ``iteration_ps`` is ``(micro_batches / dp
    + pp - 1) x stage_ps + gradient_ps``; ``stage_ps`` is the slowest stage's time per micro-batch and
    ``compute_ps``, ``conversion_ps``, ``p2p_ps`` its terms; ``weight_sum_ps`` and ``dp_ps`` are the exposed
    gradient reductions (the stage where they take longest); ``memory_bytes`` the fullest device's.
    ``collectives`` lists the layout conversions of one graph execution. ``status`` is the solver's (``optimal``
    or ``time_limit``), ``gap`` the relative optimality gap proved, ``bound_ps`` the lower bound on the optimum,
    ``wall_s`` the search's wall time.
    """

    roles: tuple[Role, ...]
    tp: int
    pp: int
    dp: int
    schemes: dict[str, str]
    stages: dict[str, int]
    repeats_per_stage: int
    iteration_ps: float
    stage_ps: float
    compute_ps: float
    conversion_ps: float
    p2p_ps: float
    weight_sum_ps: float
    dp_ps: float
    memory_bytes: float
    stage_estimates: tuple[StageEstimate, ...]
    collectives: tuple[LayoutCollective, ...]
    status: Status
    gap: float
    bound_ps: float
    wall_s: float

    @property
    def gradient_ps(self) -> float:
        """The exposed gradient reductions of an iteration."""
        return self.weight_sum_ps + self.dp_ps


def solve_inter_chip(problem: InterChipProblem, time_limit_s: float = 60.0, gap: float = 1e-6) -> InterChipSolution:
    """The optimal mapping of ``problem`` (or, past ``time_limit_s``, the best found and its ``gap``)."""
    start = time.perf_counter()
    prices = Prices(problem)
    options = tuple(AssignmentCosts(prices, option) for option in assignments(problem))
    model = build_model(options, "time")
    try:
        solution = model.milp.solve(time_limit_s, gap, presolve=False)
    except SolverError as error:
        raise SolverError(f"graph {problem.graph.name!r}: {error}; allow it more time") from None
    if solution.status == "infeasible":
        raise InterChipError(_why_infeasible(problem, options, time_limit_s))
    mapping = model.decode(solution)
    costs = next(c for c in options if c.option == mapping.option)
    bound = solution.bound * model.time_scale
    return _solution(costs, mapping, solution.status, solution.gap, bound, time.perf_counter() - start)


def enumerate_inter_chip(problem: InterChipProblem) -> InterChipSolution:
    """The optimal mapping of ``problem`` by trying every one (exponential: for tests and tiny problems)."""
    start = time.perf_counter()
    prices = Prices(problem)
    best: tuple[float, AssignmentCosts, Mapping] | None = None
    least = math.inf
    for costs in (AssignmentCosts(prices, option) for option in assignments(problem)):
        for mapping in _mappings(costs):
            stages = estimate(costs, mapping)
            if any(math.isinf(stage.compute_ps) for stage in stages):
                continue
            memory = max(stage.memory_bytes for stage in stages)
            least = min(least, memory)
            iteration = costs.iteration(stages)
            if memory <= problem.memory_bytes and (best is None or iteration < best[0]):
                best = (iteration, costs, mapping)
    if best is None:
        raise InterChipError(_does_not_fit(problem, least))
    return _solution(best[1], best[2], "optimal", 0.0, best[0], time.perf_counter() - start)


def _mappings(costs: AssignmentCosts) -> Iterator[Mapping]:
    """Every scheme choice and every stage cut (stages grow along tensors, none is empty) of one assignment."""
    graph = costs.problem.graph
    kernels = len(graph.kernels)
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    cuts = [(0,) * kernels] if graph.repeat > 1 else list(itertools.product(range(costs.pp), repeat=kernels))
    cuts = [
        cut
        for cut in cuts
        if len(set(cut)) == costs.stage_count
        and all(cut[index[t.source]] <= cut[index[t.target]] for t in graph.tensors)
    ]
    for schemes in itertools.product(*(range(len(k.schemes)) for k in graph.kernels)):
        for cut in cuts:
            yield Mapping(costs.option, schemes, cut)


def _solution(
    costs: AssignmentCosts, mapping: Mapping, status: Status, gap: float, bound_ps: float, wall_s: float
) -> InterChipSolution:
    graph = costs.problem.graph
    stages = estimate(costs, mapping)
    slowest = max(stages, key=lambda stage: stage.time_ps)
    exposed = max(stages, key=lambda stage: stage.weight_sum_ps + stage.dp_ps)
    option: DimAssignment = mapping.option
    return InterChipSolution(
        roles=option.roles,
        tp=option.tp,
        pp=option.pp,
        dp=option.dp,
        schemes={k.name: k.schemes[s].name for k, s in zip(graph.kernels, mapping.schemes)},
        stages={k.name: p for k, p in zip(graph.kernels, mapping.stages)},
        repeats_per_stage=costs.repeats_per_stage,
        iteration_ps=costs.iteration(stages),
        stage_ps=slowest.time_ps,
        compute_ps=slowest.compute_ps,
        conversion_ps=slowest.conversion_ps,
        p2p_ps=slowest.p2p_ps,
        weight_sum_ps=exposed.weight_sum_ps,
        dp_ps=exposed.dp_ps,
        memory_bytes=max(stage.memory_bytes for stage in stages),
        stage_estimates=stages,
        collectives=_collectives(costs, mapping),
        status=status,
        gap=gap,
        bound_ps=bound_ps,
        wall_s=wall_s,
    )


def _collectives(costs: AssignmentCosts, mapping: Mapping) -> tuple[LayoutCollective, ...]:
    graph = costs.problem.graph
    if costs.tp == 1:
        return ()
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    found = []
    for tensor in graph.tensors:
        source, target = index[tensor.source], index[tensor.target]
        first = graph.kernels[source].schemes[mapping.schemes[source]]
        second = graph.kernels[target].schemes[mapping.schemes[target]]
        found += costs.layout_collectives(tensor, first, second)
    return tuple(found)


def _why_infeasible(problem: InterChipProblem, options: tuple[AssignmentCosts, ...], time_limit_s: float) -> str:
    """The binding constraint of a problem without a mapping: memory, found by minimising the fullest device's
    memory without the capacity rows."""
    model = build_model(options, "memory")
    least = model.milp.solve(time_limit_s, presolve=False)
    if least.status == "infeasible":
        return (
            f"graph {problem.graph.name!r}: no mapping satisfies the pipeline rules (each stage non-empty, stages "
            f"growing along tensors) under any assignment of the network dimensions"
        )
    return _does_not_fit(problem, least.bound * model.memory_scale)


def _does_not_fit(problem: InterChipProblem, least: float) -> str:
    return (
        f"graph {problem.graph.name!r}: the model does not fit: the least memory any mapping needs is "
        f"{least / _GIB:.3g} GiB per device against {problem.memory_bytes / _GIB:.3g} GiB"
    )
