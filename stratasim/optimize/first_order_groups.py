"""Where a plan's communicator groups and pipeline neighbours sit on a study's topology, as closed-form spans.

A group that is a product of coordinate sets runs one phase per dimension it spans
(:func:`stratasim.system_layer.collectives.groups.phases_of`); each becomes a
:class:`~stratasim.system_layer.collectives.first_order.LineSpan` of that dimension's kind, speed and, on a ring,
the hops between the line's members. A point-to-point message pays each dimension its ends differ in.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from stratasim.kernel.grid import Grid
from stratasim.system_layer.collectives.first_order import (
    DimensionKind,
    LineSpan,
    collective_phases_ps,
    collective_ps,
    send_ps,
)
from stratasim.system_layer.collectives.groups import FLAT, PhaseLines, phases_of
from stratasim.system_layer.options import Preset, SystemOptions
from stratasim.v1 import network_pb2

__all__ = ["GroupTimer", "send_time_ps"]

_KINDS: dict[int, DimensionKind] = {
    network_pb2.Dimension.RING: "ring",
    network_pb2.Dimension.SWITCH: "switch",
    network_pb2.Dimension.FULLY_CONNECTED: "fully_connected",
}


def _kind(dim: network_pb2.Dimension) -> DimensionKind:
    kind = _KINDS.get(dim.kind)
    if kind is None:
        raise ValueError(f"no closed form for a topology dimension of kind {dim.kind}")
    return kind


def _bandwidth(dim: network_pb2.Dimension) -> Fraction | int:
    """The dimension's bandwidth in bytes/s, exactly (the analytical network reads it as a fraction too)."""
    rate = Fraction(dim.bandwidth_bytes_per_s)
    return rate.numerator if rate.denominator == 1 else rate


def _ring_hops(coords: Sequence[int], size: int) -> tuple[int, ...]:
    """Shortest ring distance from each of ``coords`` to the next (the last to the first) on a ring of ``size``."""
    steps = ((coords[(i + 1) % len(coords)] - coords[i]) % size for i in range(len(coords)))
    return tuple(min(step, size - step) for step in steps)


class GroupTimer:
    """Closed-form collective times over the groups of one topology, with the study's ``system`` options
    (algorithm per collective and dimension, ``splits``, ``local_bw_aware``, endpoint delay)."""

    def __init__(self, topology: network_pb2.Topology, options: SystemOptions) -> None:
        self._dims = list(topology.dimensions)
        self._grid = Grid.of(topology)
        self._options = options
        if options.preset != Preset.DEFAULT:
            raise ValueError(f"no closed form for the {options.preset.value} preset's semantics")
        if options.reduction == "compute":
            raise ValueError("no closed form for reductions priced on the compute layer")
        self._spans: dict[tuple[int, ...], tuple[tuple[int, LineSpan], ...]] = {}

    @property
    def grid(self) -> Grid:
        """The topology's grid."""
        return self._grid

    def spans(self, group: tuple[int, ...]) -> tuple[tuple[int, LineSpan], ...]:
        """The (dimension, line) of each phase of a collective over ``group`` (NPU ids), innermost first."""
        known = self._spans.get(group)
        if known is None:
            known = self._spans[group] = tuple(self._span(phase.dim, phase.coords) for phase in self._phases(group))
        return known

    def _phases(self, group: tuple[int, ...]) -> tuple[PhaseLines, ...]:
        phases = phases_of(tuple(sorted(group)), self._grid)
        if any(phase.dim == FLAT for phase in phases):
            raise ValueError(f"no closed form for a group that is no product of coordinate sets: {group[:8]}...")
        return phases

    def _span(self, d: int, coords: Sequence[int]) -> tuple[int, LineSpan]:
        dim = self._dims[d]
        kind = _kind(dim)
        hops = _ring_hops(coords, dim.size) if kind == "ring" else None
        return d, LineSpan(kind, len(coords), _bandwidth(dim), dim.latency_ps, hops, dim.size)

    def collective_ps(self, collective: str, size: int, group: tuple[int, ...]) -> int:
        """``collective`` of ``size`` bytes per NPU over ``group``: 0 for a group of one."""
        if len(group) < 2 or not size:
            return 0
        spans = self.spans(group)
        options = self._options
        return collective_ps(
            collective,  # type: ignore[arg-type]
            size,
            [span for _, span in spans],
            [options.algorithm_for(collective, d) for d, _ in spans],
            splits=options.splits,
            local_bw_aware=options.collective_optimization == "local_bw_aware",
            endpoint_delay_ps=options.endpoint_delay,
            reduce_bandwidth=options.local_mem_bw or 0,
        )

    def phases_ps(self, collective: str, size: int, group: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
        """The (dimension, ps) phases of ``collective`` of ``size`` bytes per NPU over ``group``, in order; None
        when it runs in several chunks (``splits``), whose phases interleave."""
        if self._options.splits > 1:
            return None
        if len(group) < 2 or not size:
            return ()
        spans = self.spans(group)
        options = self._options
        phases = collective_phases_ps(
            collective,  # type: ignore[arg-type]
            size,
            [span for _, span in spans],
            [options.algorithm_for(collective, d) for d, _ in spans],
            local_bw_aware=options.collective_optimization == "local_bw_aware",
            endpoint_delay_ps=options.endpoint_delay,
            reduce_bandwidth=options.local_mem_bw or 0,
        )
        return tuple((spans[line][0], time) for line, time in phases)

    def send_ps(self, size: int, source: int, destination: int) -> int:
        """A point-to-point message of ``size`` bytes from NPU ``source`` to ``destination`` (with the receiver's
        endpoint delay, as plain sends pay it)."""
        delay = self._options.endpoint_delay if self._options.semantics.endpoint_delay_on_sends else 0
        return send_time_ps(self._dims, self._grid, size, source, destination) + delay


def send_time_ps(dims: Sequence[network_pb2.Dimension], grid: Grid, size: int, source: int, destination: int) -> int:
    """A point-to-point message on the analytical network: each dimension the ends differ in, one after the other."""
    crossed = []
    for d, dim in enumerate(dims):
        here, there = grid.coordinate(source, d), grid.coordinate(destination, d)
        if here != there:
            kind = _kind(dim)
            step = (there - here) % dim.size
            crossed.append((LineSpan(kind, 2, _bandwidth(dim), dim.latency_ps), min(step, dim.size - step)))
    return send_ps(size, crossed)
