"""Every NPU of a phase's line at once: a lock-step phase on a stateless network as arrays, not messages.

On a network whose delays do not depend on traffic, a lock-step phase (ring, direct, bidirectional ring,
halving-doubling: step k of every NPU sends its messages tagged k and waits for the ones its peers sent at
their step k) has a closed-form timeline. With ``c[p][k]`` the time the NPU at position ``p`` of a line of
``n`` completes step ``k`` (``c[p][-1]`` its start),

    c[q][k] = max(c[q][k-1], max over messages p -> q of step k of (c[p][k-1] + transit + endpoint delay))
              + the step's reduction time when it reduces,

which numpy evaluates for every NPU of every line that became ready at the same instant, step by step,
instead of one Python event per message. The engine then only schedules each NPU's end of the phase.

On a network with contended links that can decide a step's crossings for whole lines
(:class:`~stratasim.kernel.contracts.LineNetwork`: the congestion-aware network, when each message crosses one link
only its sender feeds), the transit of step k is what the network decides for messages sent at ``c[p][k-1]``; a
line it cannot decide so runs message by message, and a run whose lines a later message contradicts starts over.

The result is the message-by-message one to the picosecond only where nothing else can interleave, so
:func:`batchable` allows it for a whole simulation only when each NPU does one thing at a time: every graph is
a chain (at most one node in progress) of compute, memory, metadata and collective nodes (no point-to-point
messages, nor any kind it does not know), every collective on one communicator group and cut into one chunk.
Then each NPU's phase is all that happens on it until the phase ends, and no member of a line can finish a
phase before the last member has started it (every member's end depends on every member's start: checked once
per plan, so the members waiting for the last one lose nothing by waiting); and equal-time events of different
NPUs touch nothing whose order shows (collectives are numbered per group in issue order, which a single group
fixes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

import numpy as np

from stratasim.kernel.contracts import LineConflict
from stratasim.system_layer.options import SystemOptions
from stratasim.v1 import workload_pb2

if TYPE_CHECKING:
    from stratasim.kernel.contracts import DirectNetwork, LineLinks, LineNetwork
    from stratasim.system_layer.collectives.algorithms import PhasePlan
    from stratasim.system_layer.collectives.steps import Step
    from stratasim.system_layer.engine.coordinator import Coordinator
    from stratasim.system_layer.engine.graph_plan import GraphPlan
    from stratasim.system_layer.scheduler.chunks import ChunkRun
    from stratasim.system_layer.scheduler.reduction import ReductionCost

__all__ = ["LineBatches", "batchable"]

_MAX_POSITION_DEPENDENT = 4096  # a plan whose steps differ by position is checked with an n x n matrix
# The node kinds whose effect on an NPU is known to stay on it (anything else, point-to-point messages included,
# forbids batching)
_LOCAL = frozenset(
    {
        workload_pb2.COMP_NODE,
        workload_pb2.METADATA_NODE,
        workload_pb2.MEM_LOAD_NODE,
        workload_pb2.MEM_STORE_NODE,
        workload_pb2.COMM_COLL_NODE,
    }
)


def batchable(plans: Iterable[GraphPlan], options: SystemOptions) -> bool:
    """Whether every NPU running one of ``plans`` does one thing at a time (see the module's docstring)."""
    if options.splits != 1:
        return False
    groups: set[tuple[int, ...]] = set()
    for plan in plans:
        if sum(1 for count in plan.indegree if count == 0) > 1 or any(len(d) > 1 for d in plan.dependents):
            return False
        for node in plan.nodes:
            if node.type not in _LOCAL:
                return False
            if node.type == workload_pb2.COMM_COLL_NODE:
                groups.add(tuple(sorted(node.group)))
                if len(groups) > 1:
                    return False
    return True


@dataclass(frozen=True)
class _Exchange:
    """The messages of one step along a line, ordered by receiver: each position receives ``fan_in`` of them,
    from ``senders`` (``fan_in`` per receiver, receiver by receiver), of ``sizes`` bytes."""

    senders: np.ndarray
    sizes: np.ndarray
    fan_in: int


@dataclass(frozen=True)
class _Schedule:
    """A lock-step plan laid on a line of ``n`` in one direction: per step, its exchange (an index into
    ``exchanges``, shared by steps sending alike) and each position's reduction time; the steps of each position
    (for counting reductions) and the bytes each position sends."""

    n: int
    exchange_of_step: tuple[int, ...]
    exchanges: tuple[_Exchange, ...]
    reduction_ps: tuple[int | np.ndarray, ...]
    steps: tuple[tuple[Step, ...], ...]
    sent: tuple[int, ...]


class LineBatches:
    """Collects the members of each line as they start a phase; once a line is complete, evaluates it (with every
    other line completed at the same instant) and schedules each member's end of the phase.

    On a network that prices messages on the spot (``network``, a :class:`DirectNetwork`) each exchange's transits
    are priced once; on one with contended links (a :class:`LineNetwork`) the network decides each step's crossings
    for the whole line, and a line whose messages it cannot decide so runs message by message."""

    def __init__(
        self, coordinator: Coordinator, network: DirectNetwork | LineNetwork, reduction: ReductionCost, *, links: bool
    ) -> None:
        self._coordinator = coordinator
        self._network = cast("DirectNetwork", network)
        self._lines = cast("LineNetwork", network) if links else None
        self._routable: dict[tuple[int, tuple[int, ...], int], tuple[PhasePlan, bool]] = {}  # see _decidable
        self._reduction = reduction
        self._schedules: dict[tuple[int, int, int], tuple[PhasePlan, _Schedule | None]] = {}
        # Lines some members have joined: the members by position, and how many are still to come
        self._joining: dict[tuple[int, int, int, int], tuple[list[ChunkRun | None], list[int]]] = {}
        self._ready: dict[int, tuple[_Schedule, list[tuple[tuple[int, ...], list[ChunkRun]]]]] = {}

    def join(self, run: ChunkRun, plan: PhasePlan, line: tuple[int, ...], position: int, direction: int) -> bool:
        """Take ``run``'s current phase (at ``position`` of ``line``) into a batch; False when its plan is not
        lock-step, so the run sends its messages itself."""
        if plan.rooted:
            return False
        if self._lines is not None and not self._decidable(plan, line, direction):
            return False
        schedule = self._schedule(plan, len(line), direction)
        if schedule is None:
            return False
        key = (run.collective.id, run.index, run.phase, line[0])
        joining = self._joining.get(key)
        if joining is None:
            joining = self._joining[key] = ([None] * len(line), [len(line)])
        members, missing = joining
        members[position] = run
        missing[0] -= 1
        if missing[0]:
            return True
        del self._joining[key]
        ready = self._ready.get(id(schedule))
        if not self._ready:
            self._coordinator.schedule(self._coordinator.now, self._evaluate)
        if ready is None:
            ready = self._ready[id(schedule)] = (schedule, [])
        ready[1].append((line, cast("list[ChunkRun]", members)))  # complete: no None left
        return True

    def _schedule(self, plan: PhasePlan, n: int, direction: int) -> _Schedule | None:
        key = (id(plan), n, direction)
        known = self._schedules.get(key)
        if known is None or known[0] is not plan:
            known = self._schedules[key] = (plan, _lay_out(plan, n, direction, self._reduction))
        return known[1]

    def _decidable(self, plan: PhasePlan, line: tuple[int, ...], direction: int) -> bool:
        """Whether the network can decide the crossings of ``plan`` on ``line`` step by step (asked once per plan
        and line): its first message is tried alone first, so a phase whose messages go through a switch is told
        before being laid out."""
        key = (id(plan), line, direction)
        known = self._routable.get(key)
        if known is not None and known[0] is plan:
            return known[1]
        assert self._lines is not None
        session = self._lines.line_session()
        first = next((step for step in plan.steps_for(0) if step.offsets), None)
        decidable = session is not None
        if session is not None and first is not None:
            peer = line[(direction * first.offsets[0]) % len(line)]
            decidable = session.route(*(np.array([value]) for value in (line[0], peer, first.bytes))) is not None
        schedule = self._schedule(plan, len(line), direction) if decidable else None
        if session is not None and schedule is not None:
            npus = np.array([line], dtype=np.int64)
            receivers = np.arange(schedule.n)
            decidable = all(
                session.route(*_ends(npus, exchange, receivers)) is not None for exchange in schedule.exchanges
            )
        self._routable[key] = (plan, decidable)
        return decidable

    def _evaluate(self, _: object = None) -> None:
        """Work out every line completed at this instant and schedule its members' ends of phase."""
        ready, self._ready = self._ready, {}
        for schedule, lines in ready.values():
            self._run(schedule, lines)

    def _run(self, schedule: _Schedule, lines: list[tuple[tuple[int, ...], list[ChunkRun]]]) -> None:
        coordinator = self._coordinator
        npus = np.array([line for line, _ in lines], dtype=np.int64)
        done = np.array([[run.started_ps for run in runs] for _, runs in lines], dtype=np.int64)
        transits: dict[int, np.ndarray] = {}
        messages = 0
        receivers = np.arange(schedule.n)
        session = None if self._lines is None else self._lines.line_session()
        if self._lines is not None and session is None:  # what forbids lines is set at configure: never, once joined
            raise LineConflict("the network no longer decides lines")
        routes: dict[int, object] = {}
        for exchange_index, reduction in zip(schedule.exchange_of_step, schedule.reduction_ps):
            exchange = schedule.exchanges[exchange_index]
            if session is not None:
                arrivals = self._decide(session, routes, exchange_index, exchange, npus, done)
            else:
                transit = transits.get(exchange_index)
                if transit is None:
                    transit = transits[exchange_index] = self._transits(npus, exchange, receivers)
                arrivals = done[:, exchange.senders] + transit
            messages += arrivals.size
            if exchange.fan_in:
                latest = arrivals.reshape(len(lines), schedule.n, exchange.fan_in).max(axis=2)
                done = np.maximum(done, latest)
            if isinstance(reduction, np.ndarray) or reduction:
                done = done + reduction
        if session is not None:
            session.close()
        coordinator.messages += messages
        steps = len(schedule.exchange_of_step)
        for (_, runs), ends in zip(lines, done.tolist()):
            for position, (run, end) in enumerate(zip(runs, ends)):
                run.sent = schedule.sent[position]
                run.step = steps
                run.key = -1
                run.scheduler.replayed_reductions(schedule.steps[position])
                coordinator.schedule(end, run.batched_done)

    def _transits(self, npus: np.ndarray, exchange: _Exchange, receivers: np.ndarray) -> np.ndarray:
        """Each message's transit plus the receiver's endpoint delay, per line: shape (lines, messages)."""
        transit = self._network.transits_ps(*_ends(npus, exchange, receivers))
        return transit.reshape(len(npus), -1) + self._coordinator.endpoint_delay_ps

    def _decide(
        self,
        session: LineLinks,
        routes: dict[int, object],
        exchange_index: int,
        exchange: _Exchange,
        npus: np.ndarray,
        done: np.ndarray,
    ) -> np.ndarray:
        """Each message's arrival plus the receiver's endpoint delay, per line, its crossings decided by the
        network as sent when its sender completed its step before (``done``)."""
        route = routes.get(exchange_index)
        if route is None:
            route = session.route(*_ends(npus, exchange, np.arange(done.shape[1])))
            if route is None:  # lines decidable one by one that share a link (not on dimensions)
                raise LineConflict("lines completed at one instant cross a link in common")
            routes[exchange_index] = route
        sent = done[:, exchange.senders]
        arrivals = session.arrivals(route, sent.ravel()).reshape(sent.shape)
        return arrivals + self._coordinator.endpoint_delay_ps


def _ends(npus: np.ndarray, exchange: _Exchange, receivers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sources, destinations and sizes of an exchange's messages on each line of ``npus``, flat."""
    src = npus[:, exchange.senders]
    dst = npus[:, np.repeat(receivers, exchange.fan_in)]
    sizes = np.broadcast_to(exchange.sizes, src.shape)
    return src.ravel(), dst.ravel(), np.ascontiguousarray(sizes).ravel()


def _lay_out(plan: PhasePlan, n: int, direction: int, reduction: ReductionCost) -> _Schedule | None:
    """``plan`` on a line of ``n`` as a :class:`_Schedule`, or None when it is not lock-step with every member's
    end depending on every member's start."""
    first = plan.steps_for(0)
    per_position = [first] + [plan.steps_for(p) for p in range(1, n)]
    shared = all(steps is first or steps == first for steps in per_position)
    if not first or (not shared and any(len(steps) != len(first) for steps in per_position)):
        return None
    if not shared and n > _MAX_POSITION_DEPENDENT:
        return None
    known: dict[object, int] = {}
    exchanges: list[_Exchange] = []
    exchange_of_step: list[int] = []
    reductions: list[int | np.ndarray] = []
    for k in range(len(first)):
        if shared:  # one exchange per distinct step, however many steps share it (a ring's 2(n-1))
            step = first[k]
            if step.tag != k or step.wait != k:
                return None
            key: object = (step.offsets, step.bytes, step.need)
            if key not in known:
                exchange = _exchange([replace(step, tag=0, wait=0)] * n, 0, n, direction)
                if exchange is None:
                    return None
                known[key] = len(exchanges)
                exchanges.append(exchange)
            reductions.append((reduction(step.reduced_bytes) if step.reduces else 0) + step.delay_ps)
        else:
            column = [steps[k] for steps in per_position]
            exchange = _exchange(column, k, n, direction)
            if exchange is None:
                return None
            key = (exchange.senders.tobytes(), exchange.sizes.tobytes(), exchange.fan_in)
            if key not in known:
                known[key] = len(exchanges)
                exchanges.append(exchange)
            reduced = [(reduction(step.reduced_bytes) if step.reduces else 0) + step.delay_ps for step in column]
            reductions.append(np.array(reduced, dtype=np.int64) if any(reduced) else 0)
        exchange_of_step.append(known[key])
    if not _complete([exchanges[i] for i in exchange_of_step], n, shared):
        return None
    return _Schedule(
        n=n,
        exchange_of_step=tuple(exchange_of_step),
        exchanges=tuple(exchanges),
        reduction_ps=tuple(reductions),
        steps=tuple(per_position),
        sent=(_sent(first),) * n if shared else tuple(map(_sent, per_position)),
    )


def _sent(steps: tuple[Step, ...]) -> int:
    """The bytes ``steps`` send in all."""
    return sum(step.bytes * len(step.offsets) for step in steps)


def _exchange(column: list[Step], k: int, n: int, direction: int) -> _Exchange | None:
    """The messages of step ``k`` (``column[p]`` being position p's), or None unless every step sends and waits
    on tag ``k`` and each position waits for exactly the messages sent to it, as many for every position."""
    senders: list[list[int]] = [[] for _ in range(n)]
    sizes: list[list[int]] = [[] for _ in range(n)]
    for p, step in enumerate(column):
        if step.tag != k or step.wait != k:
            return None
        for offset in step.offsets:
            q = (p + direction * offset) % n
            senders[q].append(p)
            sizes[q].append(step.bytes)
    fan_in = len(senders[0])
    if any(len(heard) != fan_in or step.need != fan_in for heard, step in zip(senders, column)):
        return None
    return _Exchange(np.array(senders, dtype=np.int64).reshape(-1), np.array(sizes, dtype=np.int64).reshape(-1), fan_in)


def _complete(exchanges: list[_Exchange], n: int, shared: bool) -> bool:
    """Whether every position's last step depends on every position's start: followed from position 0 alone
    when every position has the same steps (the line is then the same seen from any position), else for all."""
    reach = np.zeros((1, n), dtype=bool) if shared else np.eye(n, dtype=bool)
    if shared:
        reach[0, 0] = True
    for exchange in exchanges:
        if exchange.fan_in:
            heard = reach[:, exchange.senders].reshape(len(reach), n, exchange.fan_in).any(axis=2)
            reach = reach | heard
            if reach.all():
                return True
    return False
