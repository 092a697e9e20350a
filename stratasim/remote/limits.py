"""What one server grants its clients: how many sessions at once, how long one may sit idle, how large a topology a
session may configure and how large one request may be.

A topology's size is worked out from its message alone (:func:`stratasim.network_layer.topologies.size`, each
family's count beside its builder), before any backend builds it: a ~100-byte ``configure`` naming a ring of 10^8
NPUs (or a fat-tree of k = 10^4, an NVSwitch node of 10^8 planes) would otherwise have the backend build hundreds of
millions of links — tens of seconds of CPU and gigabytes — before anything refused it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stratasim.kernel.errors import BackendError
from stratasim.kernel.work_limit import MAX_WORK, excess_work
from stratasim.v1 import compute_pb2, network_pb2

__all__ = ["CLOSE_GRACE_S", "Limits", "SessionSlots", "Ticket", "check_topology", "work_refusal"]


@dataclass(frozen=True)
class Limits:
    """A server's limits (``stratasim serve --max-sessions``, ``--idle-timeout``, ``--max-npus``, ``--max-links``,
    ``--max-request-bytes``, ``--max-work``); the defaults serve every study of the repository and refuse what would exhaust a
    workstation."""

    max_sessions: int = 16
    """Network sessions open at once; one more is refused at once, saying so, unless one is idle (below)."""
    idle_timeout_s: float = 300.0
    """A network session whose client has sent nothing for this long is ended when a new client needs its place."""
    max_npus: int = 1 << 20
    """NPUs a configured topology may have."""
    max_links: int = 1 << 21
    """Links (and switches) a configured topology may have: building a fabric costs some 3 us and 250 bytes a
    link, so the default bounds a configure to a few seconds and some 600 MB."""
    max_request_bytes: int = 512 * 1024 * 1024
    """Bytes one request may carry (a window's sends, a batch of operators)."""
    max_work: int = MAX_WORK
    """Steps one compute request may take, as a backend whose cost grows with the operators' sizes counts them
    beforehand (:class:`~stratasim.kernel.contracts.SizedWork`; the default,
    :data:`~stratasim.kernel.contracts.MAX_WORK`, bounds a request to a second or two)."""


def check_topology(topology: network_pb2.Topology, limits: Limits) -> None:
    """Raise BackendError, before any work, if ``topology`` is larger than ``limits`` allow."""
    # Imported here: the families' study sections load pydantic, some 0.15 s a server would otherwise wait for
    # before listening, and a compute server never needs them.
    from stratasim.network_layer import topologies

    npus, links = topologies.size(topology)
    if npus > limits.max_npus:
        raise BackendError(
            f"topology: {_count(npus)} NPUs exceed this server's limit of {limits.max_npus:,} "
            "(its --max-npus); refused before building anything"
        )
    if links > limits.max_links:
        raise BackendError(
            f"topology: some {_count(links)} links and switches exceed this server's limit of "
            f"{limits.max_links:,} (its --max-links); refused before building anything"
        )


def work_refusal(steps: Sequence[int], ops: Sequence[compute_pb2.OperatorDesc], limits: Limits) -> str | None:
    """Why a compute request whose operators take ``steps`` (:meth:`SizedWork.work`) is refused, naming its
    costliest operator; None when it is within ``limits``."""
    advice = "check its sizes (or ask the server's operator for a larger --max-work)"
    said = f"this server's limit of {limits.max_work:,} (its --max-work)"
    return excess_work(steps, ops, limits.max_work, said, advice)


def _count(number: int) -> str:
    """``number`` for people; a count that reached the cap of :func:`topologies.size` says it is more."""
    from stratasim.network_layer.topologies.base import SIZE_CAP

    return f"over {SIZE_CAP - 1:,}" if number >= SIZE_CAP else f"{number:,}"


CLOSE_GRACE_S = 0.25
"""How long a new session waits for a place before it is refused or takes an idle session's."""


class SessionSlots:
    """The sessions open at once, at most ``limit``; thread-safe.

    A session idle (waiting for its client's next request) for longer than ``idle_timeout_s`` loses its place to a
    new client when every place is taken: abandoned or stuck clients cannot lock others out, while a live run whose
    engine computes for a long while between requests keeps its session as long as nobody needs the place.
    """

    def __init__(self, limit: int, idle_timeout_s: float) -> None:
        self._limit = limit
        self._idle_timeout_s = idle_timeout_s
        self._open: set[Ticket] = set()
        self._lock = threading.Condition()

    def take(self, cancel: Callable[[], object]) -> Ticket | None:
        """A place for a new session (``cancel`` ends it if it is evicted): a free one, waiting up to
        :data:`CLOSE_GRACE_S` for one (a client that has just closed its session frees its place a moment later,
        when its server thread sees the stream end), else the place of the session idle longest beyond the
        timeout; None when every session is busy or idle for less than the timeout."""
        victim = None
        with self._lock:
            self._lock.wait_for(lambda: len(self._open) < self._limit, timeout=CLOSE_GRACE_S)
            if len(self._open) >= self._limit:
                now = time.monotonic()
                stale = [
                    t for t in self._open if t.idle_since is not None and now - t.idle_since > self._idle_timeout_s
                ]
                if not stale:
                    return None
                victim = min(stale, key=lambda t: t.idle_since or now)
                self._open.discard(victim)
            ticket = Ticket(cancel)
            self._open.add(ticket)
        if victim is not None:
            victim.cancel()
        return ticket

    def give_back(self, ticket: Ticket) -> None:
        """Free the place ``ticket`` holds (nothing if it was evicted)."""
        with self._lock:
            self._open.discard(ticket)
            self._lock.notify()

    @property
    def limit(self) -> int:
        """The most sessions open at once."""
        return self._limit


class Ticket:
    """One session's place: since when it waits for its client (None while the server works for it)."""

    def __init__(self, cancel: Callable[[], object]) -> None:
        self.idle_since: float | None = time.monotonic()
        self._cancel = cancel

    def cancel(self) -> None:
        """End the session (its place is already given to another)."""
        self._cancel()
