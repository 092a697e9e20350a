"""``stratasim.run``: one call from a study — a file, a mapping or a validated :class:`Study` — and overrides to
its report, for notebooks and scripts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stratasim.config.overrides import apply_overrides, as_overrides
from stratasim.config.study_file import Study, load_study, parse_study
from stratasim.kernel.errors import ConfigError, StrataSimError
from stratasim.report.report import Report
from stratasim.study.run import run_study

__all__ = ["run"]


def run(study: str | Path | Mapping[str, Any] | Study, /, **overrides: Any) -> Report:
    """Simulate ``study`` with ``overrides`` set and report it. Overrides are dotted study keys, given as keyword
    arguments with ``__`` for a dot (``system__splits=8``) or unpacked from a dict (``**{"system.splits": 8}``);
    values are Python values (``[2, 4]``, ``"50GB/s"``). A mapping's relative paths are read from the current
    folder. Bad input raises one :class:`~stratasim.kernel.errors.StrataSimError` naming every problem."""
    settings = as_overrides({key.replace("__", "."): value for key, value in overrides.items()})
    if isinstance(study, Study):
        if settings:
            raise StrataSimError("overrides need the study's file or mapping: a Study is validated already")
        return run_study(study)
    if isinstance(study, str | Path):
        return run_study(load_study(study, settings))
    data, problems = apply_overrides(study, settings)
    if problems:
        raise ConfigError("the study mapping", problems)
    return run_study(parse_study(data, "the study mapping"))
