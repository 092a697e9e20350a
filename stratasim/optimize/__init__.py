"""Finding the best plan and system for a study: the first-order (closed-form) model of a plan, and DFModel's mapping
passes as mixed-integer programs."""

from stratasim.optimize.first_order import (
    MEMORY_TERMS,
    TERMS,
    FirstOrderError,
    FirstOrderModel,
    PlanEstimates,
    estimate_plans,
)

__all__ = ["MEMORY_TERMS", "TERMS", "FirstOrderError", "FirstOrderModel", "PlanEstimates", "estimate_plans"]
