"""Accelerators for the Timeloop-style model: a PE array plus a hierarchy of storage levels, and presets.

Units: capacities in words (elements, whatever the dtype, as in Timeloop and SCALE-Sim), bandwidths in words
per cycle for the whole level, energies in pJ per word access, the clock in Hz. ``levels[0]`` is private to
each PE (its registers or scratchpads; its capacity is per PE); the array of ``rows x cols`` PEs sits between
it and ``levels[1]``; the last level is the backing store (DRAM): unbounded, holding every operand.

Energies of the presets come from two public tables, both 45 nm / 65 nm figures and so only indicative:

* Horowitz, "Computing's energy problem", ISSCC 2014 (45 nm): 8-bit integer multiply 0.2 pJ and add 0.03 pJ;
  a 64-bit SRAM read costs 10 pJ from 8 KB, 20 pJ from 32 KB and 100 pJ from 1 MB; a 64-bit DRAM access
  1.3-2.6 nJ. Per byte: 1.25 / 2.5 / 12.5 pJ for SRAM, 162.5 pJ for DRAM (the low end).
* Chen, Emer, Sze, "Eyeriss: a spatial architecture for energy-efficient dataflow for CNNs", ISCA 2016:
  per-access energy relative to a MAC of 1x for a PE register file, 6x for the global buffer, 200x for DRAM.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from stratasim.compute_layer.catalog import by_name, find, unknown_device
from stratasim.compute_layer.device_bounds import MAX_LEVEL_WORDS, MAX_PES, MAX_WORDS_PER_CYCLE, beyond
from stratasim.compute_layer.timeloop.problem import OPERANDS

__all__ = ["StorageLevel", "Accelerator", "PRESETS", "accelerator", "catalog", "systolic", "DATAFLOWS"]

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


_ALL = frozenset(OPERANDS)
_SYSTOLIC_NAME = re.compile(r"systolic-(\d+)x(\d+)-(os|ws|is)(?:-bw(\d+))?")
# Per-byte energies (pJ) from Horowitz ISSCC 2014, 45 nm.
_SRAM_32KB_PJ_PER_BYTE = 20 / 8
_SRAM_1MB_PJ_PER_BYTE = 100 / 8
_DRAM_PJ_PER_BYTE = 1300 / 8
_INT8_MAC_PJ = 0.2 + 0.03


def _registers(inputs: int, weights: int, outputs: int, pj: float) -> StorageLevel:
    partitions = {"inputs": inputs, "weights": weights, "outputs": outputs}
    return StorageLevel("registers", _ALL, partitions=partitions, read_pj=pj, write_pj=pj)


def _dram(bytes_per_word: int, bandwidth: int | None) -> StorageLevel:
    pj = _DRAM_PJ_PER_BYTE * bytes_per_word
    return StorageLevel("dram", _ALL, read_bandwidth=bandwidth, write_bandwidth=bandwidth, read_pj=pj, write_pj=pj)


def systolic(rows: int, cols: int, dataflow: str, dram_bandwidth: int | None = None) -> Accelerator:
    """A SCALE-Sim-like systolic array ``systolic-<rows>x<cols>-<dataflow>[-bw<dram_bandwidth>]``.

    Set up as SCALE-Sim's example configuration (``configs/scale.cfg``): 64 kB input, weight and output SRAMs
    of 1-byte words, one MAC per PE per cycle. Without ``dram_bandwidth`` memory never stalls (SCALE-Sim's CALC
    mode, its compute cycles); with it each SRAM's DRAM port moves that many words per cycle (its USER mode).
    SCALE-Sim has no clock, 1 GHz is assumed.
    """
    suffix = "" if dram_bandwidth is None else f"-bw{dram_bandwidth}"
    sram_pj = _SRAM_32KB_PJ_PER_BYTE  # Horowitz's 32 KB figure, the nearest to a 64 kB SRAM.
    sram = StorageLevel("sram", _ALL, partitions={o: 64 * 1024 for o in OPERANDS}, read_pj=sram_pj, write_pj=sram_pj)
    return Accelerator(
        name=f"systolic-{rows}x{cols}-{dataflow}{suffix}",
        rows=rows,
        cols=cols,
        levels=(_registers(1, 1, 1, _INT8_MAC_PJ), sram, _dram(1, None)),
        clock_hz=10**9,
        mac_pj=_INT8_MAC_PJ,
        dataflow=dataflow,
        dram_bandwidth=dram_bandwidth,
        source="SCALE-Sim (Samajdar et al., ISPASS 2020) example configuration: 64 kB ifmap/filter/ofmap SRAMs, "
        "1-byte words; energies Horowitz ISSCC 2014 (45 nm); 1 GHz assumed",
    )


_TPU_LIKE = Accelerator(
    name="tpu-like",
    rows=256,
    cols=256,
    levels=(
        _registers(1, 2, 1, _INT8_MAC_PJ),  # weights are double-buffered in each cell
        # 4096 accumulators of 256 x 32 bits: outputs only, written a row of 256 per cycle.
        StorageLevel(
            "accumulators",
            frozenset({"outputs"}),
            words=4096 * 256,
            read_bandwidth=256,
            write_bandwidth=256,
            read_pj=4 * _SRAM_1MB_PJ_PER_BYTE,
            write_pj=4 * _SRAM_1MB_PJ_PER_BYTE,
        ),
        # Weight FIFO, four tiles of 64 KiB deep, fed from DRAM.
        StorageLevel(
            "weight_fifo",
            frozenset({"weights"}),
            words=4 * 64 * 1024,
            read_bandwidth=256,
            write_bandwidth=256,
            read_pj=_SRAM_32KB_PJ_PER_BYTE,
            write_pj=_SRAM_32KB_PJ_PER_BYTE,
        ),
        # 24 MiB unified buffer of activations, 256 bytes per cycle each way.
        StorageLevel(
            "unified_buffer",
            frozenset({"inputs", "outputs"}),
            words=24 * 2**20,
            read_bandwidth=256,
            write_bandwidth=256,
            read_pj=_SRAM_1MB_PJ_PER_BYTE,
            write_pj=_SRAM_1MB_PJ_PER_BYTE,
        ),
        _dram(1, 30 * 10**9 // (700 * 10**6)),  # 30 GB/s DDR3 at 700 MHz: 42 bytes per cycle
    ),
    clock_hz=700 * 10**6,
    mac_pj=_INT8_MAC_PJ,
    dataflow="ws",
    source="Jouppi et al., 'In-datacenter performance analysis of a tensor processing unit', ISCA 2017: 256x256 "
    "8-bit MACs at 700 MHz, weight-stationary, 24 MiB unified buffer, 4 MiB accumulators, 30 GB/s DDR3; "
    "energies Horowitz ISSCC 2014 (45 nm)",
)

# ZigZag's TPU-like example (zigzag-dse 3.9.1, zigzag/inputs/hardware/tpu_like.yaml), priced per 8-bit word from its
# own per-access costs: rf_128B (weights, I2) r_cost = w_cost = 0.095 pJ per 8-bit access; rf_2B (a 16-bit partial
# sum, O) 0.021 pJ per 16-bit access; sram_2MB (I1 and O) 416.16 pJ read / 378.4 pJ write per access of up to
# bandwidth_max 2048 bits (256 words); dram r_cost 700 / w_cost 750 pJ per access of its one 64-bit read_write port
# (rw_port_1: 8 words per cycle, reads and writes together). Costed as ZigZag does (zigzag_compat): its mapping file
# unrolls K and C 32 x 32, its LOMA mapper fills the SRAM with the whole input, loaded first.
_ZIGZAG_TPU_LIKE = Accelerator(
    name="zigzag-tpu-like",
    rows=32,
    cols=32,
    levels=(
        # rf_128B holds 128 8-bit weights per PE; rf_2B one 16-bit partial sum; inputs have no PE register (ZigZag's
        # I1 is served from the SRAM), each read multicast along the array.
        StorageLevel(
            "registers",
            frozenset({"weights", "outputs"}),
            partitions={"weights": 128, "outputs": 1},
            read_pj=0.095,
            write_pj=0.095,
            operand_read_pj={"outputs": 0.021},
            operand_write_pj={"outputs": 0.021},
        ),
        # sram_2MB of inputs and outputs, up to 2048 bits (256 words) per cycle each way.
        StorageLevel(
            "sram",
            frozenset({"inputs", "outputs"}),
            words=2 * 2**20,
            read_bandwidth=256,
            write_bandwidth=256,
            read_pj=416.16 / 256,
            write_pj=378.4 / 256,
        ),
        # DRAM behind one 64-bit read-write port (8 words per cycle both ways together); weights go from it straight to
        # the PEs.
        StorageLevel(
            "dram", _ALL, read_bandwidth=8, write_bandwidth=8, shared_bandwidth=8, read_pj=700 / 8, write_pj=750 / 8
        ),
    ),
    clock_hz=10**9,
    mac_pj=0.04,
    dataflow="ws",
    onload=frozenset({"inputs", "weights"}),
    zigzag_compat=True,
    source="ZigZag (zigzag-dse 3.9.1) TPU-like example, inputs/hardware/tpu_like.yaml: 32x32 weight-stationary 8-bit "
    "MACs (0.04 pJ), 128 B weight (0.095 pJ) and 2 B output (0.021 pJ) registers per PE (inputs go from the SRAM "
    "to the array), 2 MiB input/output SRAM at 2048 bits/cycle, one 64-bit read-write DRAM port; costed as ZigZag "
    "does (zigzag_compat); ZigZag counts cycles and names no clock, 1 GHz is assumed",
)

# Row stationary (Chen et al. ISCA 2016, section V): a PE set is filter rows (R) down by output rows (P)
# across, each PE sliding one filter row along one input row; input channels and filters fold onto more rows
# and filters onto more columns. A GEMM is the fully-connected layer: its K is the channels, N the filters.
_ROW_STATIONARY: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    "conv": (frozenset("RCK"), frozenset("PK")),
    "gemm": (frozenset("KN"), frozenset("N")),
}
_EYERISS_UNIT_PJ = 1.0  # Eyeriss publishes energies relative to one 16-bit MAC: that MAC is the unit here.
_EYERISS_LIKE = Accelerator(
    name="eyeriss-like",
    rows=12,
    cols=14,
    levels=(
        # Per-PE scratchpads of 16-bit words: 12 ifmap, 224 filter, 24 psum.
        _registers(12, 224, 24, 1 * _EYERISS_UNIT_PJ),
        # The 108 KB global buffer holds ifmaps and psums; filters go from DRAM straight to the PEs.
        StorageLevel(
            "global_buffer",
            frozenset({"inputs", "outputs"}),
            words=108 * 1024 // 2,
            read_pj=6 * _EYERISS_UNIT_PJ,
            write_pj=6 * _EYERISS_UNIT_PJ,
        ),
        StorageLevel(
            "dram",
            _ALL,
            read_bandwidth=4,
            write_bandwidth=4,
            read_pj=200 * _EYERISS_UNIT_PJ,
            write_pj=200 * _EYERISS_UNIT_PJ,
        ),  # a 64-bit interface: four 16-bit words per cycle
    ),
    clock_hz=200 * 10**6,
    mac_pj=_EYERISS_UNIT_PJ,
    unrolls=_ROW_STATIONARY,
    source="Chen et al., 'Eyeriss: an energy-efficient reconfigurable accelerator for deep CNNs', JSSC 2017: "
    "12x14 PEs at 200 MHz, 16-bit, spads 12/224/24 words, 108 KB global buffer, 64-bit DRAM interface; "
    "relative energies 1/6/200 x MAC from Chen et al. ISCA 2016 (unit: one MAC = 1 pJ)",
)

_GEMMINI = Accelerator(
    name="gemmini",
    rows=16,
    cols=16,
    levels=(
        _registers(1, 1, 1, _INT8_MAC_PJ),
        # 64 KiB accumulator of 32-bit words.
        StorageLevel(
            "accumulator",
            frozenset({"outputs"}),
            words=64 * 1024 // 4,
            read_bandwidth=16,
            write_bandwidth=16,
            read_pj=4 * _SRAM_32KB_PJ_PER_BYTE,
            write_pj=4 * _SRAM_32KB_PJ_PER_BYTE,
        ),
        # 256 KiB scratchpad of 8-bit words for inputs and weights, one 16-word row per bank per cycle.
        StorageLevel(
            "scratchpad",
            frozenset({"inputs", "weights"}),
            words=256 * 1024,
            read_bandwidth=64,
            write_bandwidth=64,
            read_pj=_SRAM_32KB_PJ_PER_BYTE,
            write_pj=_SRAM_32KB_PJ_PER_BYTE,
        ),
        _dram(1, 16),  # 128-bit DMA bus
    ),
    clock_hz=700 * 10**6,
    mac_pj=_INT8_MAC_PJ,
    dataflow="ws",
    source="Genc et al., 'Gemmini', DAC 2021, default configuration: 16x16 int8 systolic mesh, 256 KiB "
    "scratchpad (4 banks), 64 KiB accumulator of int32, 128-bit DMA; 700 MHz as in the DEAP study; "
    "energies Horowitz ISSCC 2014 (45 nm)",
)

_SYSTOLIC_PRESETS = [systolic(n, n, dataflow) for n in (32, 128) for dataflow in DATAFLOWS]
PRESETS: Mapping[str, Accelerator] = catalog([_TPU_LIKE, _ZIGZAG_TPU_LIKE, _EYERISS_LIKE, _GEMMINI, *_SYSTOLIC_PRESETS])
"""Preset accelerators by name; any ``systolic-<R>x<C>-<os|ws|is>`` is also accepted by :func:`accelerator`."""


def accelerator(name: str, accelerators: Mapping[str, Accelerator] | None = None) -> Accelerator:
    """The accelerator called ``name`` (case-insensitive), or a ``systolic-<R>x<C>-<os|ws|is>`` array (with
    ``-bw<B>``: DRAM ports of B words per cycle, SCALE-Sim's user bandwidth).

    Raises :class:`~stratasim.kernel.errors.BackendError` listing the known names when there is none.
    """
    table = PRESETS if accelerators is None else accelerators
    found = find(table, name)
    if found is not None:
        return found
    match = _SYSTOLIC_NAME.fullmatch(name.strip().lower())
    if match and accelerators is None and int(match[1]) > 0 and int(match[2]) > 0 and match[4] != "0":
        return systolic(int(match[1]), int(match[2]), match[3], None if match[4] is None else int(match[4]))
    raise unknown_device(name, table, "systolic-<R>x<C>-<os|ws|is>[-bw<B>]")
