"""SCALE-Sim's user-bandwidth mode: a layer's cycles when its SRAMs reach DRAM through ports of bounded bandwidth.

SCALE-Sim (``[run_presets] InterfaceBandwidth: USER``) gives each of its three SRAMs — ifmap, filter, ofmap — its
own port to DRAM moving ``Bandwidth`` words per cycle, and splits every SRAM into halves (double buffering). A
read SRAM streams its operand in the order the folds use it (``read_buffer.py``): the first half is filled before
compute starts; each later half-buffer is fetched in ``ceil(half / bandwidth)`` cycles, back to back, and the array
stalls when it asks for a word whose half-buffer has not arrived. The operand a dataflow spreads over the array's
rows (WS and OS: the ifmap; IS: the filter) is asked for again in every column fold (SCALE-Sim runs the column
folds outermost): if it overflows the first half, it is fetched again each time. The ofmap SRAM (``write_buffer.py``)
starts draining a half to DRAM when more than half of it holds outputs, and the array stalls when it is full; what
it still holds at the end drains afterwards.

With the demand spread evenly over the compute cycles ``T`` (each fold runs the same schedule), the ``k``-th
half-buffer of an operand streamed as ``F`` words is needed at ``T·(A + (k-1)·P)/F`` and arrives at ``k·ceil(P/B)``
(``A``, ``P`` the two halves, ``B`` the bandwidth); the stall is the largest lateness over every half-buffer of
every operand, as the whole array waits:

    cycles = fill + T + stall + tail

``fill`` is the first halves' load (the slower of the two read ports), ``tail`` the ofmap drain after the last
output. This is SCALE-Sim's *Total Cycles (incl. prefetch)*: from the first DRAM read to the last DRAM write.
Where SCALE-Sim 3.0.0 departs from the physics, this follows the physics: it starts the final drain while an
earlier one still occupies the port (here the port drains one half after the other), and it counts a read stall
twice (the next half-buffer then arrives early, so the totals differ little).
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.compute_layer.timeloop.problem import Problem
from stratasim.compute_layer.timeloop.scalesim import operand_dims, scalesim_cycles

__all__ = ["MemoryTimeline", "user_bandwidth_cycles"]


@dataclass(frozen=True)
class MemoryTimeline:
    """A layer's cycles under SCALE-Sim's user-bandwidth mode: ``total = fill + compute + stall + tail``."""

    fill: int
    compute: int
    stall: int
    tail: int

    @property
    def total(self) -> int:
        """Cycles from the first DRAM read to the last DRAM write."""
        return self.fill + self.compute + self.stall + self.tail


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _read_stall(words: int, sram: int, bandwidth: int, compute: int) -> tuple[int, int]:
    """(fill, stall) of one read SRAM streaming ``words`` through halves of ``sram``."""
    active = _ceil_div(sram, 2)
    fill = _ceil_div(min(active, words), bandwidth)
    half = sram - active
    if words <= active or half == 0:
        return fill, 0
    per_half = _ceil_div(half, bandwidth)
    halves = _ceil_div(words - active, half)
    # Lateness grows or shrinks linearly in k: the largest is at the first or the last half-buffer.
    lateness = (k * per_half - compute * (active + (k - 1) * half) // words for k in (1, halves))
    return fill, max(0, *lateness)


def _write_stall(words: int, sram: int, bandwidth: int, compute: int) -> tuple[int, int, int]:
    """(stall, end of the drains during compute, cycles to drain what is left) of the ofmap SRAM taking ``words``
    outputs written evenly over ``compute`` cycles."""
    active = _ceil_div(sram, 2)
    half = sram - active
    if words <= active or half == 0:
        return 0, 0, _ceil_div(words, bandwidth)
    start = compute * active // words  # the first drain begins once more than half the SRAM is full
    drains = (words - active - 1) // half + 1
    port_end = start + drains * _ceil_div(half, bandwidth)
    # Writes beyond the SRAM's capacity wait for drains: the last of them for all but one SRAM's worth.
    stall = max(0, start + _ceil_div(max(0, words - sram), bandwidth) - compute)
    return stall, port_end, _ceil_div(words - drains * half, bandwidth)


def user_bandwidth_cycles(
    problem: Problem, rows: int, cols: int, dataflow: str, sram_words: tuple[int, int, int], bandwidth: int
) -> MemoryTimeline:
    """Cycles of ``problem`` on a ``rows x cols`` array with ``dataflow``, ifmap/filter/ofmap SRAMs of
    ``sram_words`` and DRAM ports of ``bandwidth`` words per cycle each (a batched GEMM runs its products in turn)."""
    ofmap, filters, window, batch = operand_dims(problem)
    compute = scalesim_cycles(problem, rows, cols, dataflow) // batch
    spatial_rows, spatial_cols = {"os": (ofmap, filters), "ws": (window, filters), "is": (window, ofmap)}[dataflow]
    row_folds, col_folds = _ceil_div(spatial_rows, rows), _ceil_div(spatial_cols, cols)
    # Words each operand streams: the fetch order pads every fold to the array's edge.
    ifmap_words, filter_words = ofmap * window, window * filters
    padded_rows, padded_cols = row_folds * rows, col_folds * cols
    if dataflow == "is":
        ifmap_stream = padded_cols * window
        filter_stream = padded_rows * filters
        row_operand = "filter"
        writes = row_folds * ofmap * filters
    else:
        ifmap_stream = (padded_rows * window) if dataflow == "os" else (padded_rows * ofmap)
        filter_stream = padded_cols * window
        row_operand = "ifmap"
        writes = (1 if dataflow == "os" else row_folds) * ofmap * filters
    ifmap_sram, filter_sram, ofmap_sram = sram_words
    streams = {"ifmap": (ifmap_stream, ifmap_words, ifmap_sram), "filter": (filter_stream, filter_words, filter_sram)}
    fills, stalls = [], []
    for name, (stream, unique, sram) in streams.items():
        # The operand on the array's rows comes back in every column fold: fetched again unless it stays resident.
        passes = col_folds if name == row_operand and unique > _ceil_div(sram, 2) else 1
        fill, stall = _read_stall(stream * passes, sram, bandwidth, compute)
        fills.append(fill)
        stalls.append(stall)
    write_stall, port_end, left = _write_stall(writes, ofmap_sram, bandwidth, compute)
    stall = max(*stalls, write_stall)
    # What is left drains after the last output, once the port has finished the drains before it.
    tail = max(left, port_end + left - compute - stall)
    return MemoryTimeline(batch * max(fills), batch * compute, batch * stall, batch * tail)
