"""Accelerators for the Timeloop-style model: a PE array plus a hierarchy of storage levels.

Units: capacities in words (elements, whatever the dtype, as in Timeloop and SCALE-Sim), bandwidths in words
per cycle for the whole level, energies in pJ per word access, the clock in Hz. ``levels[0]`` is private to
each PE (its registers or scratchpads; its capacity is per PE); the array of ``rows x cols`` PEs sits between
it and ``levels[1]``; the last level is the backing store (DRAM): unbounded, holding every operand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from stratasim.compute_layer.catalog import by_name
from stratasim.compute_layer.device_bounds import MAX_LEVEL_WORDS, MAX_PES, MAX_WORDS_PER_CYCLE, beyond
from stratasim.compute_layer.timeloop.problem import OPERANDS

__all__ = ["StorageLevel", "Accelerator", "catalog", "DATAFLOWS"]

DATAFLOWS = ("os", "ws", "is")
"""Systolic dataflows: output-, weight- and input-stationary."""

# The dimensions each systolic dataflow unrolls on array rows and columns, per problem kind (SCALE-Sim's
# mapping: OS puts output pixels on rows and filters on columns; WS the filter window on rows and filters on
# columns; IS the filter window on rows and output pixels on columns; a GEMM's M is the output pixels, K the
# window, N the filters).
_SYSTOLIC_SPATIAL: Mapping[str, Mapping[str, tuple[frozenset[str], frozenset[str]]]] = {
    "gemm": {
        "os": (frozenset("M"), frozenset("N")),
        "ws": (frozenset("K"), frozenset("N")),
        "is": (frozenset("K"), frozenset("M")),
    },
    "conv": {
        "os": (frozenset("NPQ"), frozenset("K")),
        "ws": (frozenset("CRS"), frozenset("K")),
        "is": (frozenset("CRS"), frozenset("NPQ")),
    },
}


@dataclass(frozen=True)
class StorageLevel:
    """One storage level: which operands it keeps, how much, how fast, at what energy.

    ``words`` bounds the sum of the kept operands' tiles (None: unbounded); ``partitions`` bounds single
    operands (SCALE-Sim's separate input, weight and output SRAMs). ``read_bandwidth`` and
    ``write_bandwidth`` are words per cycle for the whole level (None: never the bottleneck); ``shared_bandwidth``
    bounds reads and writes together, one port for both (None: separate ports). ``operand_read_pj`` and
    ``operand_write_pj`` price one operand's accesses where they differ from ``read_pj`` / ``write_pj``.
    """

    name: str
    keeps: frozenset[str]
    words: int | None = None
    partitions: Mapping[str, int] = field(default_factory=dict, hash=False)
    read_bandwidth: int | None = None
    write_bandwidth: int | None = None
    read_pj: float = 0.0
    write_pj: float = 0.0
    operand_read_pj: Mapping[str, float] = field(default_factory=dict, hash=False)
    operand_write_pj: Mapping[str, float] = field(default_factory=dict, hash=False)
    shared_bandwidth: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "keeps", frozenset(self.keeps))
        object.__setattr__(self, "partitions", MappingProxyType(dict(self.partitions)))
        object.__setattr__(self, "operand_read_pj", MappingProxyType(dict(self.operand_read_pj)))
        object.__setattr__(self, "operand_write_pj", MappingProxyType(dict(self.operand_write_pj)))
        problems = list(self._problems())
        if problems:
            raise ValueError(f"storage level {self.name!r}: {'; '.join(problems)}")

    def _problems(self) -> Iterator[str]:
        if not self.name:
            yield "name must not be empty"
        named = self.keeps | set(self.partitions) | set(self.operand_read_pj) | set(self.operand_write_pj)
        unknown = sorted(named - set(OPERANDS))
        if unknown:
            yield f"unknown operands {unknown}; operands are {', '.join(OPERANDS)}"
        counts = [("words", self.words), *self.partitions.items()]
        counts += [("read_bandwidth", self.read_bandwidth), ("write_bandwidth", self.write_bandwidth)]
        counts += [("shared_bandwidth", self.shared_bandwidth)]
        for label, value in counts:
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                yield f"{label} must be a positive integer or None, got {value!r}"
            elif value is not None:
                per_cycle = label.endswith("bandwidth")
                bound = MAX_WORDS_PER_CYCLE if per_cycle else MAX_LEVEL_WORDS
                problem = beyond(label, value, bound, "words per cycle" if per_cycle else "words")
                if problem is not None:
                    yield problem
        prices = [self.read_pj, self.write_pj, *self.operand_read_pj.values(), *self.operand_write_pj.values()]
        if any(pj < 0 for pj in prices):
            yield "energies cannot be negative"

    def read_price(self, operand: str) -> float:
        """pJ per word of ``operand`` read."""
        return self.operand_read_pj.get(operand, self.read_pj)

    def write_price(self, operand: str) -> float:
        """pJ per word of ``operand`` written."""
        return self.operand_write_pj.get(operand, self.write_pj)

    def capacity(self, operand: str) -> int | None:
        """The most words of ``operand`` this level can hold alone (None: unbounded)."""
        bounds = [b for b in (self.words, self.partitions.get(operand)) if b is not None]
        return min(bounds) if bounds else None


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class Accelerator:
    """A ``rows x cols`` PE array, each PE doing one MAC per cycle, under ``levels`` (innermost first).

    ``dataflow`` (``"os"``, ``"ws"``, ``"is"`` or None) makes the array systolic: GEMMs and convolutions
    then unroll only the dimensions that dataflow puts on rows and columns, and their compute cycles are
    SCALE-Sim's (see :mod:`stratasim.compute_layer.timeloop.scalesim`). ``unrolls`` constrains the mapping of a
    non-systolic array the same way: per problem kind, the dimensions allowed on (rows, cols) — Eyeriss's row
    stationary, say (kinds it omits unroll anything). ``mac_pj`` is the energy of one MAC. ``dram_bandwidth``
    (words per cycle) is SCALE-Sim's user bandwidth: each of the ``levels[1]`` partitions (SCALE-Sim's ifmap, filter
    and ofmap SRAMs, double-buffered) reaches DRAM through its own port that fast, and the array stalls when they
    fall behind (:mod:`stratasim.compute_layer.timeloop.scalesim_memory`); None keeps SCALE-Sim's CALC mode, memory
    never stalling. ``onload`` names operands whose tile at the outermost on-chip level keeping them is loaded from
    the backing store before compute starts (ZigZag's data onloading), adding its transfer to the cycles.
    ``zigzag_compat`` costs ZigZag's schedule instead of the model's own (see
    :mod:`stratasim.compute_layer.timeloop.analysis`): loops allocated bottom-up until each level is full (its LOMA
    mapper), one fill and drain of a systolic array per operator, transfers made once loaded before compute or
    written after it unless the backing store's port has idle cycles during compute to take them.
    """

    name: str
    rows: int
    cols: int
    levels: tuple[StorageLevel, ...]
    clock_hz: int
    mac_pj: float
    source: str
    dataflow: str | None = None
    unrolls: Mapping[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict, hash=False)
    dram_bandwidth: int | None = None
    onload: frozenset[str] = frozenset()
    zigzag_compat: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(self.levels))
        object.__setattr__(self, "onload", frozenset(self.onload))
        object.__setattr__(self, "unrolls", MappingProxyType(dict(self.unrolls)))
        problems = list(self._problems())
        if problems:
            raise ValueError(f"accelerator {self.name!r}: {'; '.join(problems)}")

    def _problems(self) -> Iterator[str]:
        for label, value in (("rows", self.rows), ("cols", self.cols), ("clock_hz", self.clock_hz)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                yield f"{label} must be a positive integer, got {value!r}"
        if _whole(self.rows) and _whole(self.cols):
            problem = beyond("the PE array (pe_rows x pe_cols)", self.rows * self.cols, MAX_PES, "PEs")
            if problem is not None:
                yield problem
        if len(self.levels) < 2:
            yield "needs at least two storage levels (PE-local and a backing store)"
        elif self.levels[-1].keeps != frozenset(OPERANDS) or self.levels[-1].capacity("inputs") is not None:
            yield f"the last level {self.levels[-1].name!r} must keep every operand and be unbounded"
        names = [level.name for level in self.levels]
        if len(set(names)) != len(names):
            yield f"level names must differ, got {names}"
        if self.dataflow is not None and self.dataflow not in DATAFLOWS:
            yield f"dataflow must be one of {', '.join(DATAFLOWS)} or None, got {self.dataflow!r}"
        if self.dataflow is not None and self.unrolls:
            yield "a systolic dataflow fixes the unrolling itself: give dataflow or unrolls, not both"
        if self.mac_pj < 0:
            yield "mac_pj cannot be negative"
        yield from self._dram_port_problems()
        unknown = sorted(self.onload - set(OPERANDS))
        if unknown:
            yield f"onload names unknown operands {unknown}; operands are {', '.join(OPERANDS)}"

    def _dram_port_problems(self) -> Iterator[str]:
        bandwidth = self.dram_bandwidth
        if bandwidth is None:
            return
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, int) or bandwidth <= 0:
            yield f"dram_bandwidth must be a positive integer (words per cycle), got {bandwidth!r}"
        elif self.dataflow is None or len(self.levels) < 2 or set(self.levels[1].partitions) != set(OPERANDS):
            yield (
                "dram_bandwidth models SCALE-Sim's ifmap, filter and ofmap SRAMs: it needs a systolic dataflow and "
                "a second level with a partition for each of inputs, weights and outputs (the systolic-* presets)"
            )

    @property
    def pes(self) -> int:
        """Number of PEs."""
        return self.rows * self.cols

    def spatial_dims(self, kind: str) -> tuple[frozenset[str], frozenset[str]] | None:
        """Dimensions allowed on (rows, cols) for a problem ``kind``; None when any dimension may go anywhere."""
        if self.dataflow is None:
            return self.unrolls.get(kind)
        return _SYSTOLIC_SPATIAL.get(kind, {}).get(self.dataflow)


def catalog(accelerators: Iterable[Accelerator]) -> Mapping[str, Accelerator]:
    """A read-only ``{lower-case name: accelerator}``; ValueError when two share a name."""
    return by_name(accelerators, "accelerators")
