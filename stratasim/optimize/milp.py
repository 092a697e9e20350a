"""A small typed wrapper over HiGHS (``highspy``) for the mixed-integer programs of ``stratasim optimize``.

A :class:`Milp` collects variables (binary, integer or continuous, each with bounds and an objective cost) and
linear rows, then :meth:`Milp.solve` minimises in one call. HiGHS runs silent, on one thread with a fixed seed,
so the same program gives the same answer every time. A solve that runs out of time returns its best solution
(the incumbent) with the gap it proved; one that found none raises :class:`SolverError`.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

import highspy

from stratasim.kernel.errors import StrataSimError

__all__ = ["Milp", "MilpSolution", "SolverError", "VarKind", "Status", "silent_highs"]

VarKind: TypeAlias = Literal["binary", "integer", "continuous"]
Status: TypeAlias = Literal["optimal", "time_limit", "infeasible"]

_INTEGRALITY = {
    "binary": highspy.HighsVarType.kInteger,
    "integer": highspy.HighsVarType.kInteger,
    "continuous": highspy.HighsVarType.kContinuous,
}


class SolverError(StrataSimError):
    """The solver ended without a usable answer (no solution within the time limit, or a solver failure)."""


@dataclass(frozen=True)
class MilpSolution:
    """What a solve found: ``status``, the ``objective`` of the solution, the ``bound`` proved on the optimum,
    the relative ``gap`` between them (0 when proved optimal), each variable's value and the solver's wall time.

    On an ``infeasible`` status ``objective``, ``bound`` and ``gap`` are NaN and ``values`` is empty.
    """

    status: Status
    objective: float
    bound: float
    gap: float
    values: tuple[float, ...]
    wall_s: float

    def value(self, var: int) -> float:
        """The value of variable ``var`` (as :meth:`Milp.add_var` numbered it)."""
        return self.values[var]

    def chosen(self, var: int) -> bool:
        """Whether binary variable ``var`` is 1 (rounded: the solver allows a small integrality tolerance)."""
        return self.values[var] > 0.5


class Milp:
    """A minimisation program built variable by variable and row by row.

    Variables are numbered from 0 in the order :meth:`add_var` adds them; a row is a sum of ``(variable,
    coefficient)`` terms between a lower and an upper bound (either may be infinite).
    """

    def __init__(self) -> None:
        self._lower: list[float] = []
        self._upper: list[float] = []
        self._cost: list[float] = []
        self._kind: list[VarKind] = []
        self._names: list[str] = []
        self._row_lower: list[float] = []
        self._row_upper: list[float] = []
        self._starts: list[int] = [0]
        self._index: list[int] = []
        self._value: list[float] = []

    @property
    def variables(self) -> int:
        """How many variables the program has."""
        return len(self._cost)

    @property
    def rows(self) -> int:
        """How many rows the program has."""
        return len(self._row_lower)

    def add_var(
        self, name: str, kind: VarKind = "continuous", lower: float = 0.0, upper: float = math.inf, cost: float = 0.0
    ) -> int:
        """A new variable (binary ones are bounded to [0, 1] whatever ``lower`` and ``upper`` say); its number."""
        if kind == "binary":
            lower, upper = 0.0, 1.0
        self._lower.append(lower)
        self._upper.append(upper)
        self._cost.append(cost)
        self._kind.append(kind)
        self._names.append(name)
        return len(self._cost) - 1

    def add_row(self, terms: Iterable[tuple[int, float]], lower: float = -math.inf, upper: float = math.inf) -> None:
        """The row ``lower <= sum(coefficient * variable) <= upper``; terms on the same variable add up."""
        merged: dict[int, float] = {}
        for var, coefficient in terms:
            if not 0 <= var < len(self._cost):
                raise ValueError(f"row names variable {var}, but the program has {len(self._cost)}")
            merged[var] = merged.get(var, 0.0) + coefficient
        for var, coefficient in merged.items():
            if coefficient != 0.0:
                self._index.append(var)
                self._value.append(coefficient)
        self._starts.append(len(self._index))
        self._row_lower.append(lower)
        self._row_upper.append(upper)

    def solve(self, time_limit_s: float = 60.0, gap: float = 1e-6, presolve: bool = True) -> MilpSolution:
        """Minimise within ``time_limit_s`` seconds, stopping when the relative ``gap`` is proved; ``presolve``
        False skips HiGHS's presolve, which costs more than it saves on programs whose root LP is tight."""
        highs = silent_highs()
        for option, value in (
            ("time_limit", float(time_limit_s)),
            ("mip_rel_gap", float(gap)),
            ("presolve", "on" if presolve else "off"),
        ):
            highs.setOptionValue(option, value)
        highs.passModel(self._lp())
        start = time.perf_counter()
        highs.run()
        return _solution(highs, time.perf_counter() - start, time_limit_s)

    def _lp(self) -> highspy.HighsLp:
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = len(self._cost), len(self._row_lower)
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = self._cost, self._lower, self._upper
        lp.row_lower_, lp.row_upper_ = self._row_lower, self._row_upper
        lp.integrality_ = [_INTEGRALITY[kind] for kind in self._kind]
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = lp.num_col_, lp.num_row_
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = self._starts, self._index, self._value
        return lp


def silent_highs() -> highspy.Highs:
    """A HiGHS instance that prints nothing, on one thread with a fixed seed: every solve in StrataSim makes its
    instance here, since HiGHS's thread pool is global to the process (an instance asking for another thread count
    than the first one fails to run). Its C++ constructor writes a banner straight to file descriptor 1 the
    first time a process makes one, before any option can be set, so descriptor 1 points at the null device
    while it runs."""
    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        highs = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    for option, value in (("output_flag", False), ("threads", 1), ("random_seed", 0)):
        highs.setOptionValue(option, value)
    return highs


def _solution(highs: highspy.Highs, wall_s: float, time_limit_s: float) -> MilpSolution:
    status = highs.getModelStatus()
    info = highs.getInfo()
    if status == highspy.HighsModelStatus.kInfeasible:
        return MilpSolution("infeasible", math.nan, math.nan, math.nan, (), wall_s)
    found = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if status == highspy.HighsModelStatus.kTimeLimit and not found:
        raise SolverError(f"the solver found no solution within its time limit of {time_limit_s:g} s")
    if status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit):
        raise SolverError(f"the solver stopped without an answer: {highs.modelStatusToString(status)}")
    values = tuple(highs.getSolution().col_value)
    objective = info.objective_function_value
    optimal = status == highspy.HighsModelStatus.kOptimal
    bound = info.mip_dual_bound if math.isfinite(info.mip_dual_bound) else objective
    gap = info.mip_gap if math.isfinite(info.mip_gap) else (0.0 if optimal else math.inf)
    return MilpSolution("optimal" if optimal else "time_limit", objective, bound, gap, values, wall_s)
