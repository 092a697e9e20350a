"""The phases a chunk runs: which collective on which line of NPUs, over how many bytes.

A chunk of a collective over a multi-dimensional group runs one phase per dimension the group spans. An
all-reduce runs either an all-reduce per dimension (the baseline order of the ASTRA-sim paper) or, when
``local_bw_aware`` is set, the enhanced order: reduce-scatter up the dimensions, all-reduce on the last,
all-gather back down, so the outer (slower) dimensions carry only the shrunken data. A reduce-scatter
shrinks the data by each dimension done; an all-gather grows it; an all-to-all exchanges the whole chunk in
each dimension. A reduce runs innermost dimension first, towards the root; a broadcast outermost first,
from the root (all-reduce's halves, in the order that keeps every phase busy).
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.system_layer.collectives.groups import PhaseLines
from stratasim.system_layer.collectives.steps import share_bytes

__all__ = ["PhaseSpec", "phase_sequence"]


@dataclass(frozen=True)
class PhaseSpec:
    """One phase of a chunk: ``collective`` along ``lines`` on a buffer of ``data_bytes`` per NPU."""

    lines: PhaseLines
    collective: str
    data_bytes: int


def phase_sequence(
    collective: str, chunk_bytes: int, lines: tuple[PhaseLines, ...], *, local_bw_aware: bool
) -> tuple[PhaseSpec, ...]:
    """The phases of a chunk of ``chunk_bytes`` (the whole buffer on each NPU) over the group's ``lines``."""
    if collective == "all_reduce" and local_bw_aware and len(lines) > 1:
        specs: list[PhaseSpec] = []
        data = chunk_bytes
        for line in lines[:-1]:
            specs.append(PhaseSpec(line, "reduce_scatter", data))
            data = share_bytes(data, line.size)
        specs.append(PhaseSpec(lines[-1], "all_reduce", data))
        for line in reversed(lines[:-1]):
            data *= line.size
            specs.append(PhaseSpec(line, "all_gather", data))
        return tuple(specs)
    if collective == "reduce_scatter":
        specs, data = [], chunk_bytes
        for line in lines:
            specs.append(PhaseSpec(line, collective, data))
            data = share_bytes(data, line.size)
        return tuple(specs)
    if collective == "all_gather":
        total = 1
        for line in lines:
            total *= line.size
        specs, data = [], share_bytes(chunk_bytes, total)
        for line in lines:
            data *= line.size
            specs.append(PhaseSpec(line, collective, data))
        return tuple(specs)
    if collective == "broadcast":  # outermost dimension first: the root's line, then ever more lines
        return tuple(PhaseSpec(line, collective, chunk_bytes) for line in reversed(lines))
    return tuple(PhaseSpec(line, collective, chunk_bytes) for line in lines)
