"""Collective algorithms as per-phase plans: which peers each step sends to, how much, and what it waits for.

A phase runs along lines of ``n`` NPUs (see :mod:`system_layer.groups`); an NPU's peers are given as offsets
along its line (peer position = (own position + offset) mod n). A step sends ``bytes`` to each peer, tagged
``tag``, then completes once ``need`` messages tagged ``wait`` have arrived (``need`` may be 0). Lock-step
algorithms (ring, direct) send and wait on the step's own index and share one plan across positions; others
(trees, halving-doubling) may give each position its own steps.

Sizes follow NCCL's benchmarks: ``data_bytes`` is the whole buffer on each NPU (the output of an all-gather,
the input of a reduce-scatter), and a message of a ring or direct step carries ``data_bytes / n``. A step
whose received data is reduced into the local buffer is marked ``reduces``; the system layer charges it the
local reduction time.

Extension point: add a planner ``(collective, n, data_bytes, position) -> steps`` to ``_PLANNERS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from stratasim.errors import WorkloadError

__all__ = ["Step", "PhasePlan", "plan_phase", "phase_data_bytes", "lockstep", "COLLECTIVES"]

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


@dataclass(frozen=True)
class Step:
    """Send ``bytes`` tagged ``tag`` to each peer at ``offsets``; done once ``need`` messages tagged ``wait`` arrived."""

    offsets: tuple[int, ...]
    bytes: int
    need: int
    tag: int = 0
    wait: int = 0
    reduces: bool = False


def lockstep(steps: list[Step]) -> tuple[Step, ...]:
    """Number the steps so that each sends and waits on its own index (every NPU is on the same step)."""
    return tuple(
        Step(s.offsets, s.bytes, s.need, tag=i, wait=i, reduces=s.reduces) for i, s in enumerate(steps)
    )


Planner = Callable[[str, int, int, int], tuple[Step, ...]]


@dataclass(frozen=True)
class PhasePlan:
    """One phase of a collective: ``algorithm`` run along ``dim`` over lines of ``size`` NPUs."""

    dim: int
    size: int
    algorithm: str
    collective: str
    data_bytes: int
    _planner: Planner = field(repr=False, compare=False)

    def steps_for(self, position: int) -> tuple[Step, ...]:
        """The steps of the NPU at ``position`` of its line."""
        return self._planner(self.collective, self.size, self.data_bytes, position)


def _share(data_bytes: int, n: int) -> int:
    """Bytes of one NPU's share of a buffer: rounded up, at least one byte."""
    return max(1, -(-data_bytes // n))


@lru_cache(maxsize=4096)
def _ring(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    share = _share(data_bytes, n)
    if collective == "all_reduce":
        return lockstep([Step((1,), share, 1, reduces=s < n - 1) for s in range(2 * (n - 1))])
    if collective == "reduce_scatter":
        return lockstep([Step((1,), share, 1, reduces=True) for _ in range(n - 1)])
    if collective == "all_gather":
        return lockstep([Step((1,), share, 1) for _ in range(n - 1)])
    # all_to_all: relay around the ring; step s forwards the shares of the n-1-s peers still ahead.
    return lockstep([Step((1,), share * (n - 1 - s), 1) for s in range(n - 1)])


@lru_cache(maxsize=4096)
def _direct(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    share = _share(data_bytes, n)
    everyone = tuple(range(1, n))
    if collective == "all_reduce":
        return lockstep([Step(everyone, share, n - 1, reduces=True), Step(everyone, share, n - 1)])
    return lockstep([Step(everyone, share, n - 1, reduces=collective == "reduce_scatter")])


def _position_independent(planner: Planner) -> Planner:
    """Lock-step planners give every position the same steps: cache them once, not once per position."""

    def plan(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
        return planner(collective, n, data_bytes, 0)

    return plan


_PLANNERS: dict[str, Planner] = {"ring": _position_independent(_ring), "direct": _position_independent(_direct)}


def plan_phase(collective: str, algorithm: str, dim: int, size: int, data_bytes: int) -> PhasePlan:
    """The plan of ``collective`` run with ``algorithm`` along ``dim`` (``size`` NPUs per line)."""
    if collective not in COLLECTIVES:
        raise WorkloadError(f"collective {collective!r} is not supported; expected one of {', '.join(COLLECTIVES)}")
    planner = _PLANNERS.get(algorithm)
    if planner is None:
        raise WorkloadError(f"algorithm {algorithm!r} is not supported; expected one of {', '.join(_PLANNERS)}")
    return PhasePlan(dim, size, algorithm, collective, data_bytes, planner)


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
