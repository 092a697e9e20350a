"""``stratasim.run``: one call from a study — a file, a mapping or a validated :class:`Study` — and overrides to
its report, for notebooks and scripts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stratasim.config.overrides import apply_overrides, as_overrides
from stratasim.config.study_file import Study, load_study, parse_study
from stratasim.kernel.errors import ConfigError, StrataSimError
from stratasim.kernel.units import parse_bytes
from stratasim.report.report import Report
from stratasim.study.budget import Budget
from stratasim.study.run import run_study

__all__ = ["run"]


def run(
    study: str | Path | Mapping[str, Any] | Study,
    /,
    *,
    max_memory: int | str | None = None,
    max_events: int | None = None,
    layers: bool = False,
    **overrides: Any,
) -> Report:
    """Simulate ``study`` with ``overrides`` set and report it. Overrides are dotted study keys, given as keyword
    arguments with ``__`` for a dot (``system__splits=8``) or unpacked from a dict (``**{"system.splits": 8}``);
    values are Python values (``[2, 4]``, ``"50GB/s"``). A mapping's relative paths are read from the current
    folder. ``max_memory`` (bytes, or a size such as ``"16GiB"``) and ``max_events`` raise or lower the run's
    budget (default 2 GiB and 10^9 events, estimated before anything is built). ``layers=True`` adds the
    per-layer breakdown (``Report.layers``, the JSON ``layers``), which slows the run. Bad input raises one
    :class:`~stratasim.kernel.errors.StrataSimError` naming every problem."""
    if not isinstance(layers, bool):
        raise StrataSimError(f"layers must be True or False, not {layers!r}")
    memory = parse_bytes(max_memory) if isinstance(max_memory, str) else max_memory
    budget = Budget.of(memory, max_events)
    settings = as_overrides({key.replace("__", "."): value for key, value in overrides.items()})
    if isinstance(study, Study):
        if settings:
            raise StrataSimError("overrides need the study's file or mapping: a Study is validated already")
        return run_study(study, budget=budget, layers=layers)
    if isinstance(study, str | Path):
        return run_study(load_study(study, settings), budget=budget, layers=layers)
    data, problems = apply_overrides(study, settings)
    if problems:
        raise ConfigError("the study mapping", problems)
    return run_study(parse_study(data, "the study mapping"), budget=budget, layers=layers)
