"""Running one study: building the workload and backends it names, simulating, and checking what came out.

The names are imported when first used, so that importing one module of this package (the command line's
:mod:`stratasim.study.limits`) does not import the whole runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stratasim.study.run import check_study, run_study

__all__ = ["check_study", "run_study"]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from :mod:`stratasim.study.run` on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("stratasim.study.run"), name)
    globals()[name] = value
    return value
