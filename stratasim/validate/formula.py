"""The closed forms of ``cases.yaml``: arithmetic formulas over a collective's topology, read as exact rationals.

A formula may use integers, ``+ - * / //``, parentheses, ``ceil(x)``, ``ser(bytes, bandwidth)`` (the
serialisation time in ps, rounded up: ``ceil(bytes * 1e12 / bandwidth)``) and the names of its case: ``S`` (the
collective's size in bytes), ``delay`` (the endpoint delay in ps) and, per dimension ``d`` of the topology
(innermost first), ``n<d>``, ``B<d>`` (bytes/s) and ``alpha<d>`` (ps); ``n``, ``B`` and ``alpha`` are dimension 0's.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import parse_bandwidth, parse_bytes, parse_time_ps

__all__ = ["variables", "evaluate"]

_OPERATORS: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: Fraction(a // b),
}


def _ser(size: Fraction, bandwidth: Fraction) -> Fraction:
    return Fraction(math.ceil(size * 10**12 / bandwidth))


_FUNCTIONS: dict[str, Callable[..., Fraction]] = {"ceil": lambda x: Fraction(math.ceil(x)), "ser": _ser}


def variables(topology: Sequence[Mapping[str, Any]], size: str, delay: str = "0ns") -> dict[str, Fraction]:
    """The names a formula may use for a collective of ``size`` with ``delay`` on ``topology``."""
    found = {"S": Fraction(parse_bytes(size)), "delay": Fraction(parse_time_ps(delay))}
    for index, dim in enumerate(topology):
        for name, value in (
            ("n", Fraction(dim["size"])),
            ("B", Fraction(parse_bandwidth(dim["bandwidth"]))),
            ("alpha", Fraction(parse_time_ps(dim["latency"]))),
        ):
            found[f"{name}{index}"] = value
            if index == 0:
                found[name] = value
    return found


def evaluate(formula: str, names: Mapping[str, Fraction], where: str) -> int:
    """``formula`` worked out exactly; raises :class:`StrataSimError` naming ``where`` when it uses anything
    else than the above or is not a whole number."""

    def value(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Fraction(node.value)
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return Fraction(_OPERATORS[type(node.op)](value(node.left), value(node.right)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return Fraction(_FUNCTIONS[node.func.id](*(value(arg) for arg in node.args)))
        raise StrataSimError(
            f"{where}: the formula may not use {ast.unparse(node)!r} (see stratasim/validate/formula.py)"
        )

    try:
        result = value(ast.parse(formula, mode="eval").body)
    except (SyntaxError, TypeError, ZeroDivisionError) as exc:
        raise StrataSimError(f"{where}: cannot work out the formula: {exc}") from None
    if result.denominator != 1:
        raise StrataSimError(f"{where}: the formula gives {result}, not a whole number of picoseconds")
    return int(result)
