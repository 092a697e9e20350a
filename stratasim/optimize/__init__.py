"""Optimisation over a study's plans: the first-order (closed-form) model of a transformer training plan."""

from stratasim.optimize.first_order import (
    MEMORY_TERMS,
    TERMS,
    FirstOrderError,
    FirstOrderModel,
    PlanEstimates,
    estimate_plans,
)

__all__ = ["MEMORY_TERMS", "TERMS", "FirstOrderError", "FirstOrderModel", "PlanEstimates", "estimate_plans"]
