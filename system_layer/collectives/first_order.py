"""Closed-form times of collectives and point-to-point sends on the analytical network.

The engine times a collective by running each NPU's steps (:mod:`stratasim.system_layer.collectives.algorithms`)
and pricing every message on the network; on the analytical network (:mod:`stratasim.network_layer.analytical`)
a message crossing one dimension costs ``h alpha + ser(x)``, with ``h`` the hops (a ring's shortest distance, two
on a switch: up and down, one on a fully connected dimension) and ``ser(x) = ceil(x 1e12 / B)`` ps. This module
gives the same time without running anything, so an optimiser can price thousands of plans a second
(``docs/explanation/first-order-model.md``). With ``n`` NPUs on a line, ``S`` the buffer per NPU and
``share(S, n) = max(1, ceil(S / n))``:

- ``ring``: all-reduce ``2 (n - 1)`` steps, reduce-scatter and all-gather ``n - 1``, each moving ``share(S, n)`` to
  the next NPU of the line; the all-to-all relays ``(n - 1 - k) share(S, n)`` at step ``k``. Steps are lock-step,
  so on a ring whose line members are not all one hop apart the time is the costliest run of consecutive edges
  around the line (each NPU waits for its predecessor's message of the step);
- ``direct``: one round (two for an all-reduce) in which every NPU sends ``share(S, n)`` to every other and waits
  for the slowest;
- ``ring_bidirectional``: the ring's schedule on ``ceil(S / 2)`` both ways round;
- ``halving_doubling``: step ``k = 1..log2 n`` exchanges ``share(S, 2^k)`` with the partner ``n / 2^k`` away
  (reduce-scatter), the all-gather the same steps reversed;
- ``double_binary_tree`` (all-reduce only): ``2 h (edge)``, ``h = ceil(log2 n)``, with ``edge`` the costliest
  message of ``share(S, 2)`` between two line members.

A collective over a group spanning several dimensions runs one phase per dimension (innermost first) as
:func:`stratasim.system_layer.collectives.phases.phase_sequence` lays them out: an all-reduce a full all-reduce per
dimension (or, with ``local_bw_aware``, reduce-scatters up, an all-reduce on the outermost and all-gathers back
down), a reduce-scatter shrinking the buffer by each dimension done, an all-gather growing it, an all-to-all
exchanging the whole buffer in each; the time is the sum of the phases. A point-to-point send pays each dimension
its ends differ in, one after the other (store and forward).

Reductions are free by default; with the NPU's local memory bandwidth (``system.local_mem_bw``) each reducing step
also pays two reads and a write of what it reduces. Exact, to the picosecond, for one chunk (``splits: 1``):
``tests/system_layer/test_first_order_collectives.py`` checks that against the engine. With ``splits = c > 1`` the
chunks flow through the phases as a pipeline, each phase running one chunk at a time (``active_chunks: 1``): the
time :func:`collective_ps` gives then, the phases of one chunk plus ``c - 1`` times the slowest phase, is an
approximation (it ignores how the scheduler interleaves phases of different chunks, and ``active_chunks`` above
one). Not covered: flat groups (not a product of coordinate sets), rooted collectives, windowed direct
(``direct:N``), the flattened ``one_*`` algorithms, fabrics and links of their own speed, reductions priced on the
compute layer or in ASTRA-sim's whole nanoseconds, and the double binary tree's reductions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from stratasim.system_layer.collectives.algorithms import base_name
from stratasim.system_layer.collectives.steps import share_bytes

__all__ = [
    "Collective",
    "DimensionKind",
    "LineSpan",
    "collective_phases_ps",
    "collective_ps",
    "phase_ps",
    "send_ps",
    "serialisation_ps",
]

Collective = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]
DimensionKind = Literal["ring", "switch", "fully_connected"]
_PS_PER_S = 10**12


@dataclass(frozen=True)
class LineSpan:
    """A group's line along one topology dimension: ``size`` NPUs of a ``kind`` dimension with links of
    ``bandwidth`` bytes/s and ``latency_ps``.

    On a ring, ``ring_hops`` gives the hops from each line member to the next (the last to the first); None means
    one hop each (the line is the whole ring, or its members are neighbours). ``dim_size`` is the ring's size (for
    the distance of partners farther along the line).
    """

    kind: DimensionKind
    size: int
    bandwidth: Fraction | int
    latency_ps: int
    ring_hops: tuple[int, ...] | None = None
    dim_size: int = 0

    def message_ps(self, size: int, hops: int = 1) -> int:
        """One message of ``size`` bytes between members ``hops`` ring hops apart (on a ring)."""
        count = 2 if self.kind == "switch" else hops if self.kind == "ring" else 1
        return count * self.latency_ps + serialisation_ps(size, self.bandwidth)

    def edge_hops(self) -> tuple[int, ...]:
        """Ring hops from each line member to the next, around the line."""
        return self.ring_hops if self.ring_hops is not None else (1,) * self.size

    def offset_hops(self, offset: int) -> int:
        """The most ring hops between a member and the one ``offset`` positions on along the line."""
        if self.kind != "ring":
            return 1
        edges = self.edge_hops()
        n = len(edges)
        ring = self.dim_size or sum(edges)
        distances = (sum(edges[(i + k) % n] for k in range(offset % n)) for i in range(n))
        return max(min(d % ring, ring - d % ring) for d in distances)


def serialisation_ps(size: int, bandwidth: Fraction | int) -> int:
    """``ceil(size * 1e12 / bandwidth)`` ps, exactly, for ``bandwidth`` in bytes/s."""
    if isinstance(bandwidth, int):
        return -(-(size * _PS_PER_S) // bandwidth)
    rate = Fraction(bandwidth)
    return -(-(size * _PS_PER_S * rate.denominator) // rate.numerator)


def _lockstep_ring_ps(span: LineSpan, sizes: Sequence[int], delay_ps: int) -> int:
    """Steps sending ``sizes[k]`` to the next member, each waiting for the predecessor's message: the costliest
    run of ``len(sizes)`` consecutive edges ending at some member (every step alike when every edge is)."""
    edges = span.edge_hops() if span.kind == "ring" else (1,)
    if len(set(edges)) == 1:
        counts = Counter(sizes)
        return sum(count * (span.message_ps(size, edges[0]) + delay_ps) for size, count in counts.items())
    n = len(edges)
    worst = 0
    for end in range(n):
        total = sum(span.message_ps(size, edges[(end - len(sizes) + k) % n]) + delay_ps for k, size in enumerate(sizes))
        worst = max(worst, total)
    return worst


def _ring_sizes(collective: Collective, n: int, data_bytes: int) -> list[int]:
    share = share_bytes(data_bytes, n)
    if collective == "all_reduce":
        return [share] * (2 * (n - 1))
    if collective == "all_to_all":
        return [share * (n - 1 - s) for s in range(n - 1)]
    return [share] * (n - 1)


def _reduced_bytes(collective: Collective, name: str, n: int, data_bytes: int) -> list[int]:
    """The bytes each reducing step of a phase reduces (every NPU alike): what its messages carried in."""
    if collective not in ("all_reduce", "reduce_scatter"):
        return []
    if name == "ring":
        return [share_bytes(data_bytes, n)] * (n - 1)
    if name == "ring_bidirectional":
        return [2 * share_bytes(-(-data_bytes // 2), n)] * (n - 1)
    if name == "direct":
        return [share_bytes(data_bytes, n) * (n - 1)]
    if name == "halving_doubling":
        return [share_bytes(data_bytes, 1 << k) for k in range(1, n.bit_length())]
    raise ValueError(f"no closed form for algorithm {name!r} with reductions that cost (system.local_mem_bw)")


@lru_cache(maxsize=65536)
def phase_ps(
    collective: Collective,
    algorithm: str,
    span: LineSpan,
    data_bytes: int,
    delay_ps: int = 0,
    reduce_bandwidth: int = 0,
) -> int:
    """One phase of ``collective`` on a buffer of ``data_bytes`` per NPU along ``span`` with ``algorithm`` (a
    per-dimension algorithm's name; ``delay_ps`` the endpoint delay paid per step). With ``reduce_bandwidth``
    (bytes/s, the NPU's local memory), each reducing step also takes ``ceil(3 r 1e12 / bandwidth)`` for the ``r``
    bytes it reduces (two reads and a write), after its messages arrive."""
    n, name = span.size, base_name(algorithm)
    if name != algorithm:  # direct:N, one_ring...: windows and flattened groups have no closed form here
        raise ValueError(f"no closed form for algorithm {algorithm!r}")
    if n < 2:
        return 0
    reducing = 0
    if reduce_bandwidth:
        reduced = _reduced_bytes(collective, name, n, data_bytes)
        reducing = sum(serialisation_ps(3 * size, reduce_bandwidth) for size in reduced)
    return reducing + _network_phase_ps(collective, name, span, data_bytes, delay_ps)


def _network_phase_ps(collective: Collective, name: str, span: LineSpan, data_bytes: int, delay_ps: int) -> int:
    """A phase's messages and endpoint delays (``name`` a per-dimension algorithm, ``span`` two NPUs or more)."""
    n = span.size
    if name == "ring":
        return _lockstep_ring_ps(span, _ring_sizes(collective, n, data_bytes), delay_ps)
    if name == "ring_bidirectional":
        half = -(-data_bytes // 2)
        forward = _lockstep_ring_ps(span, _ring_sizes(collective, n, half), delay_ps)
        mirrored = LineSpan(span.kind, n, span.bandwidth, span.latency_ps, _reversed(span), span.dim_size)
        return max(forward, _lockstep_ring_ps(mirrored, _ring_sizes(collective, n, half), delay_ps))
    if name == "direct":
        rounds = 2 if collective == "all_reduce" else 1
        farthest = max(span.offset_hops(k) for k in range(1, n))
        return rounds * (span.message_ps(share_bytes(data_bytes, n), farthest) + delay_ps)
    if name == "halving_doubling":
        levels = range(1, n.bit_length())
        steps = [span.message_ps(share_bytes(data_bytes, 1 << k), span.offset_hops(n >> k)) + delay_ps for k in levels]
        return sum(steps) * (2 if collective == "all_reduce" else 1)
    if name == "double_binary_tree":
        height = (n - 1).bit_length()
        farthest = max(span.offset_hops(k) for k in range(1, n))
        return 2 * height * (span.message_ps(share_bytes(data_bytes, 2), farthest) + delay_ps)
    raise ValueError(f"no closed form for algorithm {name!r}")


def _reversed(span: LineSpan) -> tuple[int, ...] | None:
    """The ring hops of ``span``'s line walked the other way (each member to its predecessor)."""
    if span.ring_hops is None:
        return None
    edges = span.ring_hops
    return tuple(edges[(i - 1) % len(edges)] for i in range(len(edges)))


def _phase_sizes(
    collective: Collective, data_bytes: int, sizes: Sequence[int], local_bw_aware: bool
) -> list[tuple[int, Collective, int]]:
    """(line index, collective, buffer bytes) of each phase, as the engine lays them out."""
    lines = range(len(sizes))
    if collective == "all_reduce" and local_bw_aware and len(sizes) > 1:
        phases: list[tuple[int, Collective, int]] = []
        data = data_bytes
        for i in lines[:-1]:
            phases.append((i, "reduce_scatter", data))
            data = share_bytes(data, sizes[i])
        phases.append((lines[-1], "all_reduce", data))
        for i in reversed(lines[:-1]):
            data *= sizes[i]
            phases.append((i, "all_gather", data))
        return phases
    if collective == "reduce_scatter":
        phases, data = [], data_bytes
        for i in lines:
            phases.append((i, collective, data))
            data = share_bytes(data, sizes[i])
        return phases
    if collective == "all_gather":
        total = 1
        for size in sizes:
            total *= size
        phases, data = [], share_bytes(data_bytes, total)
        for i in lines:
            data *= sizes[i]
            phases.append((i, collective, data))
        return phases
    return [(i, collective, data_bytes) for i in lines]


def collective_ps(
    collective: Collective,
    data_bytes: int,
    spans: Sequence[LineSpan],
    algorithms: Sequence[str],
    *,
    splits: int = 1,
    local_bw_aware: bool = False,
    endpoint_delay_ps: int = 0,
    reduce_bandwidth: int = 0,
) -> int:
    """The time of ``collective`` on ``data_bytes`` per NPU over a group whose lines are ``spans`` (innermost first),
    ``algorithms[i]`` running along ``spans[i]`` (a short list repeats its last entry): the sum of its phases (exact for one chunk), or with ``splits``
    chunks the first chunk's phases plus ``splits - 1`` times the slowest phase (an approximation, see the module);
    ``reduce_bandwidth`` prices reductions from local memory as :func:`phase_ps` does (0: free)."""
    if not data_bytes or not spans:
        return 0
    chunk = share_bytes(data_bytes, splits)
    phases = collective_phases_ps(
        collective,
        chunk,
        spans,
        algorithms,
        local_bw_aware=local_bw_aware,
        endpoint_delay_ps=endpoint_delay_ps,
        reduce_bandwidth=reduce_bandwidth,
    )
    times = [time for _, time in phases]
    return sum(times) + (splits - 1) * max(times)


def collective_phases_ps(
    collective: Collective,
    data_bytes: int,
    spans: Sequence[LineSpan],
    algorithms: Sequence[str],
    *,
    local_bw_aware: bool = False,
    endpoint_delay_ps: int = 0,
    reduce_bandwidth: int = 0,
) -> list[tuple[int, int]]:
    """The phases of one chunk of ``collective`` on ``data_bytes`` per NPU (see :func:`collective_ps`), in order,
    each as (index of its line in ``spans``, ps)."""
    sizes = [span.size for span in spans]
    return [
        (
            i,
            phase_ps(
                kind, algorithms[min(i, len(algorithms) - 1)], spans[i], size, endpoint_delay_ps, reduce_bandwidth
            ),
        )
        for i, kind, size in _phase_sizes(collective, data_bytes, sizes, local_bw_aware)
    ]


def send_ps(size: int, spans: Sequence[tuple[LineSpan, int]]) -> int:
    """A point-to-point message of ``size`` bytes crossing each dimension of ``spans`` (a span and the ring hops
    between the ends' coordinates there): one message time per dimension crossed, store and forward."""
    return sum(span.message_ps(size, hops) for span, hops in spans)
