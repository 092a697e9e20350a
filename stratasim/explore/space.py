"""The trials a sweep's space expands to: every combination (grid) or points drawn with a seed (random)."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from stratasim.explore.sweep_file import Range, Sweep

__all__ = ["expand", "range_values", "draw", "written"]


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


def expand(sweep: Sweep) -> list[dict[str, Any]]:
    """Each trial's parameters, ``{dotted key: value}``, in a fixed order: the grid's combinations (the last key
    varying fastest), or the random search's draws (repeats dropped). Model-based searches choose their trials
    as they go (:mod:`stratasim.explore.model_search`) and are refused here."""
    space = sweep.section.space
    search = sweep.section.search
    keys = list(space)
    if search.method == "grid":
        axes = [values if isinstance(values, list) else range_values(values) for values in space.values()]
        combos = itertools.islice(itertools.product(*axes), search.trials)  # all, unless trials caps them
        return [dict(zip(keys, combo)) for combo in combos]
    if search.method != "random":
        raise ValueError(f"a {search.method} search has no fixed list of trials")
    rng = random.Random(search.seed)
    trials: dict[str, dict[str, Any]] = {}
    assert search.trials is not None  # checked when the sweep was read
    for _ in range(search.trials * 20):  # a small space may hold fewer distinct points than asked for
        params = {key: draw(values, rng) for key, values in space.items()}
        trials.setdefault(repr(sorted(params.items())), params)
        if len(trials) == search.trials:
            break
    return list(trials.values())
