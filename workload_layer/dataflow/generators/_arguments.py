"""The argument checks every generator shares: one :class:`GraphError` naming the generator and the argument."""

from __future__ import annotations

from stratasim.workload_layer.dataflow.graph import GraphError

__all__ = ["argument_error", "positive", "flag"]


def argument_error(generator: str, name: str, message: str) -> GraphError:
    """The error for argument ``name`` of ``generator``: ``gpt_layer_graph: argument 'training': ...``."""
    return GraphError(f"{generator}: argument {name!r}", message)


def positive(generator: str, name: str, value: object, least: int = 1) -> int:
    """``value`` when it is an integer of at least ``least`` (not a bool), else the argument's error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise argument_error(generator, name, f"must be an integer of at least {least}, not {value!r}")
    return value


def flag(generator: str, name: str, value: object) -> bool:
    """``value`` when it is a bool, else the argument's error."""
    if not isinstance(value, bool):
        raise argument_error(generator, name, f"must be true or false, not {value!r}")
    return value
