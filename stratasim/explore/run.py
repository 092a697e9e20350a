"""Running a sweep: each trial is the base study with the trial's values set, simulated and kept in the store.

A trial whose study is invalid or whose simulation fails is recorded as failed with its error and the sweep goes
on; a sweep whose space names a key the study does not have, or whose objectives or constraints name a metric
the report does not have, or that gives a quantity without its unit (``bandwidth: 100``, in the space or a fidelity
level's ``set``), stops with one error before (or at its first finished trial).
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Protocol

from stratasim.config.overrides import apply_overrides, as_overrides, parse_key
from stratasim.config.study_file import parse_study
from stratasim.explore.cluster import on_cluster
from stratasim.explore.ladder import LevelOutcome, kept, level_outcome, time_saved
from stratasim.explore.model_search import model_search
from stratasim.explore.optimize import optimize_study
from stratasim.explore.ranking import feasible, pareto
from stratasim.explore.screening import check_screening, screen_error, screen_trials
from stratasim.explore.space import Space, check_points, expand, range_values, resolve
from stratasim.explore.store import ResultStore, TrialRecord, check_trials, trial_key
from stratasim.explore.sweep_file import MILP_OBJECTIVES, Fidelity, Sweep
from stratasim.kernel.errors import ConfigError, StrataSimError
from stratasim.study.budget import DEFAULT_BUDGET, Budget
from stratasim.study.run import run_study

__all__ = ["SweepOutcome", "SweepProgress", "run_sweep", "metric", "feasible", "pareto"]


@dataclass(frozen=True)
class SweepOutcome:
    """Every trial of the sweep (in order; with a fidelity ladder, those of its last level), how many ran now,
    and the best ones: ``pareto`` the feasible trials no other feasible trial beats on every objective (one
    objective: the best); ``levels`` what each level of a ladder did; ``notes`` what the space's generators gave
    and skipped and, on a screening level, which trials the first-order model declined and why, a line each."""

    trials: list[TrialRecord]
    ran: int
    pareto: list[TrialRecord]
    levels: list[LevelOutcome] = field(default_factory=list)
    notes: tuple[str, ...] = ()


def metric(metrics: Mapping[str, Any], name: str) -> float | None:
    """A report metric by (dotted) name, or None if the report has no such number."""
    value: Any = metrics
    for part in name.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _numbers(report: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Every number of the report's headline figures: its top-level numbers and those of its sections (``serving``'s
    percentiles, say, as ``serving.ttft_p99_ps``), dotted as objectives name them; tables (lists) are left out."""
    numbers: dict[str, float] = {}
    for key, value in report.items():
        if isinstance(value, Mapping):
            numbers |= _numbers(value, f"{prefix}{key}.")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            numbers[f"{prefix}{key}"] = float(value)
    return numbers


def _check_space(
    sweep: Sweep, first: Mapping[str, Any], fixed: Mapping[str, Any] | None = None, where: str = "space"
) -> None:
    """Stop before running anything if the space (``first``: a trial's parameters) or, with ``fixed``, a
    fidelity level's ``set`` at ``where``, names a key the base study does not have."""
    named = fixed if fixed is not None else first
    data, problems = apply_overrides(sweep.base, as_overrides({**first, **(fixed or {})}))
    try:
        parse_study(data, sweep.base_source)
    except ConfigError as exc:
        unknown = [
            (f"{where}.{path}", message)
            for path, message in exc.problems
            if "unknown key" in message and any(path.startswith(key) or key.startswith(path) for key in named)
        ]
        if unknown:
            raise ConfigError(sweep.source, unknown) from None
    problems = [
        (place, why)
        for place, why in problems
        if fixed is None or place.removeprefix("--set ").partition("=")[0] in named
    ]
    if problems:
        raise ConfigError(sweep.source, [(f"{where}.{place.removeprefix('--set ')}", why) for place, why in problems])


def _check_units(sweep: Sweep, space: Space) -> None:
    """Stop before running anything if a value of the space or of a fidelity level's ``set`` is a number where the
    study wants a quantity with its unit, naming the entry: each distinct value is tried alone on the base study."""
    tried: dict[str, list[Any]] = {
        f"space.{key}": values if isinstance(values, list) else range_values(values)
        for key, values in space.axes.items()
        if key not in space.generated
    }
    tried |= {
        f"fidelity[{index}].set.{key}": [value]
        for index, level in enumerate(sweep.section.fidelity)
        for key, value in level.set.items()
    }
    problems: list[tuple[str, str]] = []
    for where, values in tried.items():
        key = where.split(".", 1)[1].removeprefix("set.")
        for value in {repr(value): value for value in values}.values():
            data, _ = apply_overrides(sweep.base, as_overrides({key: value}))
            try:
                parse_study(data, sweep.base_source)
            except ConfigError as exc:
                bare = [
                    (where, message)
                    for path, message in exc.problems
                    if "has no unit" in message and parse_key(path)[: len(parse_key(key))] == parse_key(key)
                ]
                if bare:
                    problems.append(bare[0])  # one line per entry: its first value without a unit
                    break
    if problems:
        raise ConfigError(sweep.source, problems)


class SweepProgress(Protocol):
    """What a sweep says as it goes: a level starting (``name`` "" without a ladder) with ``total`` trials of which
    ``done`` were in the store already, and each trial as it finishes."""

    def level(self, name: str, total: int, done: int) -> None: ...

    def trial(self, record: TrialRecord) -> None: ...


def run_sweep(
    sweep: Sweep,
    store: ResultStore,
    progress: SweepProgress | None = None,
    workers: int = 1,
    cluster: str | None = None,
    notes: Callable[[str], None] | None = None,
    budget: Budget = DEFAULT_BUDGET,
) -> SweepOutcome:
    """Run every trial of ``sweep`` not already finished in ``store``, each kept as soon as it ends.

    Trials run one after the other, on ``workers`` local processes, or on the Dask scheduler at ``cluster`` (the same
    results, kept in the order they finish). With a fidelity ladder, each level runs the trials the level before
    kept. ``notes`` hears, before any trial runs, what each generator gave and skipped. ``budget`` bounds each trial
    and the sweep's list of trials (refused before it is enumerated when it would not fit).
    """
    if workers < 1:
        raise StrataSimError(f"--workers: expected at least 1 worker process, got {workers}")
    wanted = [*(o.metric for o in sweep.section.objectives), *(c.metric for c in sweep.section.constraints)]
    if sweep.section.search.method == "milp":
        return _run_milp(sweep, store, progress, notes, wanted, budget)
    space = resolve(sweep, budget)
    check_points(sweep, space, budget)
    _check_units(sweep, space)
    if notes is not None:
        for line in space.notes():
            notes(line)

    def keep(record: TrialRecord) -> None:
        store.record(record)
        if progress is not None:
            progress.trial(record)

    if sweep.section.search.method in ("tpe", "nsga2"):  # each trial learns from the ones before: in turn
        return _run_model_search(sweep, space, store, progress, wanted, keep, budget)
    trials = expand(sweep, space)
    if trials:
        _check_levels(sweep, trials[0], wanted)
    ladder = _Ladder(sweep, store, progress, wanted, budget)
    records, ran, summaries = ladder.run(list(enumerate(trials)), keep, workers, cluster)
    return SweepOutcome(records, ran, pareto(sweep, records), summaries, (*space.notes(), *ladder.notes))


def _run_model_search(
    sweep: Sweep,
    space: Space,
    store: ResultStore,
    progress: SweepProgress | None,
    wanted: list[str],
    keep: Callable[[TrialRecord], None],
    budget: Budget,
) -> SweepOutcome:
    """A model-based search (TPE, NSGA-II): each trial chosen from the ones before, so they run in turn."""
    _check_space(
        sweep,
        space.params(
            {key: values[0] if isinstance(values, list) else values.low for key, values in space.axes.items()}
        ),
    )
    finished = _finished(store, sweep, 0)
    before = len(finished)
    if progress is not None:
        progress.level("", sweep.section.search.trials or 0, min(before, sweep.section.search.trials or 0))

    def run_one(number: int, params: dict[str, Any]) -> TrialRecord:
        record = _run_trial(sweep, number, params, wanted, budget=budget)
        keep(record)
        return record

    searched = model_search(sweep, space, list(finished.values()), run_one)
    return SweepOutcome(searched, len(searched) - before, pareto(sweep, searched), notes=tuple(space.notes()))


def _run_milp(
    sweep: Sweep,
    store: ResultStore,
    progress: SweepProgress | None,
    notes: Callable[[str], None] | None,
    wanted: list[str],
    budget: Budget,
) -> SweepOutcome:
    """A ``milp`` search: the optimal plan by the plan program (:mod:`stratasim.explore.optimize`), simulated as the
    sweep's one trial, its metrics with the program's ``milp_estimate_ns`` and ``milp_gap``."""
    objective = MILP_OBJECTIVES[(sweep.section.objectives[0].metric, sweep.section.objectives[0].goal)]
    result = optimize_study(sweep, objective=objective, simulate=False)  # type: ignore[arg-type]
    if notes is not None:
        for line in result.notes:
            notes(line)
    finished = _finished(store, sweep, 0)
    params = dict(result.plan)
    record = finished.get(trial_key(params))
    if progress is not None:
        progress.level("", 1, int(record is not None))
    ran = record is None
    if record is None:
        record = _run_trial(sweep, 0, params, wanted, budget=budget)
        if record.status == "done":
            extra = {"milp_estimate_ns": result.estimate_ps / 1e3, "milp_gap": result.gap}
            record = dataclasses.replace(record, metrics={**record.metrics, **extra})
        store.record(record)
        if progress is not None:
            progress.trial(record)
    return SweepOutcome([record], int(ran), pareto(sweep, [record]), notes=result.notes)


def _check_levels(sweep: Sweep, first: dict[str, Any], wanted: list[str]) -> None:
    """The base study with the ``first`` trial's keys is valid, alone and with each fidelity level's keys set; no
    level sets a key the space varies; a level that estimates can price the study by what the sweep ranks."""
    _check_space(sweep, first)
    for index, level in enumerate(sweep.section.fidelity):
        varied = sorted(set(level.set) & set(first))
        if varied:
            raise ConfigError(
                sweep.source,
                [(f"fidelity[{index}].set", f"{', '.join(varied)} is varied by the space; a level may not set it")],
            )
        _check_space(sweep, first, level.set, f"fidelity[{index}].set")
        if level.estimate is not None:
            check_screening(sweep, first, index, wanted)


@dataclass(frozen=True)
class _Ladder:
    """The levels of a sweep's fidelity ladder (one level, the study as it is, without one), run in turn; a level
    that estimates (:mod:`stratasim.explore.screening`) prices its trials in one call and simulates those the
    model declines, saying why in ``notes``."""

    sweep: Sweep
    store: ResultStore
    progress: SweepProgress | None
    wanted: list[str]
    budget: Budget
    notes: list[str] = field(default_factory=list)

    def run(
        self,
        candidates: list[tuple[int, dict[str, Any]]],
        keep: Callable[[TrialRecord], None],
        workers: int,
        cluster: str | None,
    ) -> tuple[list[TrialRecord], int, list[LevelOutcome]]:
        """Each level runs its ``candidates`` not yet finished, then keeps those the next level runs; the last
        level's records, how many trials ran, and each level's outcome."""
        levels: list[Fidelity | None] = [*self.sweep.section.fidelity] or [None]
        ran, summaries = 0, []
        records: list[TrialRecord] = []
        for index, step in enumerate(levels):
            done = _finished(self.store, self.sweep, index)
            todo = [(number, params) for number, params in candidates if trial_key(params) not in done]
            if self.progress is not None:
                self.progress.level(step.name if step is not None else "", len(candidates), len(candidates) - len(todo))
            estimated = index > 0 and getattr(levels[index - 1], "estimate", None) is not None
            screened = {trial_key(r.params): r for r in records} if estimated else None
            ran += len(todo)
            if step is not None and step.estimate is not None and todo:
                todo = self._screen(todo, index, step.name, done)
            fixed = step.set if step is not None else {}
            calls = [(self.sweep, number, params, self.wanted, fixed, index, self.budget) for number, params in todo]
            _execute(calls, partial(_kept_in, keep, done, screened, self.sweep), workers, cluster)
            previous, records = records, [done[trial_key(params)] for _, params in candidates]
            if step is not None:
                passed = kept(self.sweep, step, records) if step.keep is not None else []
                summaries.append(level_outcome(self.sweep, step, records, passed, previous if index else None))
                candidates = [(r.number, r.params) for r in passed]
        return records, ran, summaries

    def _screen(
        self, todo: list[tuple[int, dict[str, Any]]], index: int, name: str, done: dict[str, TrialRecord]
    ) -> list[tuple[int, dict[str, Any]]]:
        """Estimate ``todo`` at level ``index``, kept in the store at once; the trials the model declines, to
        simulate."""
        screened = screen_trials(self.sweep, todo, self.wanted, index, name)
        self.store.record_many(screened.records)
        for record in screened.records:
            done[trial_key(record.params)] = record
            if self.progress is not None:
                self.progress.trial(record)
        self.notes.extend(screened.notes)
        return screened.declined


def _finished(store: ResultStore, sweep: Sweep, fidelity: int) -> dict[str, TrialRecord]:
    """The trials ``store`` holds at level ``fidelity``, each checked to carry what ``sweep`` ranks them by."""
    finished = store.finished(fidelity)
    check_trials(sweep.section, finished.values(), store.path)
    return finished


def _kept_in(
    keep: Callable[[TrialRecord], None],
    finished: dict[str, TrialRecord],
    screened: dict[str, TrialRecord] | None,
    sweep: Sweep,
    record: TrialRecord,
) -> None:
    """Keep ``record`` (with its ``screen_error`` against its ``screened`` estimate, after a screening level)."""
    if screened is not None:
        record = screen_error(screened.get(trial_key(record.params)), sweep.section.objectives[0].metric, record)
    keep(record)
    finished[trial_key(record.params)] = record


def _execute(
    calls: list[tuple[Any, ...]], keep: Callable[[TrialRecord], None], workers: int, cluster: str | None
) -> None:
    """Run :func:`_run_trial` on each of ``calls``, handing each record to ``keep`` as it finishes: on the Dask
    scheduler at ``cluster``, in this process, or on ``workers`` fresh local processes."""
    if cluster is not None:
        on_cluster(cluster, calls, _run_trial, keep)
    elif workers == 1 or len(calls) < 2:
        for call in calls:
            keep(_run_trial(*call))
    else:
        # Fresh interpreters (spawn): a worker forked from a run that imported gRPC would inherit its threads.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=min(workers, len(calls)),
            mp_context=context,
            initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        ) as pool:
            running = [pool.submit(_run_trial, *call) for call in calls]
            try:
                for future in as_completed(running):
                    keep(future.result())
            except BaseException:  # Ctrl-C or SIGTERM (see stratasim.cli.sweep): stop the trials under way too
                # Terminating the workers breaks the pool, which fails every trial not yet done; cancelling them
                # first would race the pool's own failing of them (Python 3.11 prints an InvalidStateError).
                for process in list(pool._processes.values()):
                    process.terminate()
                raise


def _exit_with_parent(parent: int) -> None:
    """In a worker: end when the sweep that started it is gone (killed, say), not live on as an orphan waiting
    for trials that will never come. Ctrl-C reaches the whole process group: the worker leaves it to the sweep,
    which stops its workers and says so once, rather than each printing a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _run_trial(
    sweep: Sweep,
    number: int,
    params: Mapping[str, Any],
    wanted: list[str],
    fixed: Mapping[str, Any] | None = None,
    fidelity: int = 0,
    budget: Budget = DEFAULT_BUDGET,
) -> TrialRecord:
    """Trial ``number``: the base study with ``params`` (and a fidelity level's ``fixed`` keys) set, simulated
    within ``budget``."""
    started = time.perf_counter()
    data, problems = apply_overrides(sweep.base, as_overrides({**params, **(fixed or {})}))
    try:
        if problems:
            raise ConfigError(sweep.base_source, problems)
        report = run_study(parse_study(data, sweep.base_source), budget=budget).to_dict()
    except StrataSimError as exc:
        return TrialRecord(number, dict(params), "failed", {}, str(exc), time.perf_counter() - started, fidelity)
    metrics = _numbers(report)
    for name in wanted:
        value = metric(report, name)
        if value is None:
            raise StrataSimError(
                f"{sweep.source}: the report has no number {name!r} (objectives and constraints name report fields, "
                f"e.g. {', '.join(sorted(metrics)[:6])})"
            )
        metrics[name] = value
    return TrialRecord(number, dict(params), "done", metrics, "", time.perf_counter() - started, fidelity)


def outcome_json(outcome: SweepOutcome) -> str:
    """``{"trials": [{"number", "params", "status", "metrics", "error"}...], "pareto": [numbers], "notes":
    [lines]}``; with a
    fidelity ladder also ``levels`` (what each did, see :class:`LevelOutcome`) and ``screening`` (trial seconds
    spent, and what running every trial at the last level would have taken)."""
    rows = [
        {"number": r.number, "params": r.params, "status": r.status, "metrics": r.metrics, "error": r.error}
        for r in outcome.trials
    ]
    document: dict[str, Any] = {
        "trials": rows,
        "pareto": [r.number for r in outcome.pareto],
        "notes": list(outcome.notes),
    }
    if outcome.levels:
        spent, everything = time_saved(outcome.levels)
        document["levels"] = [asdict(level) for level in outcome.levels]
        document["screening"] = {"trial_seconds": spent, "all_at_last_level_seconds": everything}
    return json.dumps(document, indent=1)
