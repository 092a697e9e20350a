"""Collective algorithms as per-phase plans: which peers each step sends to, how much, and what it waits for.

A plan is the same for every NPU of a phase; peers are given as offsets along the phase's line of NPUs (the
NPUs that differ from this one only in the phase's dimension), so one plan serves the whole group. A step
sends its messages, then completes when ``need`` messages of that step have arrived. Sizes follow the
convention of NCCL's benchmarks: ``data_bytes`` is the whole buffer on each NPU (the output of an all-gather,
the input of a reduce-scatter), and a message of a ring or direct step carries ``data_bytes / n``.

Subclass-free extension point: add a function ``(collective, n, data_bytes) -> steps`` to ``_PLANNERS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stratasim.errors import WorkloadError

__all__ = ["Step", "PhasePlan", "plan_phase", "phase_data_bytes", "COLLECTIVES"]

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


@dataclass(frozen=True)
class Step:
    """Send ``bytes`` to each peer at ``offsets``; the step is over once ``need`` messages of it arrived."""

    offsets: tuple[int, ...]
    bytes: int
    need: int


@dataclass(frozen=True)
class PhasePlan:
    """One phase of a collective: an algorithm run along ``dim`` over lines of ``size`` NPUs."""

    dim: int
    size: int
    algorithm: str
    data_bytes: int
    steps: tuple[Step, ...]


def _share(data_bytes: int, n: int) -> int:
    """Bytes of one NPU's share of a buffer: rounded up, at least one byte."""
    return max(1, -(-data_bytes // n))


def _ring(collective: str, n: int, data_bytes: int) -> tuple[Step, ...]:
    share = _share(data_bytes, n)
    if collective == "all_reduce":
        return tuple(Step((1,), share, 1) for _ in range(2 * (n - 1)))
    if collective in ("reduce_scatter", "all_gather"):
        return tuple(Step((1,), share, 1) for _ in range(n - 1))
    # all_to_all: relay around the ring; step s forwards the shares of the n-1-s peers still ahead.
    return tuple(Step((1,), share * (n - 1 - s), 1) for s in range(n - 1))


def _direct(collective: str, n: int, data_bytes: int) -> tuple[Step, ...]:
    share = _share(data_bytes, n)
    everyone = tuple(range(1, n))
    rounds = 2 if collective == "all_reduce" else 1
    return tuple(Step(everyone, share, n - 1) for _ in range(rounds))


_PLANNERS: dict[str, Callable[[str, int, int], tuple[Step, ...]]] = {"ring": _ring, "direct": _direct}


def plan_phase(collective: str, algorithm: str, dim: int, size: int, data_bytes: int) -> PhasePlan:
    """The plan of ``collective`` run with ``algorithm`` along ``dim`` (``size`` NPUs per line)."""
    if collective not in COLLECTIVES:
        raise WorkloadError(f"collective {collective!r} is not supported; expected one of {', '.join(COLLECTIVES)}")
    planner = _PLANNERS.get(algorithm)
    if planner is None:
        raise WorkloadError(f"algorithm {algorithm!r} is not supported; expected one of {', '.join(_PLANNERS)}")
    return PhasePlan(dim, size, algorithm, data_bytes, planner(collective, size, data_bytes))


def phase_data_bytes(collective: str, chunk_bytes: int, sizes: list[int], phase: int) -> int:
    """Buffer size of ``phase`` when a chunk runs one phase per entry of ``sizes`` (the lines' lengths).

    All-reduce and all-to-all run the whole chunk in every phase; a reduce-scatter shrinks the data by each
    dimension already reduced; an all-gather grows it back, phase by phase, to the whole chunk.
    """
    if collective == "reduce_scatter":
        done = 1
        for size in sizes[:phase]:
            done *= size
        return _share(chunk_bytes, done)
    if collective == "all_gather":
        ahead = 1
        for size in sizes[phase + 1 :]:
            ahead *= size
        return _share(chunk_bytes, ahead)
    return chunk_bytes
