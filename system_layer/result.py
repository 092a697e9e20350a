"""What one simulation produced, in integer picoseconds; the composition root turns it into a report."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CollectiveStats", "NpuStats", "TraceSpan", "LinkStats", "SimulationResult"]


@dataclass(frozen=True)
class CollectiveStats:
    """One collective across its group: when it started and ended, and where its chunks spent time per phase.

    Phase p ran ``phase_collectives[p]`` along dimension ``phase_dims[p]`` (-1: a flat phase over a group that
    is not a product of dimensions). ``queue_delay_ps_per_phase[p]`` is the mean time a chunk waited in phase
    p's queue before running; ``network_delay_ps_per_phase[p]`` the mean time a chunk took to run phase p
    (means over NPUs and chunks); the ``_per_chunk`` tables give the same per chunk (means over NPUs).
    """

    collective_id: int
    type: str
    bytes: int
    group_size: int
    start_ps: int
    end_ps: int
    queue_delay_ps_per_phase: tuple[int, ...]
    network_delay_ps_per_phase: tuple[int, ...]
    phase_dims: tuple[int, ...] = ()
    phase_collectives: tuple[str, ...] = ()
    queue_delay_ps_per_chunk: tuple[tuple[int, ...], ...] = ()
    network_delay_ps_per_chunk: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class NpuStats:
    """One NPU's timeline: ``exposed_comm_ps`` is its time not computing before it finished;
    ``bytes_sent_per_dim`` maps a dimension (-1: flat phases) to the collective bytes it sent along it."""

    npu: int
    finish_ps: int
    compute_ps: int
    comm_ps: int
    exposed_comm_ps: int
    bytes_sent_per_dim: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class TraceSpan:
    """A busy interval of one NPU on one track (``compute``, or ``comm`` / ``comm phase N``)."""

    npu: int
    track: str
    name: str
    start_ps: int
    end_ps: int


@dataclass(frozen=True)
class LinkStats:
    """What one link carried over the run (networks that model links only)."""

    link: str
    busy_ps: int
    bytes: int
    messages: int


@dataclass(frozen=True)
class SimulationResult:
    """``events_processed`` counts engine events plus delivered messages; ``simulated_npus`` is how many NPUs
    were simulated one by one (1 when symmetric NPUs were aggregated, else ``npus``)."""

    total_time_ps: int
    npus: int
    collectives: tuple[CollectiveStats, ...]
    per_npu: tuple[NpuStats, ...]
    spans: tuple[TraceSpan, ...]
    events_processed: int
    simulated_npus: int = 0
    links: tuple[LinkStats, ...] = ()
