"""Running a sweep: each trial is the base study with the trial's values set, simulated and kept in the store.

A trial whose study is invalid or whose simulation fails is recorded as failed with its error and the sweep goes
on; a sweep whose space names a key the study does not have, or whose objectives or constraints name a metric
the report does not have, stops with one error before (or at its first finished trial).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import yaml

from stratasim.config.overrides import apply_overrides
from stratasim.config.study_file import parse_study
from stratasim.explore.cluster import on_cluster
from stratasim.explore.model_search import model_search
from stratasim.explore.space import expand, resolve
from stratasim.explore.store import ResultStore, TrialRecord, trial_key
from stratasim.explore.sweep_file import Sweep
from stratasim.kernel.errors import ConfigError, StrataSimError
from stratasim.study.run import run_study

__all__ = ["SweepOutcome", "run_sweep", "metric", "feasible", "pareto"]


@dataclass(frozen=True)
class SweepOutcome:
    """Every trial of the sweep (in order), how many ran now, and the best ones: ``pareto`` the feasible trials no
    other feasible trial beats on every objective (one objective: the best); ``notes``: what the space's
    generators gave and skipped, a line each."""

    trials: list[TrialRecord]
    ran: int
    pareto: list[TrialRecord]
    notes: tuple[str, ...] = ()


def _overrides(params: Mapping[str, Any]) -> list[str]:
    """A trial's values as ``--set KEY=VALUE`` strings (values written as YAML)."""
    return [f"{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"
            for key, value in params.items()]  # fmt: skip


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


def _numbers(report: Mapping[str, Any]) -> dict[str, float]:
    """The report's top-level numbers (the objectives' and constraints' nested ones are added by name)."""
    return {key: float(value) for key, value in report.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}  # fmt: skip


def _check_space(sweep: Sweep, first: Mapping[str, Any]) -> None:
    """Stop before running anything if the space names a key the base study does not have (``first``: a
    trial's parameters)."""
    data, problems = apply_overrides(sweep.base, _overrides(first))
    try:
        parse_study(data, sweep.base_source)
    except ConfigError as exc:
        unknown = [(f"space.{path}", message) for path, message in exc.problems
                   if "unknown key" in message and any(path.startswith(key) or key.startswith(path)
                                                       for key in first)]  # fmt: skip
        if unknown:
            raise ConfigError(sweep.source, unknown) from None
    if problems:
        raise ConfigError(sweep.source, [(f"space.{where.removeprefix('--set ')}", why) for where, why in problems])


def run_sweep(
    sweep: Sweep,
    store: ResultStore,
    progress: Callable[[TrialRecord], None] | None = None,
    workers: int = 1,
    cluster: str | None = None,
    notes: Callable[[str], None] | None = None,
) -> SweepOutcome:
    """Run every trial of ``sweep`` not already finished in ``store``, each kept as soon as it ends: one after
    the other, on ``workers`` local processes, or on the Dask scheduler at ``cluster`` (the same results, kept
    in the order they finish). ``notes`` hears, before any trial runs, what each generator gave and skipped."""
    if workers < 1:
        raise StrataSimError(f"--workers: expected at least 1 worker process, got {workers}")
    space = resolve(sweep)
    if notes is not None:
        for line in space.notes():
            notes(line)
    finished = store.finished()
    wanted = [*(o.metric for o in sweep.section.objectives), *(c.metric for c in sweep.section.constraints)]

    def keep(record: TrialRecord) -> None:
        store.record(record)
        finished[trial_key(record.params)] = record
        if progress is not None:
            progress(record)

    if sweep.section.search.method in ("tpe", "nsga2"):  # each trial learns from the ones before: in turn
        _check_space(sweep, space.params({key: values[0] if isinstance(values, list) else values.low
                                          for key, values in space.axes.items()}))  # fmt: skip
        before = len(finished)

        def run_one(number: int, params: dict[str, Any]) -> TrialRecord:
            record = _run_trial(sweep, number, params, wanted)
            keep(record)
            return record

        records = model_search(sweep, space, list(finished.values()), run_one)
        return SweepOutcome(records, len(records) - before, pareto(sweep, records), tuple(space.notes()))
    trials = expand(sweep, space)
    if trials:
        _check_space(sweep, trials[0])
    todo = [(number, params) for number, params in enumerate(trials) if trial_key(params) not in finished]

    if cluster is not None:
        on_cluster(cluster, [(sweep, number, params, wanted) for number, params in todo], _run_trial, keep)
    elif workers == 1 or len(todo) < 2:
        for number, params in todo:
            keep(_run_trial(sweep, number, params, wanted))
    else:
        # Fresh interpreters (spawn): a worker forked from a run that imported gRPC would inherit its threads.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=context,
                                 initializer=_exit_with_parent, initargs=(os.getpid(),)) as pool:  # fmt: skip
            running = [pool.submit(_run_trial, sweep, number, params, wanted) for number, params in todo]
            try:
                for future in as_completed(running):
                    keep(future.result())
            except BaseException:
                for future in running:
                    future.cancel()
                raise
    records = [finished[trial_key(params)] for params in trials]
    return SweepOutcome(records, len(todo), pareto(sweep, records), tuple(space.notes()))


def _exit_with_parent(parent: int) -> None:
    """In a worker: end when the sweep that started it is gone (killed, say), not live on as an orphan waiting
    for trials that will never come."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _run_trial(sweep: Sweep, number: int, params: Mapping[str, Any], wanted: list[str]) -> TrialRecord:
    started = time.perf_counter()
    data, problems = apply_overrides(sweep.base, _overrides(params))
    try:
        if problems:
            raise ConfigError(sweep.base_source, problems)
        report = run_study(parse_study(data, sweep.base_source)).to_dict()
    except StrataSimError as exc:
        return TrialRecord(number, dict(params), "failed", {}, str(exc), time.perf_counter() - started)
    metrics = _numbers(report)
    for name in wanted:
        value = metric(report, name)
        if value is None:
            raise StrataSimError(
                f"{sweep.source}: the report has no number {name!r} (objectives and constraints name report fields, "
                f"e.g. {', '.join(sorted(metrics)[:6])})"
            )
        metrics[name] = value
    return TrialRecord(number, dict(params), "done", metrics, "", time.perf_counter() - started)


def feasible(sweep: Sweep, record: TrialRecord) -> bool:
    """Whether a trial finished and keeps every constraint."""
    if record.status != "done":
        return False
    for constraint in sweep.section.constraints:
        value = record.metrics[constraint.metric]
        if (constraint.min is not None and value < constraint.min) or (constraint.max is not None and value > constraint.max):
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


def outcome_json(outcome: SweepOutcome) -> str:
    """``{"trials": [{"number", "params", "status", "metrics", "error"}...], "pareto": [numbers], "notes": [...]}``."""
    rows = [{"number": r.number, "params": r.params, "status": r.status, "metrics": r.metrics, "error": r.error}
            for r in outcome.trials]  # fmt: skip
    return json.dumps({"trials": rows, "pareto": [r.number for r in outcome.pareto], "notes": list(outcome.notes)},
                      indent=1)
