"""Model-based searches through Optuna: TPE (Bayesian) and NSGA-II (multi-objective), trial by trial.

Each trial is asked of Optuna's sampler, run, and its objectives told back, so the next one learns from it; the
sampler is seeded, so the same sweep gives the same trials. A list of values is a categorical choice (by index:
values may be lists or mappings; a generator's points likewise), a range a float or integer distribution
(log-spaced with ``log``), written back with its unit. Resuming a store tells the sampler its finished trials first; it then carries on from them
(not necessarily with the trials an uninterrupted run would have drawn). Optuna is the ``explore`` extra.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stratasim.explore.space import Space, written
from stratasim.explore.store import TrialRecord
from stratasim.explore.sweep_file import Range, Sweep, split_quantity
from stratasim.kernel.errors import StrataSimError

__all__ = ["model_search"]


def model_search(
    sweep: Sweep,
    space: Space,
    finished: list[TrialRecord],
    run: Callable[[int, dict[str, Any]], TrialRecord],
) -> list[TrialRecord]:
    """Run the sweep's remaining trials (``search.trials`` in all) with Optuna over ``space`` (the sweep's,
    resolved), after telling it ``finished``; ``run(number, params)`` runs and keeps one trial. Returns every
    trial, in order."""
    try:
        import optuna
    except ImportError:
        raise StrataSimError(
            f"{sweep.source}: search.method {sweep.section.search.method!r} needs Optuna: pip install 'stratasim[explore]'"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search = sweep.section.search
    objectives = sweep.section.objectives
    sampler: Any
    if search.method == "tpe":
        sampler = optuna.samplers.TPESampler(seed=search.seed)
    else:
        sampler = optuna.samplers.NSGAIISampler(seed=search.seed)
    study = optuna.create_study(
        directions=["minimize" if o.goal == "min" else "maximize" for o in objectives], sampler=sampler
    )
    distributions = {key: _distribution(optuna, values) for key, values in space.axes.items()}
    trials = sorted(finished, key=lambda record: record.number)
    for record in trials:
        study.add_trial(_told(optuna, sweep, space, record, distributions))
    assert search.trials is not None  # checked when the sweep was read
    for number in range(len(trials), search.trials):
        asked = study.ask(distributions)
        params = space.params({key: _value(values, asked.params[key]) for key, values in space.axes.items()})
        record = run(number, params)
        if record.status == "done":
            study.tell(asked, [record.metrics[o.metric] for o in objectives])
        else:
            study.tell(asked, state=optuna.trial.TrialState.FAIL)
        trials.append(record)
    return trials


def _distribution(optuna: Any, values: list[Any] | Range) -> Any:
    """A value list as a choice of its indices; a range as Optuna's int or float distribution."""
    if isinstance(values, list):
        return optuna.distributions.CategoricalDistribution(list(range(len(values))))
    low, high, _ = values.bounds()
    if values.integer:
        return optuna.distributions.IntDistribution(int(low), int(high), log=values.log)
    return optuna.distributions.FloatDistribution(low, high, log=values.log)


def _value(values: list[Any] | Range, drawn: Any) -> Any:
    """What Optuna drew, as the study reads it."""
    if isinstance(values, list):
        return values[int(drawn)]
    return written(float(drawn), values, values.bounds()[2])


def _told(optuna: Any, sweep: Sweep, space: Space, record: TrialRecord, distributions: dict[str, Any]) -> Any:
    """A finished trial of the store, as Optuna takes it (its parameters in Optuna's terms)."""
    params = {key: _raw(values, _entry(space, key, record.params)) for key, values in space.axes.items()}
    if record.status == "done":
        values = [record.metrics[o.metric] for o in sweep.section.objectives]
        return optuna.trial.create_trial(params=params, distributions=distributions, values=values)
    return optuna.trial.create_trial(params=params, distributions=distributions, state=optuna.trial.TrialState.FAIL)


def _entry(space: Space, key: str, params: dict[str, Any]) -> Any:
    """The value a trial's ``params`` took for the space's entry ``key``: a generator's is its point's keys."""
    if key in space.generated:
        return {name: params[name] for name in space.generated[key].points[0]}
    return params[key]


def _raw(values: list[Any] | Range, value: Any) -> Any:
    """A stored value in Optuna's terms: a list's index, a range's number."""
    if isinstance(values, list):
        return values.index(value)
    if values.integer:
        return int(value)
    return split_quantity(value)[0]
