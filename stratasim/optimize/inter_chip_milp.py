"""The inter-chip pass as one mixed-integer program (the derivation is in docs/explanation/optimal-mapping.md).

Binary ``y[a]`` picks one dimension assignment; binary ``x[k, s, p]`` picks kernel ``k``'s scheme ``s`` and its
stage ``p`` together (DFModel's matrix A joined with its one-hot scheme vectors); continuous ``w[t, s, s', p]`` is
at least the product of a tensor's producer choice ``(s, p)`` and consumer scheme ``s'`` (the lookup of eq. 6,
attributed to the producer's stage as matrix H does). Cross-stage sends need no variable: a tensor is carried by
stage ``p`` (matrix L) exactly when its producer sits at or before ``p`` and its consumer after, the difference
of two cumulative sums of ``x``. Every assignment prices the same choices differently, so its rows are switched
on by ``y[a]`` with a big-M of its own; ``T[a]`` is the slowest stage's time under assignment ``a`` (0 for the
others) and the objective ``sum((micro_batches[a] + pp[a] - 1) * T[a]) + G`` is exact.
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
    x: dict[tuple[int, int, int], int] = field(default_factory=dict)
    w: dict[tuple[int, int, int, int], int] = field(default_factory=dict)

    def decode(self, solution: MilpSolution) -> Mapping:
        """The mapping a solution chose."""
        chosen = next(a for a, var in enumerate(self.y) if solution.chosen(var))
        kernels = len(self.options[0].problem.graph.kernels)
        schemes, stages = [0] * kernels, [0] * kernels
        for (k, s, p), var in self.x.items():
            if solution.chosen(var):
                schemes[k], stages[k] = s, p
        return Mapping(self.options[chosen].option, tuple(schemes), tuple(stages))


def build_model(options: tuple[AssignmentCosts, ...], objective: Literal["time", "memory"]) -> InterChipModel:
    """The program minimising iteration time under the memory rows (``time``), or the memory of the fullest
    device without them (``memory``: what the least any mapping needs is, to explain an infeasible problem)."""
    problem = options[0].problem
    bounds = [_time_bound(costs) for costs in options]
    model = InterChipModel(Milp(), options, max(max(bounds) / 1e4, 1e-9), float(problem.memory_bytes))
    _add_choices(model)
    _add_conversion_products(model)
    if objective == "time":
        gradient = model.milp.add_var("G", cost=1.0)
        for a in range(len(options)):
            _add_time_rows(model, a, bounds[a] / model.time_scale)
            _add_gradient_rows(model, a, gradient)
            _add_memory_rows(model, a, None)
    else:
        fullest = model.milp.add_var("memory", cost=1.0)
        for a in range(len(options)):
            _add_memory_rows(model, a, fullest)
    return model


def _add_choices(model: InterChipModel) -> None:
    """One assignment; each kernel one (scheme, stage); stages that exist are used; stages grow along tensors."""
    milp, options = model.milp, model.options
    graph = options[0].problem.graph
    slots = max(c.stage_count for c in options)
    model.y = [milp.add_var(f"y[{a}]", "binary") for a in range(len(options))]
    milp.add_row(((var, 1.0) for var in model.y), 1.0, 1.0)
    for k, kernel in enumerate(graph.kernels):
        for s in range(len(kernel.schemes)):
            for p in range(slots):
                model.x[k, s, p] = milp.add_var(f"x[{kernel.name},{s},{p}]", "binary")
        milp.add_row(((model.x[k, s, p], 1.0) for s in range(len(kernel.schemes)) for p in range(slots)), 1.0, 1.0)
        for a, costs in enumerate(options):
            for s in range(len(kernel.schemes)):
                if math.isinf(costs.compute(k, s)):
                    milp.add_row([(model.y[a], 1.0)] + _in_stages(model, k, range(slots), s), upper=1.0)
    for p in range(1, slots):
        opened = [(model.y[a], -1.0) for a, c in enumerate(options) if c.stage_count > p]
        for k in range(len(graph.kernels)):
            milp.add_row(_in_stages(model, k, [p]) + opened, upper=0.0)
        milp.add_row([t for k in range(len(graph.kernels)) for t in _in_stages(model, k, [p])] + opened, lower=0.0)
    index = {kernel.name: k for k, kernel in enumerate(graph.kernels)}
    for tensor in graph.tensors if slots > 1 else ():
        source, target = index[tensor.source], index[tensor.target]
        milp.add_row(_stage_number(model, source, 1.0) + _stage_number(model, target, -1.0), upper=0.0)


def _in_stages(model: InterChipModel, kernel: int, stages: Iterable[int], scheme: int | None = None) -> Terms:
    """The terms summing to 1 when ``kernel`` sits in one of ``stages`` (under ``scheme`` if given)."""
    schemes = range(len(model.options[0].problem.graph.kernels[kernel].schemes)) if scheme is None else [scheme]
    return [(model.x[kernel, s, p], 1.0) for p in stages for s in schemes]


def _stage_number(model: InterChipModel, kernel: int, sign: float) -> Terms:
    """The terms summing to ``sign`` times the stage ``kernel`` sits in."""
    slots = max(c.stage_count for c in model.options)
    schemes = range(len(model.options[0].problem.graph.kernels[kernel].schemes))
    return [(model.x[kernel, s, p], sign * p) for s in schemes for p in range(1, slots)]


def _add_conversion_products(model: InterChipModel) -> None:
    """``w >= x[source, s, p] + (consumer uses s') - 1`` wherever some assignment makes the conversion cost."""
    graph = model.options[0].problem.graph
    index = {kernel.name: k for k, kernel in enumerate(graph.kernels)}
    slots = max(c.stage_count for c in model.options)
    for t, tensor in enumerate(graph.tensors):
        source, target = index[tensor.source], index[tensor.target]
        for s, first in enumerate(graph.kernels[source].schemes):
            for s2, second in enumerate(graph.kernels[target].schemes):
                if not any(costs.conversion(tensor, first, second) > 0 for costs in model.options):
                    continue
                for p in range(slots):
                    var = model.w[t, s, s2, p] = model.milp.add_var(f"w[{tensor.name},{s},{s2},{p}]", upper=1.0)
                    consumer = _in_stages(model, target, range(slots), s2)
                    model.milp.add_row([(var, 1.0), (model.x[source, s, p], -1.0)] + _negate(consumer), lower=-1.0)


def _negate(terms: Terms) -> Terms:
    return [(var, -c) for var, c in terms]


def _time_bound(costs: AssignmentCosts) -> float:
    """No stage of this assignment can take longer (a big-M): every kernel's dearest finite scheme, every
    conversion's dearest pair and every send."""
    graph = costs.problem.graph
    total = 0.0
    for k, kernel in enumerate(graph.kernels):
        total += max((c for s in range(len(kernel.schemes)) if math.isfinite(c := costs.compute(k, s))), default=0.0)
    for tensor in graph.tensors:
        pairs = [(a, b) for a in graph.kernel(tensor.source).schemes for b in graph.kernel(tensor.target).schemes]
        total += max(costs.conversion(tensor, a, b) for a, b in pairs) + costs.send(tensor.bytes)
    total = total * costs.repeats_per_stage + costs.send(costs.problem.boundary)
    for k, kernel in enumerate(graph.kernels):
        total += costs.repeats_per_stage * max(costs.gradient(k, s) for s in range(len(kernel.schemes)))
    return total


def _add_time_rows(model: InterChipModel, a: int, big_m: float) -> None:
    """``T[a] >= each of the stage's terms`` (or compute + network, and sends) when ``y[a]`` is 1."""
    costs, milp = model.options[a], model.milp
    graph = costs.problem.graph
    steps = costs.micro_batches + costs.pp - 1
    slowest = milp.add_var(f"T[{a}]", cost=steps)
    mult, scale = costs.repeats_per_stage, model.time_scale
    index = {kernel.name: k for k, kernel in enumerate(graph.kernels)}
    for p in range(costs.stage_count):
        compute: Terms = []
        for k in range(len(graph.kernels)):
            for s in range(len(graph.kernels[k].schemes)):
                if math.isfinite(cost := costs.compute(k, s)):
                    compute.append((model.x[k, s, p], mult * cost / scale))
        network: Terms = []
        for (t, s, s2, q), var in model.w.items():
            tensor = graph.tensors[t]
            first = graph.kernels[index[tensor.source]].schemes[s]
            second = graph.kernels[index[tensor.target]].schemes[s2]
            if q == p:
                network.append((var, mult * costs.conversion(tensor, first, second) / scale))
        sends, constant = _sends(model, costs, p, index)
        rows = [(compute, 0.0), (network, 0.0)] if costs.problem.overlap else [(compute + network, 0.0)]
        for group, fixed in rows + [(sends, constant)]:
            milp.add_row([(slowest, 1.0), (model.y[a], -big_m)] + _negate(group), lower=fixed - big_m)


def _sends(model: InterChipModel, costs: AssignmentCosts, p: int, index: dict[str, int]) -> tuple[Terms, float]:
    """Stage ``p``'s point-to-point time: terms and a constant (the boundary send when stages split repeats)."""
    graph = costs.problem.graph
    if graph.repeat > 1:
        return [], (costs.send(costs.problem.boundary) / model.time_scale if costs.pp > 1 else 0.0)
    terms: Terms = []
    upto = range(p + 1)
    for tensor in graph.tensors:
        cost = costs.send(tensor.bytes) / model.time_scale
        if cost > 0:
            terms += [(v, cost) for v, _ in _in_stages(model, index[tensor.source], upto)]
            terms += [(v, -cost) for v, _ in _in_stages(model, index[tensor.target], upto)]
    return terms, 0.0


def _add_gradient_rows(model: InterChipModel, a: int, gradient: int) -> None:
    """``G >= each stage's gradient reductions`` when ``y[a]`` is 1 (stages reduce at once, on their own
    devices, so the slowest is exposed)."""
    costs = model.options[a]
    terms = _per_stage(model, costs, lambda k, s, p: costs.gradient(k, s) / model.time_scale)
    big_m = max((sum(c for _, c in row) for row in terms), default=0.0)
    if big_m <= 0:
        return
    for row in terms:
        model.milp.add_row([(gradient, 1.0), (model.y[a], -big_m)] + _negate(row), lower=-big_m)


def _add_memory_rows(model: InterChipModel, a: int, fullest: int | None) -> None:
    """Each stage's device memory at most the capacity when ``y[a]`` is 1; or, given ``fullest``, that variable
    at least every stage's memory."""
    costs, scale = model.options[a], model.memory_scale
    terms = _per_stage(model, costs, lambda k, s, p: costs.memory(k, s, p) / scale)
    most = max((sum(c for _, c in row) for row in terms), default=0.0)
    for row in terms:
        if fullest is not None:
            model.milp.add_row([(fullest, 1.0), (model.y[a], -most)] + _negate(row), lower=-most)
        elif most > 1.0:
            model.milp.add_row(row + [(model.y[a], most - 1.0)], upper=most)


def _per_stage(model: InterChipModel, costs: AssignmentCosts, cost: Callable[[int, int, int], float]) -> list[Terms]:
    """For each stage this assignment has, the terms ``repeats_per_stage * cost(k, s, p) * x[k, s, p]``; the
    big-M rows built on them use the sum of the dearest choice of every kernel, which no stage can exceed."""
    graph = costs.problem.graph
    rows = []
    for p in range(costs.stage_count):
        row: Terms = []
        for k, kernel in enumerate(graph.kernels):
            for s in range(len(kernel.schemes)):
                if math.isfinite(costs.compute(k, s)) and (c := costs.repeats_per_stage * cost(k, s, p)) > 0:
                    row.append((model.x[k, s, p], c))
        rows.append(row)
    return rows
