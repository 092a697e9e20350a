"""The engine: the event queue plus the network federate, advanced in conservative time windows.

Every message the NPUs send within a window is handed to the network in one batch at the window's end, and
the next window is as wide as the network's lookahead (its least possible message delay): no delivery can
land inside the window that produced it, so the engine never processes an event before the network has
promised that nothing earlier will arrive. When the engine has nothing to do before the next delivery it
asks the network for its next window directly, so one round trip covers each step of the simulation; when
the network has nothing in flight the engine runs ahead without asking until an event sends a message. A network
may deliver messages after the window it was asked for when their arrivals are already certain (a remote
stateless network answers so): they are scheduled like any other and nothing is left in flight. An
in-process network that prices messages on the spot (:class:`~stratasim.kernel.contracts.DirectNetwork`) needs no
windows at all: each arrival is scheduled as its message is sent; one that takes and gives plain columns
(:class:`~stratasim.kernel.contracts.ColumnarNetwork`) is spared the protobuf messages of the windows.

A switch that reduces (``SendBatch.reductions``): :meth:`Coordinator.reduce` sends an NPU's contribution up to the
switch of a dimension; the network holds it until every member's is in and hands each member its result. A network
that prices messages on the spot is asked for the results' arrivals once the last member has sent.

In a study of several jobs each message carries its sender's job as its flow (``SendBatch.flow``), so networks that
model links can say how much of each link's load was each job's; a single-job study sends no flow column at all.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

import numpy as np

from stratasim.kernel.contracts import NEXT_WINDOW, PROTOCOL_VERSION, ColumnarNetwork, DirectNetwork, NetworkBackend
from stratasim.kernel.errors import BackendError, RemoteError
from stratasim.kernel.events import Callback, EventQueue, Progress
from stratasim.kernel.units import format_time_ps
from stratasim.v1 import network_pb2

__all__ = ["Coordinator"]

_TRANSITS_KEPT = 1 << 16  # distinct (source, destination, size) transits remembered at most


class Coordinator:
    """Owns simulated time; components ``schedule`` events and ``send`` messages through it."""

    def __init__(
        self,
        network: NetworkBackend,
        lookahead_ps: int,
        endpoint_delay_ps: int = 0,
        *,
        direct: DirectNetwork | None = None,
        jobs: Sequence[int] | None = None,
    ) -> None:
        """``jobs``: the job of each NPU (index = NPU id) when some NPU runs a job other than 0; its messages are
        tagged with it. None: every message is flow 0 and no flow column is sent."""
        self.queue = EventQueue()
        self._jobs = jobs
        self._endpoint_delay = endpoint_delay_ps
        self._network = network
        self._direct = direct
        self._columnar = network if isinstance(network, ColumnarNetwork) else None
        self._landing: dict[int, list[tuple[Callback, Any]]] = {}  # direct mode: arrival time -> messages
        self._transits: dict[tuple[int, int, int], int] = {}  # direct mode: each (src, dst, size)'s transit, once
        self._lookahead = max(1, lookahead_ps)
        self._handlers: dict[int, tuple[Callback, Any]] = {}
        self._next_id = 0
        self._outbox: list[tuple[int, int, int, int, Callback, Any]] = []
        self._prompt: set[int] = set()  # ids of messages that skip the endpoint delay
        self._reductions: dict[Hashable, list[int]] = {}  # a switch reduction's key -> [number, contributions left]
        self._reduction_count = 0
        self._contributions: dict[int, tuple[int, int, int, int]] = {}  # outbox index -> its SwitchReduction fields
        self._held: dict[int, list[tuple[int, int, int, int, Callback, Any]]] = {}  # direct mode: contributions
        self.messages = 0
        self.jitter: Callable[[], int] | None = None  # an extra delay before each message leaves (variability)
        self.stopped: set[int] | None = None  # with NPU failures: the NPUs stopped, whose messages are lost

    @property
    def now(self) -> int:
        return self.queue.now

    @property
    def endpoint_delay_ps(self) -> int:
        """What a receiving endpoint spends on each message before acting on it."""
        return self._endpoint_delay

    def schedule(self, time_ps: int, callback: Callback, arg: Any = None) -> None:
        self.queue.schedule(time_ps, callback, arg)

    def send(
        self,
        src: int,
        dst: int,
        size: int,
        on_arrival: Callback,
        arg: Any = None,
        *,
        endpoint_delay: bool = True,
        jittered: bool = False,
    ) -> None:
        """Send ``size`` bytes from ``src`` to ``dst`` now; ``on_arrival(arg)`` runs when they have arrived and
        the receiving endpoint has spent its endpoint delay on them (unless ``endpoint_delay`` is False). With
        :attr:`stopped`, a stopped NPU sends nothing and what arrives at one is lost.

        With :attr:`jitter` (and unless ``jittered``: it was already delayed), the message leaves that much later:
        an event then sends it, so it is injected in its window like any other (later is always safe for the
        conservative windows)."""
        if self.jitter is not None and not jittered:
            delay = self.jitter()
            if delay:
                message = (src, dst, size, on_arrival, arg, endpoint_delay)
                self.queue.schedule(self.queue.now + delay, self._send_late, message)
                return
        if self.stopped is not None:
            if src in self.stopped:
                return
            on_arrival, arg = self._arrive_unless_stopped, (dst, on_arrival, arg)
        if self._direct is not None:
            transit = self._transits.get((src, dst, size))
            if transit is None:
                if len(self._transits) >= _TRANSITS_KEPT:  # an all-to-all's pairs: keep the memo small
                    self._transits.clear()
                transit = self._transits[src, dst, size] = self._direct.transit_ps(src, dst, size)
            arrival = self.queue.now + transit
            arrival += self._endpoint_delay if endpoint_delay else 0
            self.messages += 1
            landing = self._landing.get(arrival)
            if landing is None:  # one event per distinct arrival time, its messages in send order
                self._landing[arrival] = [(on_arrival, arg)]
                self.queue.schedule(arrival, self._land, arrival)
            else:
                landing.append((on_arrival, arg))
            return
        if not endpoint_delay:
            self._prompt.add(self._next_id + len(self._outbox))
        self._outbox.append((src, dst, size, self.queue.now, on_arrival, arg))

    def reduce(
        self, src: int, key: Hashable, members: int, dim: int, sizes: tuple[int, int], on_arrival: Callback, arg: Any
    ) -> None:
        """Send ``sizes[0]`` bytes from ``src`` now up to the switch of dimension ``dim``: its contribution to the
        reduction ``key`` of ``members`` NPUs; ``on_arrival(arg)`` runs once the switch's ``sizes[1]`` bytes of
        result came back down to ``src`` (every member's contribution in) and passed its endpoint."""
        known = self._reductions.get(key)
        if known is None:
            self._reduction_count += 1
            known = self._reductions[key] = [self._reduction_count, members]
        number = known[0]
        known[1] -= 1
        if not known[1]:
            del self._reductions[key]
        if self._direct is None:
            self._contributions[len(self._outbox)] = (number, members, dim, sizes[1])
            self._outbox.append((src, src, sizes[0], self.queue.now, on_arrival, arg))
            return
        held = self._held.setdefault(number, [])
        held.append((src, self.queue.now, *sizes, on_arrival, arg))
        if len(held) == members:
            self._land_reduction(dim, self._held.pop(number))

    def _land_reduction(self, dim: int, held: list[tuple[int, int, int, int, Callback, Any]]) -> None:
        """Direct mode: schedule each member's result of a complete switch reduction, as the network prices it."""
        price = getattr(self._direct, "reduction_arrivals_ps", None)
        if price is None:
            raise BackendError(
                f"network backend {self._network.name!r} prices messages on the spot but not a reduction at a switch "
                f"(dimension {dim} has in_network_reduction: true); use the analytical or congestion_aware network"
            )
        arrivals = price(dim, [contribution[:4] for contribution in held])
        self.messages += len(held)
        for (*_, on_arrival, arg), arrival in zip(held, arrivals):
            self.queue.schedule(arrival + self._endpoint_delay, on_arrival, arg)

    def cancel(self, flow: int) -> int:
        """Take every message of ``flow`` (a job) still on its way off the network now: a job stopped by a failure
        frees the links its messages held or queued for, from now on. The window's sends go to the network first
        (those sent before now are on their way too). Returns how many messages were taken off; none of their
        handlers runs. A network that prices messages on the spot holds no state to free: their arrivals are lost
        as they land (:attr:`stopped`)."""
        if self._direct is not None:
            return 0
        cancel = getattr(self._network, "cancel", None)
        if cancel is None:  # a backend written against an older network contract
            raise BackendError(
                f"network backend {self._network.name!r} has no cancel (the network contract of protocol version "
                f"{PROTOCOL_VERSION}): it cannot take the messages of job {flow}, stopped by a failed NPU, off the "
                "network; implement cancel, or run the study on a network that has it"
            )
        self._flush()
        dropped = cancel(flow, self.queue.now).id
        for msg_id in dropped:
            del self._handlers[msg_id]
            self._prompt.discard(msg_id)
        return len(dropped)

    def _send_late(self, message: tuple[int, int, int, Callback, Any, bool]) -> None:
        src, dst, size, on_arrival, arg, endpoint_delay = message
        self.send(src, dst, size, on_arrival, arg, endpoint_delay=endpoint_delay, jittered=True)

    def _arrive_unless_stopped(self, message: tuple[int, Callback, Any]) -> None:
        """A message arrived: handled, unless its receiver stopped while it was on its way (then it is lost)."""
        dst, on_arrival, arg = message
        if self.stopped is None or dst not in self.stopped:
            on_arrival(arg)

    def _land(self, arrival: int) -> None:
        for callback, arg in self._landing.pop(arrival):  # _run_batch, inline: one call less per message
            callback(arg)

    def _flush(self) -> None:
        """Hand the window's messages to the network as one columnar batch, numbering them in send order."""
        outbox = self._outbox
        if not outbox:
            return
        first = self._next_id
        ids = range(first, first + len(outbox))
        self._next_id = first + len(outbox)
        src, dst, sizes, times, callbacks, args = zip(*outbox)
        self._handlers.update(zip(ids, zip(callbacks, args)))
        self._outbox = []
        del outbox  # the window's messages are columns now: free them before the network works (all-to-all: 1M)
        jobs = self._jobs
        flows = () if jobs is None else [jobs[sender] for sender in src]
        contributions, self._contributions = self._contributions, {}
        if self._columnar is not None and not contributions:
            self._columnar.inject_columns(ids, src, dst, sizes, times, flows)
            return
        batch = network_pb2.SendBatch()
        for index, (number, members, dim, result_bytes) in contributions.items():
            batch.reductions.add(
                message=first + index, reduction=number, members=members, dimension=dim, result_bytes=result_bytes
            )
        batch.id.extend(ids)
        batch.src.extend(src)
        batch.dst.extend(dst)
        batch.bytes.extend(sizes)
        batch.send_time_ps.extend(times)
        batch.flow.extend(flows)
        self._network.inject(batch)

    def run(self, progress: Progress | None = None) -> None:
        """Run until neither the engine nor the network has anything left to do, telling ``progress`` the
        simulated time reached and the events and messages processed now and then.

        A network in another process that fails is reported with the simulated time it failed at.
        """
        try:
            if self._direct is None:
                self._run(progress)
            elif progress is None:
                self.queue.run()
            else:
                self.queue.run(lambda now, events: progress(now, events + self.messages))
        except RemoteError as exc:
            raise RemoteError(f"{exc} (at simulated time {format_time_ps(self.queue.now)})") from None

    def _run(self, progress: Progress | None) -> None:
        queue = self.queue
        lookahead = self._lookahead
        network_next: int | None = None
        while True:
            if progress is not None:
                progress(queue.now, queue.processed + self.messages)
            if network_next is None and not self._outbox:
                # Nothing in flight: no delivery can interleave, so run ahead until somebody sends, and on up to
                # where that first message could land, batching every send before then into one window.
                queue.run_until_busy(self._outbox)
                if self._outbox:
                    queue.run_until(self._outbox[0][3] + lookahead - 1)
            engine_next = queue.peek()
            earliest_arrival = self._outbox[0][3] + lookahead if self._outbox else None
            if engine_next is None and network_next is None and earliest_arrival is None:
                return
            self._flush()
            if engine_next is None:
                until = NEXT_WINDOW
            else:
                start = min(t for t in (engine_next, network_next, earliest_arrival) if t is not None)
                until = start + lookahead - 1
            if self._columnar is not None:
                due, window_end, network_next = self._columnar.advance_columns(until)
                if due:
                    self._deliver_due(due)
            else:
                result = self._network.advance(until)
                self._deliver(result.deliveries)
                network_next = result.next_event_ps if result.has_next else None
                window_end = result.window_end_ps
            queue.run_until(window_end)

    def _deliver(self, deliveries: network_pb2.DeliveryBatch) -> None:
        """Schedule the handlers of a window's deliveries: one event per distinct arrival time, in id order."""
        if not deliveries.id:
            return
        pop = self._handlers.pop
        delay = self._endpoint_delay
        ids = list(deliveries.id)
        self.messages += len(ids)
        if self._prompt:
            self._deliver_mixed(ids, list(deliveries.time_ps))
            return
        if len(ids) == 1:
            self.queue.schedule(deliveries.time_ps[0] + delay, _run_batch, [pop(ids[0])])
            return
        times = np.asarray(deliveries.time_ps, dtype=np.int64)
        bounds = [0, *(np.flatnonzero(times[1:] != times[:-1]) + 1).tolist(), len(ids)]
        for start, end in zip(bounds, bounds[1:]):
            self.queue.schedule(int(times[start]) + delay, _run_batch, [pop(i) for i in ids[start:end]])

    def _deliver_due(self, due: list[tuple[int, int]]) -> None:
        """:meth:`_deliver` of a columnar network's (time, id) deliveries, in that order."""
        self.messages += len(due)
        if self._prompt:
            self._deliver_mixed([msg_id for _, msg_id in due], [time_ps for time_ps, _ in due])
            return
        pop = self._handlers.pop
        delay = self._endpoint_delay
        schedule = self.queue.schedule
        if due[0][0] == due[-1][0]:  # all at one time (a collective's step): one event
            schedule(due[0][0] + delay, _run_batch, [pop(msg_id) for _, msg_id in due])
            return
        for time_ps, group in groupby(due, key=itemgetter(0)):
            schedule(time_ps + delay, _run_batch, [pop(msg_id) for _, msg_id in group])

    def _deliver_mixed(self, ids: list[int], times: list[int]) -> None:
        """The slow path, for windows that may hold messages skipping the endpoint delay."""
        pop = self._handlers.pop
        batches: dict[int, list[tuple[Callback, Any]]] = {}
        for msg_id, time_ps in zip(ids, times):
            if msg_id in self._prompt:
                self._prompt.discard(msg_id)
            else:
                time_ps += self._endpoint_delay
            batches.setdefault(time_ps, []).append(pop(msg_id))
        for time_ps, batch in batches.items():
            self.queue.schedule(time_ps, _run_batch, batch)


def _run_batch(batch: list[tuple[Callback, Any]]) -> None:
    for callback, arg in batch:
        callback(arg)
