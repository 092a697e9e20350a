"""Counters a trace shows beside the busy spans: a value of one NPU changing over simulated time."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CounterSample"]


@dataclass(frozen=True)
class CounterSample:
    """A counter of one NPU taking ``value`` from ``time_ps`` on (e.g. ``memory``: the bytes it holds)."""

    npu: int
    name: str
    time_ps: int
    value: int
