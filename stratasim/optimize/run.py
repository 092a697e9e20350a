"""The optimal plan of a transformer study: the plan program of :mod:`stratasim.optimize.plans` over a listed space,
the inter-chip pass's check of the layer's sharding (:mod:`stratasim.optimize.plan_sharding`), and the chosen plan
simulated by the event engine, the first-order estimate and the simulated time side by side
(:func:`stratasim.explore.optimize.optimize_study` lists the space from a study or sweep file and calls it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from stratasim.config.study_file import Study, WorkloadSpec
from stratasim.kernel.units import format_bytes
from stratasim.optimize.first_order import MEMORY_TERMS, TERMS, FirstOrderModel, plan_keys
from stratasim.optimize.plan_sharding import sharding_notes
from stratasim.optimize.plans import (
    OptimizeError,
    PlanChoice,
    PlanPoints,
    PlanSpace,
    optimal_plan,
    plan_costs,
    plan_space,
)
from stratasim.optimize.result import OBJECTIVES, Objective, OptimizeResult
from stratasim.study.economics import SystemEconomics, study_economics
from stratasim.study.run import run_study

__all__ = ["optimize_transformer"]

_COMPUTE = ("forward_compute", "backward_compute", "recompute")
"""The terms of the layers' compute, set beside the report's compute time."""


def optimize_transformer(
    study: Study,
    listed: PlanPoints,
    *,
    objective: Objective = "time",
    time_limit_s: float = 60.0,
    simulate: bool = True,
) -> OptimizeResult:
    """The best plan of ``listed`` for ``study``'s transformer by ``objective``, proved within ``time_limit_s`` (or
    the best found and its gap), its sharding checked by the inter-chip pass and, with ``simulate``, run by the event
    engine. :class:`OptimizeError` when no plan fits or the input is wrong."""
    if objective not in OBJECTIVES:
        raise OptimizeError(f"objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    economics = study_economics(study) if objective != "time" or study.economics is not None else None
    price = _price(economics, objective)
    with FirstOrderModel(study) as model:
        space = plan_space(model, listed)
        choice = optimal_plan(space, plan_costs(space, objective, price), time_limit_s)
        plan = space.estimates.plans[choice.index]
        config = model.config(plan)
        tps = {model.config(listed_plan).parallelism.tp for listed_plan in space.estimates.plans}
    estimate = int(space.estimates.iteration_ps[choice.index])
    terms = {term: int(space.estimates.terms[term][choice.index]) for term in TERMS}
    notes = [f"space: {space.describe()}", *_solver_notes(choice, objective, study.npus)]
    notes += sharding_notes(study, config, tps)
    report: dict[str, Any] | None = None
    if simulate:
        chosen = dataclasses.replace(study, workload=WorkloadSpec(study.workload.kind, config))
        report = run_study(chosen).to_dict()
        notes.append(_difference(estimate, terms, report))
    samples = int(space.batches[choice.index]) / (estimate / 1e12)
    return OptimizeResult(
        plan=dict(plan),
        objective=objective,
        status=choice.status,
        gap=choice.gap,
        solver_seconds=choice.wall_s,
        estimate_ps=estimate,
        estimate_terms=terms,
        candidates=len(space.estimates.plans),
        simulated_ps=None if report is None else int(report["total_time_ps"]),
        notes=tuple(notes),
        economics=None if economics is None else _economics(economics, samples, report),
        details=_details(space, choice),
    )


def _price(economics: SystemEconomics | None, objective: Objective) -> float:
    if economics is None or objective == "time":
        return 1.0
    return economics.system_price_usd if objective == "perf_per_dollar" else economics.system_power_w


def _solver_notes(choice: PlanChoice, objective: Objective, npus: int) -> list[str]:
    """What the program was and what the solver proved; what the objective means with the hardware fixed."""
    proved = (
        "proved optimal"
        if choice.status == "optimal"
        else f"stopped at its time limit: the best plan found, within {choice.gap:.2%} of the optimum"
    )
    notes = [
        f"program: {choice.variables} binaries (one per plan, exactly one chosen), {choice.rows} rows "
        f"(the choice and the memory capacity), each plan's cost its closed-form first-order time; {proved}"
    ]
    if objective != "time":
        notes.append(
            f"{objective}: every plan uses all {npus} NPUs of the study's fixed hardware, so throughput per "
            f"{'dollar' if objective == 'perf_per_dollar' else 'watt'} orders the plans as their time does; the "
            "objective differs from time only where the global batch differs between plans"
        )
    return notes


def _difference(estimate: int, terms: Mapping[str, int], report: Mapping[str, Any]) -> str:
    """The estimate against the simulation, split as the report splits its time: compute, and the rest."""
    simulated = int(report["total_time_ps"])
    compute = sum(terms[t] for t in _COMPUTE) / 1e3
    rest = (estimate - sum(terms[t] for t in _COMPUTE)) / 1e3
    relative = (estimate - simulated) / simulated if simulated else 0.0
    return (
        f"estimate {estimate / 1e3:,.0f} ns vs simulated {simulated / 1e3:,.0f} ns ({relative:+.4%}). The layers' "
        f"compute terms give {compute:,.0f} ns, the simulation's critical NPU computed "
        f"{report.get('compute_time_ns', 0):,.0f} ns (its stage's embedding or head too); the other terms (TP, "
        f"pipeline and DP communication, bubble, embedding and head, optimizer) give {rest:,.0f} ns, the "
        f"simulation's exposed communication and waiting {report.get('exposed_comm_ns', 0):,.0f} ns. The first-order "
        "model composes the engine's own operator and collective prices in closed form, so the totals differ only "
        "where it rounds or approximates an overlap (ZeRO 3's gathers, the DP reduction under the last backward "
        "passes)"
    )


def _economics(economics: SystemEconomics, samples: float, report: Mapping[str, Any] | None) -> dict[str, float]:
    figures = {
        "system_price_usd": economics.system_price_usd,
        "system_power_w": economics.system_power_w,
        "estimated_samples_per_second": samples,
        "estimated_perf_per_dollar": economics.perf_per_dollar(samples),
        "estimated_perf_per_watt": economics.perf_per_watt(samples),
    }
    if report is not None and report.get("samples_per_second"):
        simulated = float(report["samples_per_second"])
        figures |= {
            "samples_per_second": simulated,
            "perf_per_dollar": economics.perf_per_dollar(simulated),
            "perf_per_watt": economics.perf_per_watt(simulated),
        }
    return figures


def _details(space: PlanSpace, choice: PlanChoice) -> dict[str, Any]:
    memory = space.estimates.memory_terms
    return {
        "plan_keys": plan_keys(space.estimates.plans[choice.index]),
        "memory_bytes": int(space.estimates.memory_bytes[choice.index]),
        "memory_terms_bytes": {term: int(memory[term][choice.index]) for term in MEMORY_TERMS},
        "capacity_bytes": space.capacity,
        "capacity": None if space.capacity is None else format_bytes(space.capacity),
        "plans": len(space.estimates.plans),
        "unfit": space.unfit,
        "skipped": dict(space.skipped),
        "variables": choice.variables,
        "rows": choice.rows,
    }
