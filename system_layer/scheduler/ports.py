"""What the scheduler asks of the engine above it, as protocols, so ``scheduler/`` never imports ``engine/``.

The engine's :class:`~stratasim.system_layer.engine.coordinator.Coordinator` is the :class:`Clock`; its
:class:`~stratasim.system_layer.engine.line_batches.LineBatches` the
:class:`~stratasim.system_layer.scheduler.chunks.LineBatching` (beside the chunk runs it takes).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

from stratasim.kernel.events import Callback

__all__ = ["Clock"]


class Clock(Protocol):
    """Simulated time in picoseconds, callbacks scheduled on it, and messages sent between NPUs."""

    @property
    def now(self) -> int: ...

    def schedule(self, time_ps: int, callback: Callback, arg: Any = None) -> None: ...

    def send(
        self, src: int, dst: int, size: int, on_arrival: Callback, arg: Any = None, *, endpoint_delay: bool = True
    ) -> None: ...

    def reduce(
        self, src: int, key: Hashable, members: int, dim: int, sizes: tuple[int, int], on_arrival: Callback, arg: Any
    ) -> None: ...
