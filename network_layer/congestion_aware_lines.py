"""The congestion-aware network's lock-step lines: a phase's crossings decided step by step as arrays.

A lock-step phase (see :mod:`stratasim.system_layer.engine.line_batches`) sends, at each step, one message from
each NPU of a line to a peer, and the whole line's timeline follows from each step's arrivals. When every message of
a step crosses one link of its own — a ring's neighbour, a fully connected dimension's direct link — the network
can decide that step's crossings for every NPU at once, with numpy, instead of one Python event per crossing: a
link only its sender ever feeds in one hop is crossed in the order its sender sends, so deciding the phase step after
step, ahead of simulated time, decides each link in the order the event loop would.

That holds while no other message's route crosses such a link later on (a multi-hop route through it, from another
sender) with its head there no later than the phase's last crossing of it. Each link a line crossed remembers when
(its claim); the event loop checks every crossing it decides against the claim of its link, and a line checks its
links' earlier claims, and on a clash raises :class:`~stratasim.kernel.contracts.LineConflict`: the engine then runs the simulation again
message by message (:meth:`LineSession.arrivals` says which runs may line up at all).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stratasim.kernel.contracts import LineConflict
from stratasim.kernel.link_changes import LinkKey
from stratasim.network_layer.congestion_aware_routes import Hop

__all__ = ["LineRoute", "LineSession", "Claims"]

_SAFE_PS = 1 << 62
"""Times and costs a line decides with int64 arrays stay below this, so no sum of two overflows; beyond it the
line is left to the event loop, whose horizon check names the time."""

Claims = dict[LinkKey, int]
"""link -> the latest time a lock-step line's message was sent over it (its head there)."""

LineRoute = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""The links of one step's messages as arrays, message by message: (slot of the link in the session, hold, size,
onward, whether the tail is the head, the latest earlier claim on the link)."""


class LineSession:
    """The crossings of lock-step lines, decided step after step on arrays of their links' states, written back
    to the links (``close``) when the lines are done.

    ``route`` finds the route of a (source, destination, size); ``claims`` are the network's, updated at close;
    ``lookahead`` the least delay of any message (no arrival comes earlier)."""

    def __init__(self, route: Callable[[tuple[int, int, int]], tuple[Hop, ...]], claims: Claims, lookahead: int):
        self._route = route
        self._claims = claims
        self._lookahead = lookahead
        self._slots: dict[int, int] = {}  # id of a link's state -> its slot
        self._hops: list[Hop] = []  # a hop of each slot (its state and link)
        # Per slot: free at, and what the session added to busy ps, bytes, messages, queue ps; the latest send
        self._state = np.zeros((6, 0), dtype=np.int64)

    def route(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> LineRoute | None:
        """The links one step's messages cross, or None unless each message crosses exactly one link, no two the
        same."""
        hops = []
        for key in zip(src.tolist(), dst.tolist(), sizes.tolist()):
            route = self._route(key)
            if len(route) != 1:  # told at the first such message (a switch's all-to-all has a million)
                return None
            hops.append(route[0])
        slots = np.fromiter(map(self._slot, hops), dtype=np.int64, count=len(hops))
        if len(np.unique(slots)) != len(slots):
            return None
        raw = [hop[1:5] for hop in hops]
        if max(max(row) for row in raw) >= _SAFE_PS:  # near int64's end: the event loop says where time ran out
            return None
        self._grow()
        costs = np.array(raw, dtype=np.int64).reshape(len(hops), 4).T
        prior = np.array([self._claims.get(hop[5], -1) for hop in hops], dtype=np.int64)
        return slots, costs[0], costs[1], costs[2], costs[3].astype(bool), prior

    def arrivals(self, route: LineRoute, sent: np.ndarray) -> np.ndarray:
        """Decide the crossings of one step's messages along ``route``, sent at ``sent``; their arrival times. A
        :class:`~stratasim.kernel.contracts.LineConflict` if an earlier line crossed a link later than it is sent over
        now."""
        slots, hold, size, onward, store, prior = route
        if len(slots) and bool((sent < prior).any()):  # never, if each link is fed by its sender alone in order
            raise LineConflict("a lock-step line sends over a link before an earlier line's last crossing")
        state = self._state
        start = np.maximum(sent, state[0, slots])
        if len(slots) and int(start.max()) >= _SAFE_PS - int(hold.max()) - int(onward.max()) - self._lookahead:
            raise LineConflict("a lock-step line nears the end of int64 picoseconds; the event loop decides it")
        end = start + hold
        state[0, slots] = end
        state[1, slots] += hold
        state[2, slots] += size
        state[3, slots] += 1
        state[4, slots] += start - sent
        state[5, slots] = sent
        head = start + onward
        tail = np.where(store, head, end + onward)
        return np.maximum(tail, sent + self._lookahead)

    def close(self) -> None:
        """Write what the lines did back to their links' states, and their claims to the network's."""
        for hop, (free, busy, size, messages, queue, latest) in zip(self._hops, self._state.T.tolist()):
            state = hop[0]
            state[0] = free
            state[1] += busy
            state[2] += size
            state[3] += messages
            state[4] += queue
            if messages:
                self._claims[hop[5]] = latest

    def _slot(self, hop: Hop) -> int:
        """The slot of ``hop``'s link, made on first use."""
        key = id(hop[0])
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = len(self._hops)
            self._hops.append(hop)
        return slot

    def _grow(self) -> None:
        """Give the links new to the session their columns: free at as their state says, nothing added yet."""
        known = self._state.shape[1]
        if known == len(self._hops):
            return
        added = np.zeros((6, len(self._hops) - known), dtype=np.int64)
        added[0] = [hop[0][0] for hop in self._hops[known:]]
        self._state = np.concatenate([self._state, added], axis=1)
