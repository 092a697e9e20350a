"""PNG charts of a sweep's results: the Pareto front (two objectives) or the objective trial by trial, and the first
objective against each parameter. matplotlib is part of the ``explore`` extra."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from stratasim.explore.results import SweepResults
from stratasim.explore.sweep_file import Range, split_quantity
from stratasim.kernel.errors import StrataSimError

__all__ = ["draw_plots"]

_MAX_TICKS = 40  # categories beyond these, or with a longer label, are numbered instead of named
_MAX_LABEL = 40


def draw_plots(results: SweepResults, out: str | Path) -> list[Path]:
    """Draw the charts into the folder ``out`` (created if missing) and return the files written."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StrataSimError(f"--out {folder}: cannot make the folder: {exc.strerror or exc}") from None
    try:
        from matplotlib.figure import Figure  # Figure needs no pyplot global state
    except ImportError as exc:
        raise StrataSimError(f"--out: plotting needs matplotlib ({exc}): pip install 'stratasim[explore]'") from None
    charts = [_front(results, Figure) if len(results.objectives) == 2 else _by_trial(results, Figure)]
    charts += [_against(results, key, space, Figure) for key, space in results.axes().items()]
    written = []
    for name, figure in charts:
        path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        try:
            figure.savefig(path, dpi=100)
        except OSError as exc:
            raise StrataSimError(f"--out {folder}: cannot write {path.name}: {exc.strerror or exc}") from None
        written.append(path)
    return written


def _front(results: SweepResults, figure_type: Any) -> tuple[str, Any]:
    """The two objectives of every finished trial (those outside the constraints crossed), the Pareto front joined
    up."""
    x, y = results.objectives
    figure = figure_type(figsize=(7, 5), layout="constrained")
    axes = figure.subplots()
    kept = [r for r in results.trials if results.within_constraints(r)]
    outside = [r for r in results.trials if r.status == "done" and not results.within_constraints(r)]
    axes.scatter([r.metrics[x] for r in kept], [r.metrics[y] for r in kept], color="grey", label="trials")
    if outside:
        axes.scatter(
            [r.metrics[x] for r in outside],
            [r.metrics[y] for r in outside],
            marker="x",
            color="silver",
            label="outside the constraints",
        )
    front = sorted(results.pareto, key=lambda r: r.metrics[x])
    axes.plot([r.metrics[x] for r in front], [r.metrics[y] for r in front], "o-", color="C3", label="Pareto front")
    axes.set(xlabel=_goal(results, 0), ylabel=_goal(results, 1), title=f"{results.source}: Pareto front")
    axes.legend()
    return "pareto_front", figure


def _by_trial(results: SweepResults, figure_type: Any) -> tuple[str, Any]:
    """The first objective of each trial within the constraints, by trial number."""
    name = results.objectives[0]
    figure = figure_type(figsize=(7, 5), layout="constrained")
    axes = figure.subplots()
    kept = [r for r in results.trials if results.within_constraints(r)]
    axes.plot([r.number for r in kept], [r.metrics[name] for r in kept], "o", color="C0")
    axes.set(xlabel="trial", ylabel=_goal(results, 0), title=f"{results.source}: {name} by trial")
    return f"{name}-by-trial", figure


def _against(results: SweepResults, key: str, space: list[Any] | Range, figure_type: Any) -> tuple[str, Any]:
    """The first objective against one parameter: its values as categories (a list) or a number axis (a range).
    Categories too many or too long to read (a generator's topologies) are numbered in order of appearance."""
    name = results.objectives[0]
    figure = figure_type(figsize=(7, 5), layout="constrained")
    axes = figure.subplots()
    kept = [r for r in results.trials if results.within_constraints(r)]
    values = [r.params[key] for r in kept]
    if isinstance(space, Range):
        unit = space.bounds()[2]
        axes.set_xscale("log" if space.log else "linear")
        axes.set_xlabel(f"{key} ({unit})" if unit else key)
        axes.scatter([split_quantity(v)[0] for v in values], [r.metrics[name] for r in kept], color="C0")
    else:
        labels = [str(v) for v in space]
        axes.scatter([labels.index(str(v)) for v in values], [r.metrics[name] for r in kept], color="C0")
        if len(labels) <= _MAX_TICKS and max(map(len, labels)) <= _MAX_LABEL:
            axes.set_xticks(range(len(labels)), labels, rotation=30 if max(map(len, labels)) > 8 else 0)
            axes.set_xlabel(key)
        else:
            axes.set_xlabel(f"{key}: {len(labels)} values, numbered in order of appearance")
    axes.set(ylabel=_goal(results, 0), title=f"{name} against {key}")
    return f"{name}-vs-{key}", figure


def _goal(results: SweepResults, index: int) -> str:
    objective = results.section.objectives[index]
    return f"{objective.metric} ({objective.goal})"
