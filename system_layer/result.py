"""What one simulation produced, in integer picoseconds; the composition root turns it into a report."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CollectiveStats", "NpuStats", "TraceSpan", "SimulationResult"]


@dataclass(frozen=True)
class CollectiveStats:
    """One collective across its group: when it started and ended, and where its chunks spent time per phase.

    ``queue_delay_ps_per_phase[p]`` is the mean time a chunk waited in phase p's queue before running;
    ``network_delay_ps_per_phase[p]`` the mean time a chunk took to run phase p (means over NPUs and chunks).
    """

    collective_id: int
    type: str
    bytes: int
    group_size: int
    start_ps: int
    end_ps: int
    queue_delay_ps_per_phase: tuple[int, ...]
    network_delay_ps_per_phase: tuple[int, ...]


@dataclass(frozen=True)
class NpuStats:
    """One NPU's timeline: ``exposed_comm_ps`` is its time not computing before it finished."""

    npu: int
    finish_ps: int
    compute_ps: int
    comm_ps: int
    exposed_comm_ps: int


@dataclass(frozen=True)
class TraceSpan:
    """A busy interval of one NPU on one track (``compute``, or ``comm`` / ``comm phase N``)."""

    npu: int
    track: str
    name: str
    start_ps: int
    end_ps: int


@dataclass(frozen=True)
class SimulationResult:
    """``events_processed`` counts engine events plus delivered messages."""

    total_time_ps: int
    npus: int
    collectives: tuple[CollectiveStats, ...]
    per_npu: tuple[NpuStats, ...]
    spans: tuple[TraceSpan, ...]
    events_processed: int
