"""Link changes (``Topology.link_changes``) read against a topology: named links, checked, in time order.

A change names its link as the networks' link counters do: ``dim D: a->b`` on a list of dimensions (``switch``
standing for a switch dimension's switch: ``dim 1: 4->switch`` is NPU 4's up-link), the fabric's node names on a
fabric (``npu 5->npu 6`` on a torus); ``a<->b`` names both directions of the cable; a switch's name alone (``dim 1:
switch``, ``aggregation 0.0``) names every link into and out of it. A :class:`LinkNaming` reads those names:
:class:`DimensionLinkNames` on a list of dimensions here, the network layer's fabric names on a fabric (a fabric is
built by the network layer). :func:`resolve` turns the changes into :class:`LinkChange` records, in time order, with
percentages of a link's nominal bandwidth made absolute.

This lives in the kernel so that every network backend reads link names alike, the built-in networks and the
adapters (which may not import the network layer) both.

A failed link stays down until an entry ``restore``-s it, later than it failed: from then it carries traffic again,
at the bandwidth that entry gives, else at the speed it had when it failed. A restore of a link that is not down
then, and a change of a link while it is down, are refused naming the entry.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from itertools import islice
from typing import Protocol

from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.kernel.units import format_time_ps
from stratasim.v1 import network_pb2

__all__ = [
    "ChangeError",
    "DimensionLinkNames",
    "LinkChange",
    "LinkKey",
    "LinkNaming",
    "in_order",
    "nearest_hint",
    "no_detour",
    "resolve",
    "resolve_entry",
    "unknown_link",
]

LinkKey = tuple[int, ...]
"""(dimension, from NPU, to NPU), -1 standing for the switch of a switch dimension; on a fabric (from node,
to node)."""

_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH
_DIMENSION_LINK = re.compile(r"\s*dim\s+(\d+)\s*:\s*(\d+|switch)\s*(<->|->)\s*(\d+|switch)\s*$")
_DIMENSION_SWITCH = re.compile(r"\s*dim\s+(\d+)\s*:\s*switch\s*$")
_NAMES_LISTED = 200_000  # names enumerated at most when looking for the nearest one


class ChangeError(TopologyError):
    """Why entry ``entry`` of the link changes (naming ``link``) cannot be: ``reason``."""

    def __init__(self, entry: int, link: str, reason: str) -> None:
        super().__init__(f"link_changes[{entry}] ({link!r}): {reason}")
        self.entry = entry
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LinkChange:
    """A change of one directed link, entry ``entry`` of the topology's: from ``at_ps`` on, its ``bandwidth``
    (bytes/s) and ``latency_ps`` (None: unchanged), or it ``fail``-s (carries nothing), or it is ``restore``-d
    (carries again, at ``bandwidth`` when given)."""

    key: LinkKey
    name: str
    at_ps: int
    bandwidth: Fraction | None
    latency_ps: int | None
    fail: bool
    restore: bool = False
    entry: int = 0


class LinkNaming(Protocol):
    """The links of one topology by name."""

    def name(self, key: LinkKey) -> str:
        """The link's name, as the counters give it."""
        ...

    def keys(self, text: str) -> list[LinkKey]:
        """The directed links ``text`` names; :class:`TopologyError` if there is none such."""
        ...

    def nominal(self, key: LinkKey, topology: network_pb2.Topology) -> tuple[Fraction, int]:
        """The link's speed as the topology builds it: (bandwidth in bytes/s, latency in ps)."""
        ...


_NO_DETOUR: dict[int, str] = {
    _RING: "the ring is cut both ways round",
    _SWITCH: "a switch dimension has one way up and one way down per NPU",
    network_pb2.Dimension.FULLY_CONNECTED: "a fully connected dimension sends over the direct link only",
}


def no_detour(kind: int, size: int) -> str:
    """Why a message finds no way around a failed link in a dimension of ``kind`` and ``size``."""
    return "a ring of 2 NPUs has one link each way" if kind == _RING and size == 2 else _NO_DETOUR[kind]


def nearest_hint(text: str, names: list[str]) -> str:
    """``; did you mean ...?`` with the name of ``names`` nearest ``text``, else a few examples."""
    nearest = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
    return f"; did you mean {nearest[0]!r}?" if nearest else f"; e.g. {', '.join(map(repr, names[:3]))}"


def unknown_link(text: str, names: Iterable[str], form: str) -> str:
    """Why ``text`` names no link: how names look (``form``), and the nearest of ``names``."""
    hint = nearest_hint(text, list(islice(names, _NAMES_LISTED)))
    return f"no link named {text!r}: links are named as the report's link table names them, {form}{hint}"


class DimensionLinkNames:
    """The links of a topology's list of dimensions by name."""

    def __init__(self, topology: network_pb2.Topology) -> None:
        self._grid = Grid(tuple(dim.size for dim in topology.dimensions))
        self._kinds = tuple(dim.kind for dim in topology.dimensions)

    def name(self, key: LinkKey) -> str:
        """The link's name, as the counters give it."""
        dim, source, target = key
        return f"dim {dim}: {'switch' if source < 0 else source}->{'switch' if target < 0 else target}"

    def keys(self, text: str) -> list[LinkKey]:
        """The directed link ``text`` names (both, for ``a<->b``; every link into and out of a switch dimension's
        switches, for ``dim D: switch``); :class:`TopologyError` if there is none such."""
        if "->" not in text:
            return self._switch_links(text)
        found = _DIMENSION_LINK.match(text)
        if found is not None:
            key = (int(found[1]), *(-1 if end == "switch" else int(end) for end in (found[2], found[4])))
            if self._exists(key):
                return [key, (key[0], key[2], key[1])] if found[3] == "<->" else [key]
        form = "'dim D: a->b' (NPU ids, 'switch' for a switch dimension's switch)"
        raise TopologyError(unknown_link(text, self._names(), form))

    def nominal(self, key: LinkKey, topology: network_pb2.Topology) -> tuple[Fraction, int]:
        """The link's speed as the topology builds it: its dimension's (bandwidth in bytes/s, latency in ps)."""
        dim = topology.dimensions[key[0]]
        return Fraction(dim.bandwidth_bytes_per_s), dim.latency_ps

    def _switch_links(self, text: str) -> list[LinkKey]:
        """Every link out of and into the switches of switch dimension D, which ``dim D: switch`` names (one per
        line of it)."""
        found = _DIMENSION_SWITCH.match(text)
        d = -1 if found is None else int(found[1])
        if not 0 <= d < len(self._kinds) or self._kinds[d] != _SWITCH or self._grid.sizes[d] < 2:
            names = [f"dim {d}: switch" for d, kind in enumerate(self._kinds) if kind == _SWITCH]
            if not names:
                raise TopologyError(
                    f"no switch named {text!r}: this topology has no switches; a link is named 'dim D: a->b'"
                )
            raise TopologyError(
                f"no switch named {text!r}: switches are named 'dim D: switch' for a switch dimension D (a link: "
                f"'dim D: a->b'){nearest_hint(text, names)}"
            )
        return [key for npu in range(self._grid.npus) for key in ((d, npu, -1), (d, -1, npu))]

    def _exists(self, key: LinkKey) -> bool:
        d, a, b = key
        grid = self._grid
        if d >= len(grid.sizes) or grid.sizes[d] < 2 or max(a, b) >= grid.npus or a == b:
            return False
        if self._kinds[d] == _SWITCH:
            return min(a, b) == -1
        if min(a, b) < 0 or any(
            grid.coordinate(a, o) != grid.coordinate(b, o) for o in range(len(grid.sizes)) if o != d
        ):
            return False
        size, here, there = grid.sizes[d], grid.coordinate(a, d), grid.coordinate(b, d)
        return self._kinds[d] != _RING or (there - here) % size in (1, size - 1)

    def _names(self) -> Iterator[str]:
        grid = self._grid
        for npu in range(grid.npus):
            for d, size in enumerate(grid.sizes):
                if size < 2:
                    continue
                own = grid.coordinate(npu, d)
                if self._kinds[d] == _SWITCH:
                    yield from (self.name((d, npu, -1)), self.name((d, -1, npu)))
                    continue
                goals = [(own + 1) % size, (own - 1) % size] if self._kinds[d] == _RING else range(size)
                for goal in dict.fromkeys(goals):
                    if goal != own:
                        yield self.name((d, npu, npu + (goal - own) * grid.stride(d)))


def resolve(topology: network_pb2.Topology, names: LinkNaming) -> list[LinkChange]:
    """The topology's link changes, checked, one per directed link, ordered by time (then as given);
    :class:`TopologyError` naming ``link_changes[i]`` at the first impossible one (a plain one: it crosses the wire
    as the network's error)."""
    try:
        changes = [
            change for index in range(len(topology.link_changes)) for change in resolve_entry(index, topology, names)
        ]
        return in_order(changes, topology)
    except ChangeError as exc:
        raise TopologyError(str(exc)) from None


def resolve_entry(index: int, topology: network_pb2.Topology, names: LinkNaming) -> list[LinkChange]:
    """Entry ``index`` of the topology's link changes as the changes of the directed links it names;
    :class:`ChangeError` if it is impossible on its own."""
    change = topology.link_changes[index]
    try:
        return _resolved(index, change, topology, names)
    except TopologyError as exc:
        raise ChangeError(index, change.link, str(exc)) from None


def in_order(changes: list[LinkChange], topology: network_pb2.Topology) -> list[LinkChange]:
    """``changes`` ordered by time (entries at one time as given), checked as a sequence: a link is restored only
    while down and changes only while up; :class:`ChangeError` naming the first entry that breaks it."""
    changes = sorted(changes, key=lambda change: change.at_ps)
    down: dict[LinkKey, int] = {}  # the links down, and when each failed
    for resolved in changes:
        entry, link = resolved.entry, topology.link_changes[resolved.entry].link
        failed_at = down.get(resolved.key)
        if resolved.restore and (failed_at is None or failed_at == resolved.at_ps):
            said = "is not down before then" if failed_at is None else "fails at that same time"
            raise ChangeError(
                entry,
                link,
                f"restores link {resolved.name} at {format_time_ps(resolved.at_ps)}, but it {said}; restore a "
                "link later than an entry fails it",
            )
        if failed_at is not None and not resolved.restore:
            raise ChangeError(
                entry,
                link,
                f"changes link {resolved.name} at {format_time_ps(resolved.at_ps)} while it is down (failed at "
                f"{format_time_ps(failed_at)}); bring it back first with restore: true (which may give its bandwidth)",
            )
        if resolved.fail:
            down[resolved.key] = resolved.at_ps
        elif resolved.restore:
            del down[resolved.key]
    return changes


def _resolved(
    entry: int, change: network_pb2.LinkChange, topology: network_pb2.Topology, names: LinkNaming
) -> list[LinkChange]:
    """Entry ``entry``, ``change``, as the changes of the directed links it names."""
    absolute, fraction = change.bandwidth_bytes_per_s, change.bandwidth_fraction
    latency = change.latency_ps if change.HasField("latency_ps") else None
    if change.at_ps < 0:
        raise TopologyError(f"at: must not be negative, got {change.at_ps} ps")
    if change.fail and (absolute or fraction or latency is not None or change.restore):
        raise TopologyError("a failed link has no bandwidth or latency: give fail, or a new speed, or restore")
    if change.restore and latency is not None:
        raise TopologyError(
            "latency: a restored link comes back with the latency it had; give restore alone or with a bandwidth"
        )
    if absolute and fraction:
        raise TopologyError("give the bandwidth in bytes/s or as a share of the nominal one, not both")
    if min(absolute, fraction) < 0 or not math.isfinite(absolute + fraction):
        raise TopologyError(f"bandwidth: must be positive, got {absolute or fraction}")
    if latency is not None and latency < 0:
        raise TopologyError(f"latency: must not be negative, got {latency} ps")
    if latency is not None and change.at_ps > 0:
        raise TopologyError(
            f"latency: changes only from the start (at 0), as it bounds the network's lookahead; this change is at "
            f"{format_time_ps(change.at_ps)}"
        )
    if not (change.fail or change.restore or absolute or fraction or latency is not None):
        raise TopologyError("changes nothing: give a bandwidth, a latency, fail or restore")
    resolved = []
    for key in names.keys(change.link):
        nominal = names.nominal(key, topology)[0]
        bandwidth = Fraction(absolute) if absolute else nominal * Fraction(fraction) if fraction else None
        resolved.append(
            LinkChange(key, names.name(key), change.at_ps, bandwidth, latency, change.fail, change.restore, entry)
        )
    return resolved
