"""What the scheduler asks of the engine above it, as protocols, so ``scheduler/`` never imports ``engine/``.

The engine's :class:`~stratasim.system_layer.engine.coordinator.Coordinator` is the :class:`Clock` and its
:class:`~stratasim.system_layer.engine.line_batches.LineBatches` the :class:`LineBatching`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from stratasim.kernel.events import Callback

if TYPE_CHECKING:
    from stratasim.system_layer.collectives.algorithms import PhasePlan
    from stratasim.system_layer.scheduler.chunks import ChunkRun

__all__ = ["Clock", "LineBatching"]


class Clock(Protocol):
    """Simulated time in picoseconds, callbacks scheduled on it, and messages sent between NPUs."""

    @property
    def now(self) -> int: ...

    def schedule(self, time_ps: int, callback: Callback, arg: Any = None) -> None: ...

    def send(
        self, src: int, dst: int, size: int, on_arrival: Callback, arg: Any = None, *, endpoint_delay: bool = True
    ) -> None: ...


class LineBatching(Protocol):
    """Runs a phase for whole lines of NPUs at once, on a network that prices messages on the spot."""

    def join(self, run: ChunkRun, plan: PhasePlan, line: tuple[int, ...], position: int, direction: int) -> bool:
        """Hand ``run``'s phase to the batch of its line; False when it must run message by message."""
        ...
