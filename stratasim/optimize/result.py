"""What ``stratasim optimize`` found: the plan, the solver's account of it, its estimate and its simulated time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from stratasim.kernel.units import ps_to_ns

__all__ = ["Objective", "OBJECTIVES", "OptimizeResult"]

Objective: TypeAlias = Literal["time", "perf_per_dollar", "perf_per_watt"]
OBJECTIVES: tuple[Objective, ...] = ("time", "perf_per_dollar", "perf_per_watt")


@dataclass(frozen=True)
class OptimizeResult:
    """One optimisation's outcome.

    ``plan`` holds the study keys the optimiser set (dotted paths, e.g. ``workload.parallelism.tp``): applying them
    to the study with ``--set`` runs the plan. ``status`` is the solver's (``optimal`` or ``time_limit``, then
    ``gap`` is the relative distance to the best bound). ``estimate_ps`` is the optimiser's own (first-order)
    time of one iteration and ``estimate_terms`` its named parts; ``simulated_ps`` is the event simulation of the
    plan (None when not simulated); ``notes`` explain where the two differ. ``candidates`` counts the plans or
    mappings the problem covered. ``economics`` holds the system's price and power and the plan's performance per
    dollar and per watt when the objective or the study asks for them.
    """

    plan: Mapping[str, Any]
    objective: Objective
    status: str
    gap: float
    solver_seconds: float
    estimate_ps: int
    estimate_terms: Mapping[str, int]
    candidates: int
    simulated_ps: int | None = None
    notes: tuple[str, ...] = ()
    economics: Mapping[str, float] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The result as ``--json`` prints it (times in ns beside the exact ps)."""
        return {
            "plan": dict(self.plan),
            "objective": self.objective,
            "status": self.status,
            "gap": self.gap,
            "solver_seconds": self.solver_seconds,
            "candidates": self.candidates,
            "estimate_ps": self.estimate_ps,
            "estimate_ns": ps_to_ns(self.estimate_ps),
            "estimate_terms_ns": {name: ps_to_ns(value) for name, value in self.estimate_terms.items()},
            "total_time_ps": self.simulated_ps,
            "total_time_ns": None if self.simulated_ps is None else ps_to_ns(self.simulated_ps),
            "difference": None if self.simulated_ps is None else _difference(self.estimate_ps, self.simulated_ps),
            "notes": list(self.notes),
            "economics": None if self.economics is None else dict(self.economics),
            "details": dict(self.details),
        }


def _difference(estimate: int, simulated: int) -> float:
    """The estimate's relative difference from the simulated time (positive: the estimate is longer)."""
    return (estimate - simulated) / simulated if simulated else 0.0
