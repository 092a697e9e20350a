"""The inter-chip pass as one mixed-integer program (the derivation is in docs/explanation/optimal-mapping.md).

Binary ``y[a]`` picks one dimension assignment. Every assignment prices the same choices differently, so the
choices are copied per assignment (a disjunctive formulation, which needs no big-M): binary ``x[a, k, s, p]``
picks kernel ``k``'s scheme ``s`` and pipeline stage ``p`` together under assignment ``a`` (DFModel's matrix A
joined with its one-hot scheme vectors), and sums to ``y[a]`` for every kernel, so only the chosen assignment's
copy is non-zero. Continuous ``w[a, t, s, s', p]`` is at least the product of a tensor's producer choice
``(s, p)`` and its consumer's scheme ``s'`` (the lookup of eq. 6, attributed to the producer's stage as matrix H
does). Cross-stage sends need no variable: a tensor is carried by stage ``p`` (matrix L) exactly when its
producer sits at or before ``p`` and its consumer after, the difference of two cumulative sums of ``x``.
``T[a]`` is at least every stage's time under assignment ``a`` (0 for the others), ``G`` at least every stage's
gradient reductions, and the objective ``sum((micro_batches[a] + pp[a] - 1) * T[a]) + G`` is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from stratasim.optimize.inter_chip_costs import AssignmentCosts, Mapping
from stratasim.optimize.milp import Milp, MilpSolution

__all__ = ["InterChipModel", "build_model"]

Terms = list[tuple[int, float]]


@dataclass
class InterChipModel:
    """The program and where each decision lives in it; ``time_scale`` ps and ``memory_scale`` bytes are one
    unit of its rows (the solver works best near 1)."""

    milp: Milp
    options: tuple[AssignmentCosts, ...]
    time_scale: float
    memory_scale: float
    y: list[int] = field(default_factory=list)
    x: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    w: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)
    stage_of: dict[int, int] = field(default_factory=dict)
    """The stage each ``x`` variable puts its kernel in."""
    in_stage: dict[tuple[int, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    """``(variable, kernel, scheme)`` of every ``x`` variable of an assignment and stage."""

    def decode(self, solution: MilpSolution) -> Mapping:
        """The mapping a solution chose."""
        chosen = next(a for a, var in enumerate(self.y) if solution.chosen(var))
        kernels = len(self.options[0].problem.graph.kernels)
        schemes, stages = [0] * kernels, [0] * kernels
        for (a, k, s, p), var in self.x.items():
            if a == chosen and solution.chosen(var):
                schemes[k], stages[k] = s, p
        return Mapping(self.options[chosen].option, tuple(schemes), tuple(stages))

    def choices(self, a: int, kernel: int, stages: Iterable[int], scheme: int | None = None) -> Terms:
        """The terms summing to 1 when, under assignment ``a``, ``kernel`` sits in one of ``stages`` (under
        ``scheme`` if given); choices that assignment rules out have no variable."""
        schemes = range(len(self.options[a].problem.graph.kernels[kernel].schemes)) if scheme is None else [scheme]
        return [(self.x[a, kernel, s, p], 1.0) for p in stages for s in schemes if (a, kernel, s, p) in self.x]


def build_model(options: tuple[AssignmentCosts, ...], objective: Literal["time", "memory"]) -> InterChipModel:
    """The program minimising iteration time under the memory rows (``time``), or the memory of the fullest
    device without them (``memory``: the least any mapping needs, to explain an infeasible problem)."""
    problem = options[0].problem
    largest = max(_time_bound(costs) for costs in options)
    model = InterChipModel(Milp(), options, max(largest / 1e4, 1e-9), float(problem.memory_bytes))
    model.y = [model.milp.add_var(f"y[{a}]", "binary") for a in range(len(options))]
    model.milp.add_row(((var, 1.0) for var in model.y), 1.0, 1.0)
    gradient = model.milp.add_var("G", cost=1.0) if objective == "time" else -1
    fullest = model.milp.add_var("memory", cost=1.0) if objective == "memory" else -1
    for a, costs in enumerate(options):
        _add_choices(model, a)
        _add_conversion_products(model, a)
        memory = _scaled(costs.memory, model.memory_scale)
        if objective == "time":
            _add_time_rows(model, a)
            _add_stage_rows(model, a, _scaled(_per_iteration(costs), model.time_scale), gradient)
            _add_stage_rows(model, a, memory, None)
        else:
            _add_stage_rows(model, a, memory, fullest)
    return model


def _scaled(cost: Callable[[int, int, int], float], scale: float) -> Callable[[int, int, int], float]:
    """``cost(kernel, scheme, stage)`` in the program's units."""
    return lambda k, s, p: cost(k, s, p) / scale


def _per_iteration(costs: AssignmentCosts) -> Callable[[int, int, int], float]:
    """A kernel's gradient reductions under a scheme, whatever its stage."""
    return lambda k, s, _p: costs.gradient(k, s)


def _add_choices(model: InterChipModel, a: int) -> None:
    """Under assignment ``a``: each kernel one (scheme, stage) when ``y[a]`` is 1 (a scheme the kernel cannot
    run on its TP group has no variable); every stage used; stages growing along tensors."""
    milp, costs = model.milp, model.options[a]
    graph = costs.problem.graph
    stages = range(costs.stage_count)
    for k, kernel in enumerate(graph.kernels):
        for s in range(len(kernel.schemes)):
            if math.isfinite(costs.compute(k, s)):
                for p in stages:
                    var = model.x[a, k, s, p] = milp.add_var(f"x[{a},{kernel.name},{s},{p}]", "binary")
                    model.stage_of[var] = p
                    model.in_stage.setdefault((a, p), []).append((var, k, s))
        milp.add_row(model.choices(a, k, stages) + [(model.y[a], -1.0)], 0.0, 0.0)
    if costs.stage_count == 1:
        return
    for p in stages:
        members = [t for k in range(len(graph.kernels)) for t in model.choices(a, k, [p])]
        milp.add_row(members + [(model.y[a], -1.0)], lower=0.0)
    index = {kernel.name: k for k, kernel in enumerate(graph.kernels)}
    for tensor in graph.tensors:
        source = model.choices(a, index[tensor.source], stages)
        target = model.choices(a, index[tensor.target], stages)
        milp.add_row(_weighted(model, source, 1.0) + _weighted(model, target, -1.0), upper=0.0)


def _weighted(model: InterChipModel, terms: Terms, sign: float) -> Terms:
    """The terms weighted by the stage each choice puts its kernel in (their sum is that stage number)."""
    return [(var, sign * model.stage_of[var]) for var, _ in terms if model.stage_of[var] > 0]


def _add_conversion_products(model: InterChipModel, a: int) -> None:
    """``w >= x[a, source, s, p] + (consumer uses s' under a) - y[a]`` wherever the conversion costs."""
    costs = model.options[a]
    graph = costs.problem.graph
    index = {kernel.name: k for k, kernel in enumerate(graph.kernels)}
    stages = range(costs.stage_count)
    for t, tensor in enumerate(graph.tensors):
        source, target = index[tensor.source], index[tensor.target]
        for s, first in enumerate(graph.kernels[source].schemes):
            for s2, second in enumerate(graph.kernels[target].schemes):
                consumer = model.choices(a, target, stages, s2)
                if costs.conversion(tensor, first, second) <= 0 or not consumer:
                    continue
                for p in stages:
                    if (a, source, s, p) not in model.x:
                        continue
                    var = model.w[a, t, s, s2, p] = model.milp.add_var(f"w[{a},{tensor.name},{s},{s2},{p}]")
                    row = [(var, 1.0), (model.x[a, source, s, p], -1.0), (model.y[a], 1.0)]
                    model.milp.add_row(row + [(v, -c) for v, c in consumer], lower=0.0)


def _time_bound(costs: AssignmentCosts) -> float:
    """No stage or gradient reduction of this assignment can take longer: every kernel's dearest finite scheme,
    every conversion's dearest pair and every send (what the program's time unit is scaled by)."""
    graph = costs.problem.graph
    total = costs.send(costs.problem.boundary)
    for k, kernel in enumerate(graph.kernels):
        finite = [s for s in range(len(kernel.schemes)) if math.isfinite(costs.compute(k, s))]
        total += costs.repeats_per_stage * max((costs.compute(k, s) + costs.gradient(k, s) for s in finite), default=0)
    for tensor in graph.tensors:
        pairs = [(a, b) for a in graph.kernel(tensor.source).schemes for b in graph.kernel(tensor.target).schemes]
        total += costs.repeats_per_stage * max(costs.conversion(tensor, a, b) for a, b in pairs)
        total += costs.send(tensor.bytes)
    return total


def _add_time_rows(model: InterChipModel, a: int) -> None:
    """``T[a] >=`` each stage's compute, conversions and sends (or compute + conversions, and sends)."""
    costs, milp = model.options[a], model.milp
    graph = costs.problem.graph
    slowest = milp.add_var(f"T[{a}]", cost=costs.micro_batches + costs.pp - 1)
    mult, scale = costs.repeats_per_stage, model.time_scale
    index = {kernel.name: k for k, kernel in enumerate(graph.kernels)}
    for p in range(costs.stage_count):
        compute = [
            (var, mult * costs.compute(k, s) / scale) for (b, k, s, q), var in model.x.items() if (b, q) == (a, p)
        ]
        network: Terms = []
        for (b, t, s, s2, q), var in model.w.items():
            if (b, q) == (a, p):
                tensor = graph.tensors[t]
                first = graph.kernels[index[tensor.source]].schemes[s]
                second = graph.kernels[index[tensor.target]].schemes[s2]
                network.append((var, mult * costs.conversion(tensor, first, second) / scale))
        sends, constant = _sends(model, a, p, index)
        rows = [(compute, 0.0), (network, 0.0)] if costs.problem.overlap else [(compute + network, 0.0)]
        for group, fixed in rows + [(sends, constant)]:
            milp.add_row([(slowest, 1.0), (model.y[a], -fixed)] + [(v, -c) for v, c in group], lower=0.0)


def _sends(model: InterChipModel, a: int, p: int, index: dict[str, int]) -> tuple[Terms, float]:
    """Stage ``p``'s point-to-point time under ``a``: terms, and a constant paid when ``y[a]`` is 1 (the boundary
    send when stages split repetitions)."""
    costs = model.options[a]
    graph = costs.problem.graph
    if graph.repeat > 1:
        return [], (costs.send(costs.problem.boundary) / model.time_scale if costs.pp > 1 else 0.0)
    terms: Terms = []
    upto = range(p + 1)
    for tensor in graph.tensors:
        cost = costs.send(tensor.bytes) / model.time_scale
        if cost > 0:
            terms += [(v, cost) for v, _ in model.choices(a, index[tensor.source], upto)]
            terms += [(v, -cost) for v, _ in model.choices(a, index[tensor.target], upto)]
    return terms, 0.0


def _add_stage_rows(model: InterChipModel, a: int, cost: Callable[[int, int, int], float], bound: int | None) -> None:
    """For each stage of assignment ``a``, ``sum(repeats_per_stage * cost(k, s, p) * x[a, k, s, p])`` at most
    variable ``bound`` (gradient reductions, the fullest memory), or at most 1 with no ``bound`` (memory against
    the capacity, which the memory cost is scaled by)."""
    costs = model.options[a]
    for p in range(costs.stage_count):
        row = [
            (var, costs.repeats_per_stage * c)
            for var, k, s in model.in_stage.get((a, p), [])
            if (c := cost(k, s, p)) > 0
        ]
        if bound is not None:
            model.milp.add_row([(bound, 1.0)] + [(v, -c) for v, c in row], lower=0.0)
        elif sum(c for _, c in row) > 1.0:
            model.milp.add_row(row, upper=1.0)
