"""The screening rung of a fidelity ladder: a first level with ``estimate: first_order`` prices its trials with the
first-order model of a transformer training plan (:mod:`stratasim.optimize.first_order`) instead of simulating
them, all in one vectorised call (one per distinct value of the keys the space varies outside
``workload.parallelism``).

Each estimated trial is kept in the store at its level like a simulated one, its metrics named as the report names
them: ``total_time_ps``, ``total_time_ns``, ``iteration_time_ns``, ``npus``, ``memory_per_npu_bytes.N`` (any N: the
peak stage's memory, which bounds every NPU's) and the model's terms as ``first_order.TERM_ns``; its wall time is
its share of the call. A plan the model declines is simulated at the screening level instead, and the sweep says
so in a note, a line per reason with a count.

The level after a screening level records, on each trial it simulates, ``screen_error``: the relative error of
the screening figure of the first objective, ``(screened - simulated) / simulated``.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from stratasim.config.overrides import apply_overrides, as_overrides
from stratasim.config.study_file import parse_study
from stratasim.explore.store import TrialRecord, trial_key
from stratasim.explore.sweep_file import Sweep
from stratasim.kernel.errors import ConfigError, StrataSimError
from stratasim.optimize.first_order import TERMS, FirstOrderModel, PlanEstimates
from stratasim.workload_layer.transformer.config import TransformerConfig

__all__ = ["ESTIMATED", "Screened", "check_screening", "screen_error", "screen_trials"]

ESTIMATED = ("total_time_ps", "total_time_ns", "iteration_time_ns", "npus", "memory_per_npu_bytes.N")
"""The report metrics a screened trial carries (``N``: any NPU)."""

_MEMORY = re.compile(r"^memory_per_npu_bytes\.\d+$")
_PLAN = "workload.parallelism."


@dataclass(frozen=True)
class Screened:
    """A screening level's work: the ``records`` estimated, the trials the model declined (``declined``: number and
    parameters, to simulate) and a note per reason it declined them."""

    records: list[TrialRecord]
    declined: list[tuple[int, dict[str, Any]]]
    notes: tuple[str, ...]


def _known(name: str) -> bool:
    return name in ESTIMATED[:-1] or bool(_MEMORY.match(name))


def check_screening(sweep: Sweep, first: Mapping[str, Any], index: int, wanted: Sequence[str]) -> None:
    """Stop before running anything if fidelity level ``index`` estimates a study the first-order model cannot
    price (the base study with the ``first`` trial's keys is no transformer training study) or the sweep ranks or
    constrains its trials by a metric the model does not give."""
    where = f"fidelity[{index}].estimate"
    data, _ = apply_overrides(sweep.base, as_overrides(dict(first)))
    study = parse_study(data, sweep.base_source)  # the ladder's own checks have found it valid
    if not isinstance(study.workload.config, TransformerConfig):
        raise ConfigError(
            sweep.source,
            [(where, f"the first-order model prices transformer training plans, not a {study.workload.kind} workload")],
        )
    unknown = [name for name in wanted if not _known(name)]
    if unknown:
        raise ConfigError(
            sweep.source,
            [
                (
                    where,
                    f"the first-order model gives {', '.join(ESTIMATED)}; the objectives and constraints also name "
                    f"{', '.join(unknown)}: screen by those, or screen by simulating (set: instead of estimate:)",
                )
            ],
        )


def screen_trials(
    sweep: Sweep, trials: Sequence[tuple[int, dict[str, Any]]], wanted: Sequence[str], fidelity: int, name: str
) -> Screened:
    """Estimate ``trials`` (number, parameters) at level ``fidelity`` (named ``name``), grouped by the keys they set
    outside ``workload.parallelism``: one call of the first-order model per group."""
    groups: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for number, params in trials:
        rest = {key: value for key, value in params.items() if not key.startswith(_PLAN)}
        groups.setdefault(trial_key(rest), []).append((number, params))
    records: list[TrialRecord] = []
    declined: list[tuple[int, dict[str, Any]]] = []
    reasons: Counter[str] = Counter()
    for group in groups.values():
        estimated, refused = _screen_group(sweep, group, wanted, fidelity)
        records += estimated
        declined += [group[i] for i in refused]
        reasons.update(refused.values())
    notes = tuple(
        f"{name}: {count} trial{'s' if count > 1 else ''} simulated, not estimated (the first-order model declines "
        f"them): {reason}"
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    )
    return Screened(sorted(records, key=lambda r: r.number), sorted(declined, key=lambda t: t[0]), notes)


def _screen_group(
    sweep: Sweep, group: list[tuple[int, dict[str, Any]]], wanted: Sequence[str], fidelity: int
) -> tuple[list[TrialRecord], dict[int, str]]:
    """The records of the trials of ``group`` (which share their keys outside the plan) the model estimates, and
    why it declines the others (by position in ``group``)."""
    started = time.perf_counter()
    rest = {key: value for key, value in group[0][1].items() if not key.startswith(_PLAN)}
    data, problems = apply_overrides(sweep.base, as_overrides(rest))
    plans = [{key: value for key, value in params.items() if key.startswith(_PLAN)} for _, params in group]
    try:
        if problems:
            raise ConfigError(sweep.base_source, problems)
        study = parse_study(data, sweep.base_source)
        with FirstOrderModel(study) as model:
            estimates, refused = model.estimate_supported(plans)
    except StrataSimError as exc:  # the study itself: every trial of the group is simulated, which says why
        return [], {index: str(exc).splitlines()[0] for index in range(len(group))}
    share = (time.perf_counter() - started) / max(1, len(estimates.plans))
    accepted = [index for index in range(len(group)) if index not in refused]
    records = [
        TrialRecord(number, params, "done", _metrics(estimates, row, study.npus, wanted), "", share, fidelity)
        for row, (number, params) in enumerate(group[index] for index in accepted)
    ]
    return records, refused


def _metrics(estimates: PlanEstimates, row: int, npus: int, wanted: Sequence[str]) -> dict[str, float]:
    """Plan ``row``'s figures, named as the report names them (``wanted``'s memory entries among them)."""
    ps = int(estimates.iteration_ps[row])
    memory = float(estimates.memory_bytes[row])
    metrics = {"total_time_ps": float(ps), "total_time_ns": ps / 1000, "iteration_time_ns": ps / 1000}
    metrics["npus"] = float(npus)
    metrics |= {name: memory for name in wanted if _MEMORY.match(name)}
    metrics |= {f"first_order.{term}_ns": float(estimates.terms[term][row]) / 1000 for term in TERMS}
    return metrics


def screen_error(screened: TrialRecord | None, objective: str, record: TrialRecord) -> TrialRecord:
    """``record`` (simulated) with ``screen_error``, the relative error of the ``screened`` figure of ``objective``:
    ``(screened - simulated) / simulated`` (unchanged when either has no such figure or the simulated one is 0)."""
    if screened is None or screened.status != "done" or record.status != "done":
        return record
    estimate, simulated = screened.metrics.get(objective), record.metrics.get(objective)
    if estimate is None or not simulated:
        return record
    return replace(record, metrics={**record.metrics, "screen_error": (estimate - simulated) / simulated})
