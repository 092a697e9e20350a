"""A multi-fidelity ladder: screen every trial cheaply, keep the best, evaluate those again at a higher fidelity,
and say how the ranking moved between levels and how much time screening saved.

The ranking is by the first objective over feasible trials (failed and infeasible ones rank last, in trial
order). Kendall's tau-b compares the two rankings of the trials both levels evaluated: 1 the same order, -1 the
reverse. After a screening level (``estimate:``), the next level's trials carry ``screen_error``, the relative
error of the estimate of the first objective, and its outcome gives their range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stratasim.explore.ranking import feasible, pareto, ranked
from stratasim.explore.store import TrialRecord
from stratasim.explore.sweep_file import Fidelity, Sweep

__all__ = ["LevelOutcome", "kendall_tau", "kept", "level_outcome", "time_saved"]

_TOP = 5  # how many of the best a level's comparison with the one before looks at


@dataclass(frozen=True)
class LevelOutcome:
    """What one level did: its name, the trials it evaluated (numbers), those it passed on, its trials' summed wall
    time and, from the second level on, Kendall's tau between its ranking and the level before's over the trials
    both evaluated (None: fewer than two) and the trials that moved into or out of the best ``_TOP``; after a
    screening level, the lowest and highest ``screen_error`` of its trials (None: none carries one)."""

    name: str
    evaluated: list[int]
    kept: list[int]
    wall_seconds: float
    tau: float | None = None
    moved_in: list[int] | None = None
    moved_out: list[int] | None = None
    screen_error: tuple[float, float] | None = None


def kept(sweep: Sweep, level: Fidelity, records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The trials of ``records`` that ``level.keep`` passes on to the next level, in trial order."""
    rule = level.keep
    assert rule is not None
    if rule.pareto:
        chosen = pareto(sweep, list(records))
    else:
        good = [r for r in ranked(sweep, records) if feasible(sweep, r)]
        count = rule.top if rule.top is not None else max(1, math.ceil((rule.fraction or 0) * len(records)))
        chosen = good[:count]
    return sorted(chosen, key=lambda r: r.number)


def level_outcome(
    sweep: Sweep,
    level: Fidelity,
    records: Sequence[TrialRecord],
    passed: Sequence[TrialRecord],
    before: Sequence[TrialRecord] | None,
) -> LevelOutcome:
    """Sum up a level: ``records`` it evaluated, ``passed`` on, compared with the level ``before`` (if any)."""
    outcome = LevelOutcome(
        level.name, [r.number for r in records], [r.number for r in passed], sum(r.wall_seconds for r in records)
    )
    if before is None:
        return outcome
    here = {r.number for r in records}
    then = [r.number for r in ranked(sweep, [r for r in before if r.number in here])]
    now = [r.number for r in ranked(sweep, records)]
    top = min(_TOP, len(now))
    errors = [r.metrics["screen_error"] for r in records if "screen_error" in r.metrics]
    return LevelOutcome(
        outcome.name,
        outcome.evaluated,
        outcome.kept,
        outcome.wall_seconds,
        tau=kendall_tau([then.index(n) for n in now], list(range(len(now)))) if len(now) > 1 else None,
        moved_in=sorted(set(now[:top]) - set(then[:top])),
        moved_out=sorted(set(then[:top]) - set(now[:top])),
        screen_error=(min(errors), max(errors)) if errors else None,
    )


def time_saved(levels: Sequence[LevelOutcome]) -> tuple[float, float]:
    """What the ladder took (every level's trials) and what evaluating every trial at the last level would have
    (its mean trial time times the trial count): both in seconds of trial time."""
    spent = sum(level.wall_seconds for level in levels)
    last = levels[-1]
    everything = last.wall_seconds / len(last.evaluated) * len(levels[0].evaluated) if last.evaluated else 0.0
    return spent, everything


def kendall_tau(first: Sequence[float], second: Sequence[float]) -> float:
    """Kendall's tau-b of two rankings of the same items (ties allowed): 1 when they agree on every pair's order."""
    concordant = discordant = tied_first = tied_second = 0
    for i in range(len(first)):
        for j in range(i + 1, len(first)):
            a = (first[i] > first[j]) - (first[i] < first[j])
            b = (second[i] > second[j]) - (second[i] < second[j])
            if a == 0 and b == 0:
                continue
            if a == 0:
                tied_first += 1
            elif b == 0:
                tied_second += 1
            elif a == b:
                concordant += 1
            else:
                discordant += 1
    pairs = concordant + discordant
    denominator = math.sqrt((pairs + tied_first) * (pairs + tied_second))
    return (concordant - discordant) / denominator if denominator else 1.0
