"""What a workload would build, estimated from its configuration before anything is built: the composition root
prices it (memory, events) against the run's budget and refuses a study that would exhaust the machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["WorkEstimate", "EstimableWorkload"]


@dataclass(frozen=True)
class WorkEstimate:
    """An upper estimate of a workload's graphs on ``npus`` NPUs, cheap to compute (never by building them).

    ``graphs`` distinct graph objects are built (NPUs sharing one count once), each of at most ``nodes`` nodes, of
    which at most ``communications`` are collectives or point-to-point transfers, none larger than
    ``largest_message`` bytes. ``drivers`` names the workload keys that make the graphs large: what a refusal
    tells the user to reduce."""

    graphs: int
    nodes: int
    communications: int
    largest_message: int
    drivers: str


@runtime_checkable
class EstimableWorkload(Protocol):
    """A workload that can say what it would build before building it."""

    def estimate(self, npus: int) -> WorkEstimate:
        """The :class:`WorkEstimate` of the graphs :meth:`graphs` would return for ``npus`` NPUs; it builds nothing,
        so it answers at once even for a study far beyond the machine."""
        ...
