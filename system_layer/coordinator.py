"""The engine: the event queue plus the network federate, advanced in conservative time windows.

Every message the NPUs send within a window is handed to the network in one batch at the window's end, and
the next window is as wide as the network's lookahead (its least possible message delay): no delivery can
land inside the window that produced it, so the engine never processes an event before the network has
promised that nothing earlier will arrive. When the engine has nothing to do before the next delivery it
asks the network for its next window directly, so one round trip covers each step of the simulation.
"""

from __future__ import annotations

from typing import Any

from stratasim.contracts import NetworkBackend
from stratasim.events import Callback, EventQueue
from stratasim.v1 import network_pb2

__all__ = ["Coordinator"]

NEXT_WINDOW = -1


class Coordinator:
    """Owns simulated time; components ``schedule`` events and ``send`` messages through it."""

    def __init__(self, network: NetworkBackend, lookahead_ps: int, endpoint_delay_ps: int = 0) -> None:
        self.queue = EventQueue()
        self._endpoint_delay = endpoint_delay_ps
        self._network = network
        self._lookahead = max(1, lookahead_ps)
        self._handlers: dict[int, tuple[Callback, Any]] = {}
        self._next_id = 0
        self._ids: list[int] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._bytes: list[int] = []
        self._times: list[int] = []
        self.windows = 0
        self.messages = 0

    @property
    def now(self) -> int:
        return self.queue.now

    def schedule(self, time_ps: int, callback: Callback, arg: Any = None) -> None:
        self.queue.schedule(time_ps, callback, arg)

    def send(self, src: int, dst: int, size: int, on_arrival: Callback, arg: Any = None) -> None:
        """Send ``size`` bytes from ``src`` to ``dst`` now; ``on_arrival(arg)`` runs when they have arrived and
        the receiving endpoint has spent its endpoint delay on them."""
        msg_id = self._next_id
        self._next_id = msg_id + 1
        self._handlers[msg_id] = (on_arrival, arg)
        self._ids.append(msg_id)
        self._src.append(src)
        self._dst.append(dst)
        self._bytes.append(size)
        self._times.append(self.queue.now)

    def _flush(self) -> None:
        if not self._ids:
            return
        batch = network_pb2.SendBatch()
        batch.id.extend(self._ids)
        batch.src.extend(self._src)
        batch.dst.extend(self._dst)
        batch.bytes.extend(self._bytes)
        batch.send_time_ps.extend(self._times)
        self._network.inject(batch)
        self._ids, self._src, self._dst, self._bytes, self._times = [], [], [], [], []

    def run(self) -> None:
        """Run until neither the engine nor the network has anything left to do."""
        queue = self.queue
        lookahead = self._lookahead
        network_next: int | None = None
        while True:
            engine_next = queue.peek()
            earliest_arrival = self._times[0] + lookahead if self._times else None
            if engine_next is None and network_next is None and earliest_arrival is None:
                return
            self._flush()
            if engine_next is None:
                result = self._network.advance(NEXT_WINDOW)
            else:
                start = min(t for t in (engine_next, network_next, earliest_arrival) if t is not None)
                result = self._network.advance(start + lookahead - 1)
            self.windows += 1
            self._deliver(result.deliveries)
            network_next = result.next_event_ps if result.has_next else None
            queue.run_until(result.window_end_ps)

    def _deliver(self, deliveries: network_pb2.DeliveryBatch) -> None:
        """Schedule the handlers of a window's deliveries: one event per distinct arrival time, in id order."""
        handlers = self._handlers
        delay = self._endpoint_delay
        batch: list[tuple[Callback, Any]] = []
        current = -1
        self.messages += len(deliveries.id)
        for msg_id, time_ps in zip(deliveries.id, deliveries.time_ps):
            if time_ps != current:
                if batch:
                    self.queue.schedule(current + delay, _run_batch, batch)
                batch = []
                current = time_ps
            batch.append(handlers.pop(msg_id))
        if batch:
            self.queue.schedule(current + delay, _run_batch, batch)


def _run_batch(batch: list[tuple[Callback, Any]]) -> None:
    for callback, arg in batch:
        callback(arg)
