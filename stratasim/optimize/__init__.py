"""Finding the best plan and system for a study: the first-order (closed-form) model of a plan, and DFModel's mapping
passes as mixed-integer programs.

The names are imported when first used: importing one module of this package (the command line's
:mod:`stratasim.optimize.result`) does not import numpy and the solver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stratasim.optimize.first_order import (
        MEMORY_TERMS,
        TERMS,
        FirstOrderError,
        FirstOrderModel,
        PlanEstimates,
        estimate_plans,
    )

__all__ = ["MEMORY_TERMS", "TERMS", "FirstOrderError", "FirstOrderModel", "PlanEstimates", "estimate_plans"]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from :mod:`stratasim.optimize.first_order` on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("stratasim.optimize.first_order"), name)
    globals()[name] = value
    return value
