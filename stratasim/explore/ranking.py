"""Which trials count and which are best: the constraints kept, the Pareto front, a ranking by the first
objective."""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.explore.store import TrialRecord
from stratasim.explore.sweep_file import Sweep

__all__ = ["feasible", "pareto", "ranked"]


def feasible(sweep: Sweep, record: TrialRecord) -> bool:
    """Whether a trial finished and keeps every constraint."""
    if record.status != "done":
        return False
    for constraint in sweep.section.constraints:
        value = record.metrics[constraint.metric]
        if (constraint.min is not None and value < constraint.min) or (
            constraint.max is not None and value > constraint.max
        ):
            return False
    return True


def pareto(sweep: Sweep, records: list[TrialRecord]) -> list[TrialRecord]:
    """The feasible trials no other feasible trial matches or beats on every objective and beats on one, in
    trial order."""
    signs = [1.0 if objective.goal == "min" else -1.0 for objective in sweep.section.objectives]
    names = [objective.metric for objective in sweep.section.objectives]
    candidates = [r for r in records if feasible(sweep, r)]
    scores = [[sign * r.metrics[name] for sign, name in zip(signs, names)] for r in candidates]

    def beaten(mine: list[float]) -> bool:
        return any(all(o <= m for o, m in zip(other, mine)) and other != mine for other in scores)

    return [record for record, score in zip(candidates, scores) if not beaten(score)]


def ranked(sweep: Sweep, records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """``records`` best first by the first objective (ties in trial order); the failed and infeasible last, in
    trial order."""
    objective = sweep.section.objectives[0]
    sign = 1.0 if objective.goal == "min" else -1.0
    good = sorted(
        (r for r in records if feasible(sweep, r)), key=lambda r: (sign * r.metrics[objective.metric], r.number)
    )
    return good + [r for r in records if not feasible(sweep, r)]
