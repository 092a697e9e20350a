"""The trials a sweep's space expands to: every combination (grid) or points drawn with a seed (random).

Generator entries are expanded first, against the base study (:func:`resolve`): each becomes a list of points,
one axis like a list of values, whose point's keys a trial's parameters carry in its place.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from stratasim.config.study_file import parse_study
from stratasim.explore.generators import Generated, Generator, GeneratorError
from stratasim.explore.sweep_file import Range, Sweep
from stratasim.kernel.errors import ConfigError
from stratasim.study.budget import DEFAULT_BUDGET, Budget, refuse_npus, refuse_over

__all__ = ["Space", "resolve", "check_points", "expand", "range_values", "draw", "written"]


_CANDIDATE_BYTES = 2048
"""Memory a generator's candidate takes, at most: the point it may become, with its keys."""
_CANDIDATE_EVENTS = 1000
"""A candidate's work in engine events: validating it (and pricing its memory) takes as long as about this many."""


@dataclass(frozen=True)
class Space:
    """A sweep's space with its generators expanded: ``axes`` by entry name (a generator's as its list of
    points) and what each generator produced."""

    axes: dict[str, list[Any] | Range]
    generated: dict[str, Generated]

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A trial's parameters from one value per entry: a generator's point contributes its keys."""
        params: dict[str, Any] = {}
        for name, value in values.items():
            if name in self.generated:
                params.update(value)
            else:
                params[name] = value
        return params

    def notes(self) -> list[str]:
        """A line per generator: how many points it gave and what it skipped, by reason."""
        return [generated.summary(name) for name, generated in self.generated.items()]


def resolve(sweep: Sweep, budget: Budget = DEFAULT_BUDGET) -> Space:
    """Expand the sweep's generator entries against its base study, each once sized within ``budget``; one
    :class:`ConfigError` naming the entry (and option) if one cannot apply, gives nothing, or sets a key another
    entry sets, and :class:`~stratasim.study.budget.BudgetError` if one would try more than the budget allows."""
    space = sweep.section.space
    entries = {name: entry for name, entry in space.items() if isinstance(entry, Generator)}
    generated: dict[str, Generated] = {}
    if entries:
        study = parse_study(sweep.base, sweep.base_source)
        for name, entry in entries.items():
            try:
                size = entry.size(study)
                refuse_npus(f"{sweep.source}: space.{name}", size.npus, budget, f"space.{name}'s chips")
                refuse_over(
                    f"{sweep.source}: space.{name} ({size.candidates:,} combinations to try)",
                    size.candidates * _CANDIDATE_BYTES + size.bytes,
                    size.candidates * _CANDIDATE_EVENTS,
                    budget,
                    f"space.{name}'s options (list fewer values)",
                )
                generated[name] = entry.generate(study)
            except GeneratorError as exc:
                raise ConfigError(sweep.source, [(f"space.{name}.{exc.option}", str(exc))]) from None
            if not generated[name].points:
                raise ConfigError(sweep.source, [(f"space.{name}", f"nothing to try: {generated[name].describe()}")])
    setters: dict[str, str] = {}
    for name in space:
        keys = {key for point in generated[name].points for key in point} if name in generated else {name}
        for key in sorted(keys):
            if key in setters:
                raise ConfigError(sweep.source, [(f"space.{name}", f"sets {key}, which space.{setters[key]} sets too")])
            setters[key] = name
    axes = {
        name: generated[name].points if name in generated else cast(list[Any] | Range, entry)
        for name, entry in space.items()
    }
    return Space(axes, generated)


def range_values(values: Range) -> list[Any]:
    """A range's ``count`` evenly (or log-) spaced values, written back with its unit."""
    low, high, unit = values.bounds()
    count = values.count or 2
    if values.log:
        points = [math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / (count - 1)) for i in range(count)]
    else:
        points = [low + (high - low) * i / (count - 1) for i in range(count)]
    return list(dict.fromkeys(written(point, values, unit) for point in points))


def draw(values: list[Any] | Range, rng: random.Random) -> Any:
    """One value of a list or a range, drawn with ``rng``."""
    if isinstance(values, list):
        return values[rng.randrange(len(values))]
    low, high, unit = values.bounds()
    point = math.exp(rng.uniform(math.log(low), math.log(high))) if values.log else rng.uniform(low, high)
    return written(point, values, unit)


def written(point: float, values: Range, unit: str) -> Any:
    """A point of a range as the study reads it: an int for an integer range, else a number or ``<number><unit>``."""
    if values.integer:
        return int(round(point))
    number = float(f"{point:.6g}")
    return f"{number:g}{unit}" if unit else number


_TRIAL_BYTES = 2048
"""Memory a trial of a sweep takes before it runs (its parameters, its record), at most."""


def check_points(sweep: Sweep, space: Space, budget: Budget) -> None:
    """Refuse a sweep whose list of trials would not fit ``budget``'s memory, before :func:`expand` lists them: a
    grid's size is the product of its axes' lengths (capped by ``search.trials``), a search's its ``trials``."""
    search = sweep.section.search
    if search.method == "grid":
        points = math.prod(
            len(values) if isinstance(values, list) else (values.count or 2) for values in space.axes.values()
        )
        points = min(points, search.trials) if search.trials is not None else points
    else:
        points = search.trials or 0
    reduce = "the space's values or ranges' counts (or search.trials)"
    refuse_over(f"{sweep.source}: {points:,} trials", points * _TRIAL_BYTES, 0, budget, reduce)


def expand(sweep: Sweep, space: Space | None = None, budget: Budget = DEFAULT_BUDGET) -> list[dict[str, Any]]:
    """Each trial's parameters, ``{dotted key: value}``, in a fixed order: the grid's combinations (the last
    entry varying fastest), or the random search's draws (repeats dropped). ``space``: the sweep's, resolved
    (:func:`resolve`, within ``budget``), if it already is. Model-based searches choose their trials as they go
    (:mod:`stratasim.explore.model_search`) and are refused here."""
    space = space or resolve(sweep, budget)
    search = sweep.section.search
    keys = list(space.axes)
    if search.method == "grid":
        axes = [values if isinstance(values, list) else range_values(values) for values in space.axes.values()]
        combos = itertools.islice(itertools.product(*axes), search.trials)  # all, unless trials caps them
        return [space.params(dict(zip(keys, combo))) for combo in combos]
    if search.method != "random":
        raise ValueError(f"a {search.method} search has no fixed list of trials")
    rng = random.Random(search.seed)
    trials: dict[str, dict[str, Any]] = {}
    assert search.trials is not None  # checked when the sweep was read
    for _ in range(search.trials * 20):  # a small space may hold fewer distinct points than asked for
        params = space.params({key: draw(values, rng) for key, values in space.axes.items()})
        trials.setdefault(repr(sorted(params.items())), params)
        if len(trials) == search.trials:
            break
    return list(trials.values())
