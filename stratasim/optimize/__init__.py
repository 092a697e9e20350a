"""Finding the best plan and system for a study: the first-order (closed-form) model of a plan, and DFModel's mapping
passes as mixed-integer programs.

The names are imported when first used: importing one module of this package (the command line's
:mod:`stratasim.optimize.result`) does not import numpy and the solver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.lazy_exports import lazy_exports

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


__getattr__ = lazy_exports(__name__, {name: "first_order" for name in __all__})
