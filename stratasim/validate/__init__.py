"""``stratasim validate``: published and reference numbers (Megatron-LM, ASTRA-sim, SCALE-Sim, the calibrated
presets) checked from the installed package, with their cases and inputs shipped as package data."""

from stratasim.validate.cases import Case, Check, Suite, load_cases
from stratasim.validate.runner import Row, validate

__all__ = ["Case", "Check", "Suite", "Row", "load_cases", "validate"]
