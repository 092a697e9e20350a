"""Reading a sweep's results store: its trials, the best, the Pareto front, and what each parameter does.

:func:`read_results` opens a store written by ``stratasim sweep`` without changing it; the store keeps the sweep's
definition, so the objectives and constraints rank the trials exactly as the sweep did (:func:`~stratasim.explore
.run.pareto`, :func:`~stratasim.explore.run.feasible`). A notebook reads ``read_results("sweep.db").trials`` as records
or ``.to_frame()`` as a pandas DataFrame; ``stratasim results DB`` prints the same (:mod:`stratasim.cli.results`).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.explore.ranking import feasible, pareto
from stratasim.explore.run import SweepOutcome, outcome_json
from stratasim.explore.store import TrialRecord, check_trials, read_store
from stratasim.explore.sweep_file import Range, Sweep, SweepSection, split_quantity
from stratasim.kernel.errors import StrataSimError

__all__ = ["SweepResults", "ValueSummary", "ParameterSummary", "read_results"]

_EACH_VALUE = 8  # a parameter with at most this many distinct values is summarised value by value
_BINS = 4  # else its range is cut into this many bins


@dataclass(frozen=True)
class ValueSummary:
    """One value (or bin) of a parameter: the trials that took it, and the best and median of the first
    objective over those of them within the constraints (None when none is)."""

    label: str
    trials: int
    feasible: int
    best: float | None
    median: float | None


@dataclass(frozen=True)
class ParameterSummary:
    """A parameter's values (or bins) in order, and how far apart their medians are (in the objective's unit):
    the wider, the more the parameter matters."""

    key: str
    values: list[ValueSummary]
    spread: float


@dataclass(frozen=True)
class SweepResults:
    """A store's trials in order (:class:`~stratasim.explore.store.TrialRecord`), the sweep they came from and
    its Pareto front (one objective: the best trials)."""

    source: str
    section: SweepSection
    trials: list[TrialRecord]
    pareto: list[TrialRecord]

    def __len__(self) -> int:
        return len(self.trials)

    def __iter__(self) -> Iterator[TrialRecord]:
        return iter(self.trials)

    @property
    def objectives(self) -> list[str]:
        return [objective.metric for objective in self.section.objectives]

    def within_constraints(self, record: TrialRecord) -> bool:
        """Whether a trial finished and keeps every constraint."""
        return feasible(self._sweep(), record)

    def counts(self) -> dict[str, int]:
        """How many trials are ``done``, how many of those are ``infeasible`` (outside the constraints), and how
        many ``failed``."""
        done = sum(r.status == "done" for r in self.trials)
        within = sum(self.within_constraints(r) for r in self.trials)
        return {"done": done, "infeasible": done - within, "failed": len(self.trials) - done}

    def best(self, top: int) -> list[TrialRecord]:
        """The ``top`` trials within the constraints, by the objectives in turn (each toward its goal)."""
        signs = [1.0 if o.goal == "min" else -1.0 for o in self.section.objectives]
        ranked = sorted(
            (r for r in self.trials if self.within_constraints(r)),
            key=lambda r: [sign * r.metrics[name] for sign, name in zip(signs, self.objectives)],
        )
        return ranked[:top]

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per trial: number, status, each parameter, each metric, error and ``trial_wall_seconds``
        (the trial's own time, set apart from the report's ``wall_seconds``); a list or mapping parameter as JSON."""
        metrics = sorted({name for r in self.trials for name in r.metrics})
        return [
            {
                "number": r.number,
                "status": r.status,
                **{key: _cell(r.params.get(key)) for key in self.section.space},
                **{name: r.metrics.get(name) for name in metrics},
                "error": r.error,
                "trial_wall_seconds": r.wall_seconds,
            }
            for r in self.trials
        ]

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame indexed by trial number (pandas is not a dependency of StrataSim)."""
        try:
            import pandas
        except ImportError:
            raise StrataSimError("SweepResults.to_frame needs pandas: pip install pandas (or use .rows())") from None
        return pandas.DataFrame(self.rows()).set_index("number")

    def write_csv(self, path: str | Path) -> None:
        """Every trial as a CSV row (:meth:`rows`); an unwritable path is a :class:`StrataSimError`."""
        rows = self.rows()
        try:
            with open(path, "w", encoding="utf-8", newline="") as file:
                writer = csv.DictWriter(file, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
        except OSError as exc:
            raise StrataSimError(f"--csv {path}: cannot write it: {exc.strerror or exc}") from None

    def to_json(self) -> str:
        """``{"trials": [...], "pareto": [numbers]}``, as ``stratasim sweep --json`` prints it."""
        return outcome_json(SweepOutcome(self.trials, 0, self.pareto))

    def axes(self) -> dict[str, list[Any] | Range]:
        """Each parameter's values: a space key's list or range, and for a generator's keys (a generator's label is
        no parameter) the values its trials took, in order of appearance."""
        axes: dict[str, list[Any] | Range] = {
            key: space for key, space in self.section.space.items() if isinstance(space, list | Range)
        }
        for record in self.trials:
            for key, value in record.params.items():
                if key not in self.section.space:
                    seen = axes.setdefault(key, [])
                    if isinstance(seen, list) and value not in seen:
                        seen.append(value)
        return axes

    def parameters(self) -> list[ParameterSummary]:
        """Each parameter's values (or bins of a range; a generator's keys by the values its trials took) with the
        first objective's best and median there, the parameters whose medians spread widest first."""
        summaries = [self._parameter(key, space) for key, space in self.axes().items()]
        return sorted(summaries, key=lambda s: -s.spread)

    def _parameter(self, key: str, space: list[Any] | Range) -> ParameterSummary:
        first = self.section.objectives[0]
        pick = min if first.goal == "min" else max
        groups = _groups(key, space, self.trials)
        values = []
        for label, members in groups:
            scores = [r.metrics[first.metric] for r in members if self.within_constraints(r)]
            values.append(
                ValueSummary(
                    label,
                    len(members),
                    len(scores),
                    pick(scores) if scores else None,
                    statistics.median(scores) if scores else None,
                )
            )
        medians = [v.median for v in values if v.median is not None]
        return ParameterSummary(key, values, max(medians) - min(medians) if medians else 0.0)

    def _sweep(self) -> Sweep:
        # Ranking reads only the sweep's section; the base study is not needed to read its results.
        return Sweep(self.source, {}, self.source, self.section)


def read_results(db: str | Path) -> SweepResults:
    """The results store ``db`` (written by ``stratasim sweep``), read without changing it — of a fidelity ladder,
    the trials of the highest level reached; a :class:`StrataSimError` for a missing, foreign, corrupt, locked or
    empty store."""
    definition, trials = read_store(db)
    try:
        section = SweepSection.model_validate_json(definition)
    except ValueError:  # pydantic's ValidationError, or JSON that is not
        raise StrataSimError(f"{db}: its sweep definition is not one this StrataSim reads (corrupt?)") from None
    if not trials:
        raise StrataSimError(f"{db}: the store holds no trials yet (run stratasim sweep on it)")
    check_trials(section, trials, db)
    reached = max(record.fidelity for record in trials)  # a ladder's answer is its last level's
    trials = [record for record in trials if record.fidelity == reached]
    sweep = Sweep(str(db), {}, str(db), section)
    return SweepResults(str(db), section, trials, pareto(sweep, trials))


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, list | dict) else value


def _groups(key: str, space: list[Any] | Range, trials: list[TrialRecord]) -> list[tuple[str, list[TrialRecord]]]:
    """The trials by their value of ``key``: value by value (a list in its order; a range's values in numeric
    order when few), else a range's values in ``_BINS`` equal bins of its (log) scale."""
    by_value: dict[str, list[TrialRecord]] = {}
    for record in trials:
        by_value.setdefault(_label(record.params.get(key)), []).append(record)
    if isinstance(space, list):
        order = [_label(value) for value in space]
        return [(label, by_value[label]) for label in order if label in by_value]
    if len(by_value) <= _EACH_VALUE:
        return sorted(by_value.items(), key=lambda item: split_quantity(item[1][0].params[key])[0])
    low, high, unit = space.bounds()

    def scale(value: float) -> float:
        return math.log(value) if space.log else value

    width = (scale(high) - scale(low)) / _BINS or 1.0
    edges = [math.exp(scale(low) + i * width) if space.log else low + i * width for i in range(_BINS + 1)]
    bins: list[list[TrialRecord]] = [[] for _ in range(_BINS)]
    for record in trials:
        where = (scale(split_quantity(record.params[key])[0]) - scale(low)) / width
        bins[min(max(int(where), 0), _BINS - 1)].append(record)
    close = [")"] * (_BINS - 1) + ["]"]
    return [
        (f"[{edges[i]:.4g}, {edges[i + 1]:.4g}{close[i]}{' ' + unit if unit else ''}", bins[i])
        for i in range(_BINS)
        if bins[i]
    ]


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
