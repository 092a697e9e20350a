"""What an element-wise operator computes (``stratasim.v1.ElementwiseFunction``): the enum's values as a type, the
functions an operator may name, and their names as people write them."""

from __future__ import annotations

from typing import TypeAlias

from stratasim.v1 import compute_pb2

__all__ = ["ELEMENTWISE_FUNCTIONS", "ElementwiseFunction", "function_choices", "function_name", "parse_function"]

ElementwiseFunction: TypeAlias = compute_pb2.ElementwiseFunction.ValueType
"""A value of the ``stratasim.v1.ElementwiseFunction`` enum: what an element-wise operator computes, e.g.
``compute_pb2.RMSNORM``."""

ELEMENTWISE_FUNCTIONS: tuple[ElementwiseFunction, ...] = tuple(
    value for value in compute_pb2.ElementwiseFunction.values() if value != compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED
)
"""Every function an element-wise operator may name (all but ``ELEMENTWISE_FUNCTION_UNSPECIFIED``)."""


def function_name(function: ElementwiseFunction) -> str:
    """The lower-case name of an element-wise function for messages (``"rmsnorm"``; ``"unspecified"`` for 0);
    never raises, even for unknown values."""
    if function == compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED:
        return "unspecified"
    if function in compute_pb2.ElementwiseFunction.values():
        return compute_pb2.ElementwiseFunction.Name(function).lower()
    return f"function #{function}"


def function_choices() -> str:
    """Every function's name, comma-separated, for messages."""
    return ", ".join(function_name(function) for function in ELEMENTWISE_FUNCTIONS)


def parse_function(text: object) -> ElementwiseFunction:
    """Read an element-wise function written as people write it (``"rmsnorm"``, ``"SILU_MUL"``; case-insensitive)."""
    key = text.strip().lower() if isinstance(text, str) else None
    for function in ELEMENTWISE_FUNCTIONS:
        if function_name(function) == key:
            return function
    raise ValueError(f"unknown element-wise function {text!r}; expected one of {function_choices()}")
