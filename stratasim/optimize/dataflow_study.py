"""The optimal mapping of a ``kind: dataflow`` study (DFModel's inter-chip pass), simulated by the event engine.

:func:`optimize_dataflow_study` builds the :class:`~stratasim.optimize.inter_chip.InterChipProblem` of a study —
its graph file, its topology's dimensions, each NPU's memory capacity as the run checks it, kernels priced on its
compute device and collectives in closed form on its network (:mod:`stratasim.optimize.dataflow_costs`) — solves
it with HiGHS, writes the solution as the study's ``workload.mapping`` keys and, unless told not to, runs the study
with them. The iteration's micro-batches are the study's: ``workload.mapping.micro_batches`` per pipeline times its
``dp`` (the solver shares that global count among the replicas it picks). docs/how-to/optimize-dataflow.md shows
it at work and says what the estimate leaves out.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any

from stratasim.compute_layer.backend_section import CHIP_BACKEND
from stratasim.compute_layer.dataflow_chips import Execution
from stratasim.kernel.errors import StrataSimError
from stratasim.optimize.chip_study import optimize_chip_study
from stratasim.optimize.dataflow_costs import DataflowCosts, DataflowStudyError
from stratasim.optimize.dataflow_keys import mapping_keys, study_config, with_plan
from stratasim.optimize.dataflow_notes import estimate_terms, notes
from stratasim.optimize.dataflow_roles import fixed_roles, ordered_roles
from stratasim.optimize.inter_chip import InterChipError, InterChipProblem, InterChipSolution, solve_inter_chip
from stratasim.optimize.milp import SolverError, Status
from stratasim.optimize.result import Objective, OptimizeResult
from stratasim.study.device import study_memory_capacity
from stratasim.study.economics import study_economics
from stratasim.study.run import run_study
from stratasim.workload_layer.dataflow.generated import graph_of
from stratasim.workload_layer.dataflow.graph import DataflowGraph

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["optimize_dataflow_study", "dataflow_problem", "mapping_keys", "DataflowStudyError"]

_UNLIMITED = 2**62
"""The memory a device is taken to hold when neither the study nor its compute backend says."""


def optimize_dataflow_study(
    study: Study,
    *,
    objective: Objective,
    time_limit_s: float,
    simulate: bool = True,
    overlap: bool = False,
    keep_degrees: bool = False,
    execution: Execution | None = None,
) -> OptimizeResult:
    """The best mapping of ``study``'s dataflow graph onto its topology for ``objective``, found within
    ``time_limit_s`` seconds (past it, the best found and its gap), and its event simulation unless ``simulate``
    is False.

    ``overlap`` True prices a stage as DFModel's eq. 7 does (compute, layout conversions and sends all overlapped);
    the default serialises compute and conversions as the engine runs blocking collectives. ``keep_degrees`` keeps
    the study's ``tp``, ``pp`` and ``dp`` and finds the best sharding and pipeline cut of that split (else the
    optimiser chooses them too).

    A study whose compute backend is ``dataflow_chip`` gets DFModel's two passes instead
    (:func:`~stratasim.optimize.chip_study.optimize_chip_study`), in ``execution`` (None: the chip's own style)."""
    if study.compute is not None and study.compute.backend == CHIP_BACKEND:
        options = {"overlap": overlap, "keep_degrees": keep_degrees}
        return optimize_chip_study(study, execution, objective, time_limit_s, simulate, **options)
    if execution is not None:
        raise DataflowStudyError(
            f"execution {execution}: the execution style is the dataflow chip's; set compute.backend: {CHIP_BACKEND}"
        )
    config = study_config(study)
    memory, unknown = study_memory_capacity(study)
    graph = graph_of(config.graph)
    with DataflowCosts(study, graph.training) as costs:
        problem = dataflow_problem(study, graph, costs, memory or _UNLIMITED, overlap, keep_degrees)
        solution, candidates, unsolved = _solve(problem, time_limit_s)
    plan = mapping_keys(problem, solution)
    simulated = run_study(with_plan(study, plan)).total_time_ps if simulate else None
    said = notes(problem, solution, simulated, objective)
    if unknown:
        said = (f"memory not checked: {unknown}; set system.memory_capacity", *said)
    if unsolved:
        said = (unsolved, *said)
    return OptimizeResult(
        plan=plan,
        objective=objective,
        status=solution.status,
        gap=solution.gap,
        solver_seconds=solution.wall_s,
        estimate_ps=round(solution.iteration_ps),
        estimate_terms=estimate_terms(problem, solution),
        candidates=candidates,
        simulated_ps=simulated,
        notes=said,
        economics=_economics(study, problem, solution, simulated, objective),
        details=_details(solution),
    )


def dataflow_problem(
    study: Study, graph: DataflowGraph, costs: DataflowCosts, memory_bytes: int, overlap: bool, keep_degrees: bool
) -> InterChipProblem:
    """The inter-chip problem of ``study`` (whose graph file holds ``graph``) priced by ``costs``: the global micro-batches are the study's
    per-pipeline ``micro_batches`` times its ``dp``; with ``keep_degrees`` the study's degrees fix the dimensions'
    roles."""
    config = study_config(study)
    dims = costs.network_dims()
    mapping = config.mapping
    return InterChipProblem(
        graph=graph,
        dims=dims,
        memory_bytes=memory_bytes,
        kernel_time=costs.kernel_time,
        collective_time=costs.collective_time,
        micro_batches=mapping.micro_batches * mapping.dp,
        max_stages=math.prod(dim.size for dim in dims),
        overlap=overlap,
        roles=fixed_roles(mapping, tuple(dim.size for dim in dims)) if keep_degrees else None,
    )


def _solve(problem: InterChipProblem, time_limit_s: float) -> tuple[InterChipSolution, int, str]:
    """The best solution over the role orders the engine runs (each solved with its roles fixed, in the time
    left), its gap against the least bound of them all, how many role assignments were searched, and a note when
    some stopped without a mapping (then no gap is proved: it is given as 1)."""
    start = time.perf_counter()
    options = ordered_roles(problem) if problem.roles is None else (problem.roles,)
    found: list[InterChipSolution] = []
    failed: list[StrataSimError | None] = []
    for roles in options:
        left = max(0.0, time_limit_s - (time.perf_counter() - start))
        try:
            found.append(solve_inter_chip(dataclasses.replace(problem, roles=roles), time_limit_s=left))
            failed.append(None)
        except (InterChipError, SolverError) as error:
            failed.append(error)
    if not found:
        errors = [error for error in failed if error is not None]
        timed_out = [error for error in errors if isinstance(error, SolverError)]
        raise timed_out[0] if timed_out else _unmapped(problem, errors[0], time_limit_s)
    best = min(found, key=lambda s: s.iteration_ps)
    unsolved = [roles for roles, error in zip(options, failed) if isinstance(error, SolverError)]
    if unsolved:  # a role order stopped with no mapping and no bound: nothing is proved
        gap, said = 1.0, f"no mapping found in time for roles {', '.join('/'.join(r) for r in unsolved)}: gap unproved"
    elif all(s.status == "optimal" for s in found):
        gap, said = max(s.gap for s in found), ""
    else:
        bound = min(s.bound_ps for s in found)
        gap, said = max(0.0, (best.iteration_ps - bound) / best.iteration_ps), ""
    status: Status = "optimal" if not said and all(s.status == "optimal" for s in found) else "time_limit"
    wall = time.perf_counter() - start
    return dataclasses.replace(best, status=status, gap=gap, wall_s=wall), len(options), said


def _unmapped(problem: InterChipProblem, first: StrataSimError, time_limit_s: float) -> StrataSimError:
    """Why no role order fits: the pass's reason for the whole problem (the binding constraint and the least
    memory any mapping needs), or, should a role order the engine cannot run fit, that."""
    if problem.roles is not None:
        return first
    try:
        solve_inter_chip(problem, time_limit_s=time_limit_s)
    except (InterChipError, SolverError) as error:
        return error
    return DataflowStudyError(
        f"graph {problem.graph.name!r}: only mappings with TP outside PP or DP on the network's dimensions fit, which "
        "the dataflow workload cannot run (it numbers NPUs TP innermost, then PP, then DP)"
    )


def _economics(
    study: Study, problem: InterChipProblem, solution: InterChipSolution, simulated: int | None, objective: Objective
) -> dict[str, float] | None:
    """The system's price and power and the mapping's graph executions per second, per dollar and per watt (of the
    simulated time when there is one); None for a time objective on hardware the economics cannot price."""
    try:
        economics = study_economics(study)
    except StrataSimError:
        if objective != "time":
            raise
        return None
    seconds = (simulated if simulated is not None else solution.iteration_ps) / 1e12
    throughput = problem.micro_batches / seconds
    return {
        "system_price_usd": economics.system_price_usd,
        "system_power_w": economics.system_power_w,
        "graphs_per_second": throughput,
        "perf_per_dollar": economics.perf_per_dollar(throughput),
        "perf_per_watt": economics.perf_per_watt(throughput),
    }


def _details(solution: InterChipSolution) -> dict[str, Any]:
    """The solution's figures beyond the plan: roles, per-stage terms (ps), memory, the layout collectives."""
    return {
        "roles": list(solution.roles),
        "repeats_per_stage": solution.repeats_per_stage,
        "memory_bytes": round(solution.memory_bytes),
        "bound_ps": round(solution.bound_ps),
        "stages": [
            {
                "compute_ps": round(s.compute_ps),
                "conversion_ps": round(s.conversion_ps),
                "p2p_ps": round(s.p2p_ps),
                "time_ps": round(s.time_ps),
                "memory_bytes": round(s.memory_bytes),
            }
            for s in solution.stage_estimates
        ],
        "layout_collectives": [
            {"tensor": c.tensor, "direction": c.direction, "kind": c.kind, "bytes": c.bytes}
            for c in solution.collectives
        ],
    }
