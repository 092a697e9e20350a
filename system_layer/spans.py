"""The records a trace is made of: busy spans and counter samples of one NPU, in integer picoseconds.

They live apart from :mod:`stratasim.system_layer.result` (which lists them) and
:mod:`stratasim.system_layer.trace` (which records them) so that neither imports the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TraceSpan", "CounterSample"]


@dataclass(frozen=True)
class TraceSpan:
    """A busy interval of one NPU on one track (``compute``, or ``comm`` / ``comm phase N``)."""

    npu: int
    track: str
    name: str
    start_ps: int
    end_ps: int


@dataclass(frozen=True)
class CounterSample:
    """A counter of one NPU taking ``value`` from ``time_ps`` on (e.g. ``memory``: the bytes it holds)."""

    npu: int
    name: str
    time_ps: int
    value: int
