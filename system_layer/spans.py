"""The records a trace is made of: busy spans and counter samples of one NPU, in integer picoseconds.

Counter samples are the kernel's (:mod:`stratasim.kernel.counters`), since request-level serving studies record
them too; this module names them beside the spans.

They live apart from :mod:`stratasim.system_layer.result` (which lists them) and
:mod:`stratasim.system_layer.trace` (which records them) so that neither imports the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.kernel.counters import CounterSample

__all__ = ["TraceSpan", "CounterSample"]


@dataclass(frozen=True)
class TraceSpan:
    """A busy interval of one NPU on one track (``compute``, or ``comm`` / ``comm phase N``)."""

    npu: int
    track: str
    name: str
    start_ps: int
    end_ps: int
