"""The Timeloop-style model's preset accelerators, SCALE-Sim-like systolic arrays, and looking one up by name.

Energies of the presets come from two public tables, both 45 nm / 65 nm figures and so only indicative:

* Horowitz, "Computing's energy problem", ISSCC 2014 (45 nm): 8-bit integer multiply 0.2 pJ and add 0.03 pJ;
  a 64-bit SRAM read costs 10 pJ from 8 KB, 20 pJ from 32 KB and 100 pJ from 1 MB; a 64-bit DRAM access
  1.3-2.6 nJ. Per byte: 1.25 / 2.5 / 12.5 pJ for SRAM, 162.5 pJ for DRAM (the low end).
* Chen, Emer, Sze, "Eyeriss: a spatial architecture for energy-efficient dataflow for CNNs", ISCA 2016:
  per-access energy relative to a MAC of 1x for a PE register file, 6x for the global buffer, 200x for DRAM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from stratasim.compute_layer.catalog import find, unknown_device
from stratasim.compute_layer.timeloop.accelerator import DATAFLOWS, Accelerator, StorageLevel, catalog
from stratasim.compute_layer.timeloop.problem import OPERANDS

__all__ = ["PRESETS", "accelerator", "systolic"]

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
