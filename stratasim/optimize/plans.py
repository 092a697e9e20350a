"""The optimal transformer plan over a plan space, as a mixed-integer program solved by HiGHS.

The space is the ``parallelism`` generator's (:mod:`stratasim.explore.plans`, listed by
:func:`stratasim.explore.optimize.plan_points`), with its options: every valid
combination of TP, PP, DP, schedule, virtual stages, micro-batch, recomputation, ZeRO and sequence parallelism.
Each plan is priced by the first-order model (:mod:`stratasim.optimize.first_order`), and the program carries one
binary per plan (exactly one chosen), the plan's cost (its iteration time, or minus its throughput per dollar or
per watt) as the objective and one memory row: the chosen plan's peak memory per NPU at most the device's capacity.

Why one binary per plan rather than one per knob: a plan's knobs interact non-linearly (the pipeline bubble is
``(pp - 1) / v`` stage passes, each stage's pass is ``1 / pp`` of the layers over ``tp`` devices, the DP
reduction overlaps the last backward passes), so their separable linearisation would be an approximation. With a
closed-form time per plan the program is exact, and it has the same optimum as enumerating the plans (the tests
check that on small spaces); HiGHS proves it at its root. Plans that cannot fit are kept in the program and cut
by the memory row, and counted as the generator counts them; a space no plan fits is infeasible, explained by the
least memory any plan needs against the capacity.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import format_bytes
from stratasim.optimize.first_order import FirstOrderError, FirstOrderModel, PlanEstimates, plan_keys
from stratasim.optimize.milp import Milp
from stratasim.optimize.result import Objective

__all__ = [
    "OptimizeError",
    "PlanChoice",
    "PlanPoints",
    "PlanSpace",
    "choose_plan",
    "optimal_plan",
    "plan_costs",
    "plan_space",
]


class OptimizeError(StrataSimError):
    """A study or space the optimiser cannot solve; the message says which constraint or input is to blame."""


@dataclass(frozen=True)
class PlanSpace:
    """Every valid plan of a space with its first-order estimate (``estimates``, in the order of its ``plans``)
    and global batch; ``capacity`` the bytes per NPU a plan may hold (None: not checked, ``unchecked`` says why);
    ``skipped`` the combinations that are no plan, by reason, as the generator counts them."""

    estimates: PlanEstimates
    batches: np.ndarray
    capacity: int | None
    unchecked: str
    skipped: Counter[str]

    @property
    def unfit(self) -> int:
        """How many plans need more memory than the capacity."""
        return 0 if self.capacity is None else int((self.estimates.memory_bytes > self.capacity).sum())

    def describe(self) -> str:
        """``416 plans, 263 do not fit in 80 GiB; skipped 256: 168 ...``."""
        line = f"{len(self.estimates.plans)} plans"
        if self.capacity is not None:
            line += f", {self.unfit} do not fit in {format_bytes(self.capacity)}"
        else:
            line += f" (memory not checked: {self.unchecked})"
        if self.skipped:
            reasons = ", ".join(f"{count} {why}" for why, count in self.skipped.most_common())
            line += f"; skipped {sum(self.skipped.values())}: {reasons}"
        return line


@dataclass(frozen=True)
class PlanPoints:
    """A plan space as the ``parallelism`` generator lists it: its ``points`` (``workload.parallelism.*`` keys),
    every valid plan whatever its memory; the combinations it ``skipped`` by reason; the ``capacity`` in bytes per
    NPU (None: not checked, ``unchecked`` says why)."""

    points: Sequence[Mapping[str, Any]]
    skipped: Mapping[str, int]
    capacity: int | None
    unchecked: str = ""


def plan_space(model: FirstOrderModel, listed: PlanPoints) -> PlanSpace:
    """The plans of ``listed``, each estimated by ``model``; a plan the first-order model cannot estimate is skipped
    under its reason. :class:`OptimizeError` when no plan is left."""
    skipped = Counter(listed.skipped)
    plans: list[Mapping[str, Any]] = []
    batches: list[int] = []
    for point in listed.points:
        try:
            batches.append(model.config(point).parallelism.batch)
        except FirstOrderError as exc:
            skipped[f"not estimated: {str(exc).partition(': ')[2]}"] += 1
            continue
        plans.append(point)
    if not plans:
        said = ", ".join(f"{count} {why}" for why, count in skipped.most_common()) or "an empty space"
        raise OptimizeError(f"the plan space has no plan to choose from: skipped {said}")
    estimates = model.estimate(plans)
    return PlanSpace(estimates, np.array(batches, dtype=np.int64), listed.capacity, listed.unchecked, skipped)


@dataclass(frozen=True)
class PlanChoice:
    """The program's answer: the chosen plan's ``index``, the solver's ``status`` (``optimal`` or ``time_limit``)
    and relative ``gap``, its wall time, and the program's size."""

    index: int
    status: str
    gap: float
    wall_s: float
    variables: int
    rows: int


def choose_plan(
    costs: Sequence[float], memory: Sequence[int], capacity: int | None, time_limit_s: float
) -> PlanChoice | None:
    """The plan of least cost whose ``memory`` is at most ``capacity`` (None: any), by the program: a binary per
    plan, one row choosing exactly one, one memory row. None when no plan fits (the program is infeasible).

    The costs are scaled by the largest magnitude first, so the solver's tolerances are relative to the space."""
    scale = max((abs(cost) for cost in costs), default=1.0) or 1.0
    milp = Milp()
    chosen = [milp.add_var(f"plan{i}", "binary", cost=cost / scale) for i, cost in enumerate(costs)]
    milp.add_row(((var, 1.0) for var in chosen), lower=1.0, upper=1.0)
    if capacity is not None:
        milp.add_row(((var, float(bytes_)) for var, bytes_ in zip(chosen, memory)), upper=float(capacity))
    solution = milp.solve(time_limit_s)
    if solution.status == "infeasible":
        return None
    index = next(i for i, var in enumerate(chosen) if solution.chosen(var))
    return PlanChoice(index, solution.status, solution.gap, solution.wall_s, milp.variables, milp.rows)


def plan_costs(space: PlanSpace, objective: Objective, price: float = 1.0) -> np.ndarray:
    """Each plan's cost to minimise: its iteration time in seconds (``time``), else minus its throughput (samples a
    second) per ``price`` (the system's dollars or watts)."""
    seconds = space.estimates.iteration_ps.astype(float) / 1e12
    if objective == "time":
        return seconds
    return -(space.batches / seconds) / price


def optimal_plan(space: PlanSpace, costs: np.ndarray, time_limit_s: float) -> PlanChoice:
    """The cheapest plan of ``space`` that fits; :class:`OptimizeError` naming the binding constraint when none
    does."""
    if not (time_limit_s > 0 and math.isfinite(time_limit_s)):
        raise OptimizeError(f"the time limit must be a positive number of seconds, not {time_limit_s}")
    memory = space.estimates.memory_bytes
    choice = choose_plan(costs.tolist(), memory.tolist(), space.capacity, time_limit_s)
    if choice is None:
        least = int(np.argmin(memory))
        keys = ", ".join(f"{key}={value}" for key, value in plan_keys(space.estimates.plans[least]).items())
        raise OptimizeError(
            f"no plan fits: the memory row binds — the least memory any of the {len(memory)} plans needs is "
            f"{format_bytes(int(memory[least]))} per NPU ({keys}), over the capacity of "
            f"{format_bytes(space.capacity or 0)}; give the NPUs more memory, add NPUs, or widen the space "
            "(higher tp or pp, full recompute, a higher zero stage)"
        )
    return choice
