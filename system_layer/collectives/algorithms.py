"""Collective algorithms as per-phase plans: which peers each step sends to, how much, and what it waits for.

A phase runs along lines of ``n`` NPUs (see :mod:`stratasim.system_layer.collectives.groups`); an NPU's peers are given as offsets
along its line (peer position = (own position + offset) mod n). A step sends ``bytes`` to each peer, tagged
``tag``, then completes once ``need`` messages tagged ``wait`` have arrived (``need`` may be 0). Lock-step
algorithms (ring, direct) send and wait on the step's own index and share one plan across positions; others
(trees, halving-doubling) give each position its own steps.

Sizes follow NCCL's benchmarks: ``data_bytes`` (S) is the whole buffer on each NPU (the output of an
all-gather, the input of a reduce-scatter), and a message of a ring or direct step carries S/n. A step whose
received data is reduced into the local buffer is marked ``reduces``; the system layer charges it the local
reduction time. The costs below are on the analytical network, alpha being the latency between the two peers
of a message and ser(x) the serialisation of x bytes:

- ``ring``: all-reduce is n-1 reducing steps then n-1 gathering steps, each sending S/n to the next NPU,
  2(n-1)(alpha + ser(S/n)); reduce-scatter and all-gather are one half each, (n-1)(alpha + ser(S/n));
  all-to-all relays the shares still travelling, step k = 1..n-1 forwarding (n-k) S/n.
- ``direct``: every NPU sends its share to all others at once. All-reduce is a reduce-scatter round then an
  all-gather round, 2(alpha + ser(S/n)); the other collectives are one round, alpha + ser(S/n).
- ``ring_bidirectional``: two rings in opposite directions (offsets +1 and -1), each carrying half the
  buffer with the ring's schedule; the two advance step by step together (on a symmetric line they would
  anyway). All-reduce takes 2(n-1)(alpha + ser(S/(2n))), reduce-scatter and all-gather (n-1)(alpha +
  ser(S/(2n))), all-to-all the ring's relay with half the bytes each way.
- ``halving_doubling`` (Rabenseifner): a reduce-scatter by recursive halving, log2 n steps where step k
  (k = 1..log2 n) exchanges S/2^k with the partner at distance d = n/2^k (partner = position XOR d), then an
  all-gather by recursive doubling, the same exchanges in reverse order. All-reduce takes the sum over k of
  2(alpha_k + ser(S/2^k)); reduce-scatter and all-gather one half each. Lines must hold a power of two NPUs;
  there is no all-to-all.
- ``direct:N`` (ASTRA-sim's ``directN``): direct with at most N messages in flight per NPU. An NPU sends to
  its peers in order (+1, +2, ...), N at once, and each message it receives lets it send the next, so a
  round takes about ceil((n-1)/N) times a direct round. N of n-1 or more is plain direct.
- ``one_ring``, ``one_direct`` (and ``one_direct:N``), ``one_halving_doubling`` (ASTRA-sim's ``oneRing``...):
  the algorithm run once over all the group's NPUs, flattened into one line in NPU order, instead of once per
  dimension (the layout of :mod:`stratasim.system_layer.scheduler.chunks` gives them one flat phase); the
  network routes each message, so a ring neighbour across a dimension's edge costs what that route costs.
- ``double_binary_tree`` (NCCL's, all-reduce only, not pipelined): two binary trees over the line, the second
  the first shifted by one position, so that every leaf of one is an inner node of the other. Each tree
  reduces half the buffer up to its root and then broadcasts it back down, a whole half-buffer per message.
  An NPU interleaves its steps in the two trees in the order they would happen were every edge equally
  fast. When every edge costs e = alpha + ser(S/2) (a fully connected or switch line) the time is 2 h e, h =
  ceil(log2 n) being the trees' height: an NPU's messages to (or from) its two children do not slow each
  other on the analytical network. On a ring line it is twice the costliest root-to-leaf path, whose edges
  cost hops x alpha + ser(S/2).

Extension point: register an :class:`_Algorithm` (a planner ``(collective, n, data_bytes, position) ->
steps`` and what it supports) in ``_PLANNERS`` under its study name, and list the name in
``stratasim.system_layer.options.ALGORITHMS``. Planners must be deterministic and are cached: position-independent
ones once per (collective, n, data_bytes), others once per position.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial

from stratasim.kernel.errors import WorkloadError
from stratasim.system_layer.collectives.rooted import ROOTED, direct_rooted, ring_rooted
from stratasim.system_layer.collectives.steps import Step, lockstep, share_bytes

__all__ = [
    "Step",
    "PhasePlan",
    "plan_phase",
    "lockstep",
    "COLLECTIVES",
    "ROOTED",
    "FLATTENED",
    "split_name",
    "base_name",
]

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", *ROOTED)

FLATTENED = {"one_ring": "ring", "one_direct": "direct", "one_halving_doubling": "halving_doubling"}
"""The algorithms run once over the whole group flattened into one line, by the per-dimension one they run."""

_WINDOW = re.compile(r"(direct|one_direct):(-?[0-9]+)")


def split_name(algorithm: str) -> tuple[str, int | None]:
    """``direct:4`` → (``direct``, 4): an algorithm's registered name and its window (None when it has none)."""
    windowed = _WINDOW.fullmatch(algorithm)
    return (windowed[1], int(windowed[2])) if windowed else (algorithm, None)


def base_name(algorithm: str) -> str:
    """The per-dimension algorithm ``algorithm`` runs: ``one_direct:4`` → ``direct``."""
    name = split_name(algorithm)[0]
    return FLATTENED.get(name, name)


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
    at_switch: bool = False
    """Whether some of its steps reduce at a switch (``Step.at_switch``): such a phase runs step by step, never
    batched with its line or replayed."""

    def steps_for(self, position: int) -> tuple[Step, ...]:
        """The steps of the NPU at ``position`` of its line (for broadcast and reduce: counted from the root)."""
        return self._planner(self.collective, self.size, self.data_bytes, position)

    @property
    def base(self) -> str:
        """The per-dimension algorithm this phase runs, without window or flattening (``direct`` for ``one_direct:4``)."""
        return base_name(self.algorithm)

    @property
    def rooted(self) -> bool:
        """Whether positions count from a root (broadcast, reduce) rather than from the line's start."""
        return self.collective in ROOTED


@lru_cache(maxsize=4096)
def _ring(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    share = share_bytes(data_bytes, n)
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
    share = share_bytes(data_bytes, n)
    everyone = tuple(range(1, n))
    if collective == "all_reduce":
        return lockstep([Step(everyone, share, n - 1, reduces=True), Step(everyone, share, n - 1)])
    return lockstep([Step(everyone, share, n - 1, reduces=collective == "reduce_scatter")])


@lru_cache(maxsize=4096)
def _windowed_direct(window: int, collective: str, n: int, data_bytes: int) -> tuple[Step, ...]:
    share = share_bytes(data_bytes, n)
    rounds = [True, False] if collective == "all_reduce" else [collective == "reduce_scatter"]
    steps: list[Step] = []
    for tag, reduces in enumerate(rounds):
        # Step k sends to peer +k; from the window's last on, each waits for one message (from any peer of the
        # round: one tag) before the next goes out, and the round ends waiting for the window's last messages.
        for k in range(1, n):
            need = 1 if k >= window else 0
            steps.append(Step((k,), share, need, tag=tag, wait=tag, reduces=reduces and need > 0))
        if window > 1:
            steps.append(Step((), share, window - 1, tag=tag, wait=tag, reduces=reduces))
    return tuple(steps)


def _windowed(window: int, collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    if window >= n - 1:  # every peer fits in the window: plain direct
        return _direct(collective, n, data_bytes, 0)
    return _windowed_direct(window, collective, n, data_bytes)


@lru_cache(maxsize=4096)
def _ring_bidirectional(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    # The ring's schedule for half the buffer (its shares are ceil(S/2n)), sent both ways round.
    half = _ring(collective, n, -(-data_bytes // 2), 0)
    return tuple(Step((1, -1), s.bytes, 2 * s.need, s.tag, s.wait, s.reduces) for s in half)


@lru_cache(maxsize=16384)
def _halving_doubling(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    # Step k of the halving exchanges S/2^k with the partner at distance n/2^k; the doubling retraces them.
    levels = range(1, n.bit_length())
    halving = [(((position ^ (n >> k)) - position,), share_bytes(data_bytes, 1 << k)) for k in levels]
    steps: list[Step] = []
    if collective in ("all_reduce", "reduce_scatter"):
        steps += [Step(offsets, size, 1, reduces=True) for offsets, size in halving]
    if collective in ("all_reduce", "all_gather"):
        steps += [Step(offsets, size, 1) for offsets, size in reversed(halving)]
    return lockstep(steps)


@dataclass(frozen=True)
class _Tree:
    """A tree over positions 0..n-1: each position's parent (-1 at the root), children, height and depth."""

    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    height: tuple[int, ...]
    depth: tuple[int, ...]


@lru_cache(maxsize=64)
def _binary_tree(n: int) -> _Tree:
    """NCCL's binary tree rooted at 0, leaves at the odd positions (``ncclGetBtree``).

    A position p > 0 whose lowest set bit is b hangs below (p XOR b) | 2b, or below p XOR b when that is
    beyond the line; the root's one child is the largest power of two below n.
    """
    parent = [-1] * n
    for p in range(1, n):
        low = p & -p
        up = (p ^ low) | (low << 1)
        parent[p] = up if up < n else p ^ low
    children: list[list[int]] = [[] for _ in range(n)]
    for p in range(1, n):
        children[parent[p]].append(p)
    depth = [0] * n
    for p in range(1, n):  # lowest set bits rise towards the root, so these walks are at most log2 n long
        q = p
        while q:
            q = parent[q]
            depth[p] += 1
    height = [0] * n
    for p in sorted(range(n), key=lambda q: -depth[q]):
        if p:
            height[parent[p]] = max(height[parent[p]], height[p] + 1)
    return _Tree(tuple(parent), tuple(tuple(c) for c in children), tuple(height), tuple(depth))


@lru_cache(maxsize=16384)
def _double_binary_tree(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
    tree = _binary_tree(n)
    half = share_bytes(data_bytes, 2)
    # Order the steps of both trees by when they would happen were every edge one time unit (receives before
    # sends at the same time). Every message is then awaited at least one unit after it is sent, which rules
    # out a cycle of NPUs waiting on each other.
    timed: list[tuple[int, int, Step]] = []
    for index, role in enumerate((position, (position - 1) % n)):  # tree 1 is tree 0 shifted by one position
        up, down = 2 * index, 2 * index + 1
        children = tuple(child - role for child in tree.children[role])
        reduced = tree.height[role]
        broadcast = tree.height[0] + tree.depth[role]
        if children:
            timed.append((reduced, 0, Step((), half, len(children), wait=up, reduces=True)))
            timed.append((broadcast, 1, Step(children, half, 0, tag=down)))
        if tree.parent[role] >= 0:
            timed.append((reduced, 1, Step((tree.parent[role] - role,), half, 0, tag=up)))
            timed.append((broadcast, 0, Step((), half, 1, wait=down)))
    return tuple(step for *_, step in sorted(timed, key=lambda item: item[:2]))


def _position_independent(planner: Planner) -> Planner:
    """Lock-step planners give every position the same steps: cache them once, not once per position."""

    def plan(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
        return planner(collective, n, data_bytes, 0)

    return plan


@dataclass(frozen=True)
class _Algorithm:
    """A registered algorithm: its planner, the collectives it runs and whether lines must be powers of two.

    ``rooted`` plans broadcast and reduce, by position counted from the root; None if it cannot.
    """

    planner: Planner
    collectives: tuple[str, ...] = COLLECTIVES[:4]
    power_of_two: bool = False
    rooted: Planner | None = None


_PLANNERS: dict[str, _Algorithm] = {
    "ring": _Algorithm(_position_independent(_ring), COLLECTIVES, rooted=ring_rooted),
    "direct": _Algorithm(_position_independent(_direct), COLLECTIVES, rooted=direct_rooted),
    "ring_bidirectional": _Algorithm(_position_independent(_ring_bidirectional)),
    "halving_doubling": _Algorithm(_halving_doubling, COLLECTIVES[:3], power_of_two=True),
    "double_binary_tree": _Algorithm(_double_binary_tree, ("all_reduce",)),
}
_PLANNERS.update({flat: _PLANNERS[base] for flat, base in FLATTENED.items()})


def plan_phase(collective: str, algorithm: str, dim: int, size: int, data_bytes: int) -> PhasePlan:
    """The plan of ``collective`` run with ``algorithm`` along ``dim`` (``size`` NPUs per line).

    Raises :class:`WorkloadError` when the algorithm does not exist, does not run this collective, or cannot
    run on lines of ``size`` NPUs.
    """
    if collective not in COLLECTIVES:
        raise WorkloadError(f"collective {collective!r} is not supported; expected one of {', '.join(COLLECTIVES)}")
    name, window = split_name(algorithm)
    entry = _PLANNERS.get(name)
    if entry is None:
        raise WorkloadError(f"algorithm {algorithm!r} is not supported; expected one of {', '.join(_PLANNERS)}")
    supported = entry.collectives if window is None else COLLECTIVES[:4]
    if collective not in supported:
        raise WorkloadError(f"{algorithm} supports {', '.join(supported)} only, not {collective}")
    if window is not None and window < 1:
        raise WorkloadError(f"{algorithm}: the window must be at least 1 message in flight, not {window}")
    if entry.power_of_two and size & (size - 1):
        where = f"dimension {dim}" if dim >= 0 else "a flat group"
        raise WorkloadError(
            f"{algorithm} needs a power of two NPUs per line to run {collective}, but {where} has lines of {size} NPUs"
        )
    planner = entry.rooted if collective in ROOTED else entry.planner
    if window is not None:
        planner = partial(_windowed, window)
    assert planner is not None  # entry.collectives lists ROOTED only for algorithms with a rooted planner
    return PhasePlan(dim, size, algorithm, collective, data_bytes, planner)
