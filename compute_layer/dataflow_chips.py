"""Chips as DFModel's intra-chip pass sees them: an array of compute tiles, on-chip SRAM, off-chip DRAM and an
execution style, with presets for the chips of DFModel's Table V and the SN10 of its Sec. VII.

A tile is a ``lanes x stages`` systolic array at ``clock_hz`` (DFModel's ``core``, ``systolic_width``,
``systolic_height`` and ``freq``), so it computes ``2 x lanes x stages x clock_hz`` FLOP/s and an element-wise
operator streams ``lanes`` elements a cycle through it. :meth:`DataflowChip.kernel_seconds` is DFModel's compute
model: a kernel on ``tiles`` tiles takes as many cycles as its operator's rows and columns need whole array passes
(the quantisation that makes small or ragged kernels waste the array), or, when ``utilisation`` is set, its FLOPs
at that fraction of the tiles' peak (DFModel's ``compute_util``). ``execution`` says how the chip runs a graph:
``dataflow`` fuses kernels into partitions that stream tensors through SRAM (SambaNova RDU, Cerebras WSE),
``kernel_by_kernel`` runs one kernel at a time with every tensor through DRAM (GPU, TPU).

Sources: the paper (Table V: throughput and SRAM as it counts them, MB meaning MiB as its code writes them; Sec.
VI.C: DDR4 200 GB/s and HBM3 3000 GB/s; Sec. VII: SN10) and DFModel's public repository (kosho2013/DFModel, the
``accelerator`` blocks of its setup files: SN30 1,280 cores of 32 x 6 at 1.25 GHz and 640 MiB; WSE-2 853,776 cores
of 4 x 1 at 1.1 GHz and 41,964,011,520 bytes; GPU 528 cores at 1.837 GHz and 113 MiB).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Literal, TypeAlias

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.kernel.units import parse_bandwidth, parse_bytes
from stratasim.v1 import compute_pb2

__all__ = ["Execution", "DataflowChip", "Memory", "MEMORIES", "DATAFLOW_CHIPS", "dataflow_chip"]

Execution: TypeAlias = Literal["dataflow", "kernel_by_kernel"]


@dataclass(frozen=True)
class Memory:
    """An off-chip memory technology: ``bandwidth`` in bytes/s, ``capacity`` in bytes."""

    name: str
    bandwidth: float
    capacity: int


MEMORIES: Mapping[str, Memory] = MappingProxyType(
    {
        # DFModel Sec. VI.C: DDR4 at 200 GB/s; capacity 1 TiB as the repository's SN30 setup (dram_cap 1.0995e12).
        "ddr4": Memory("ddr4", parse_bandwidth("200GB/s"), parse_bytes("1TiB")),
        # DFModel Sec. VI.C: HBM3 at 3000 GB/s; capacity the h100 preset's five 16 GiB stacks.
        "hbm3": Memory("hbm3", parse_bandwidth("3000GB/s"), PRESETS["h100"].memory_capacity),
    }
)
"""The memory options of DFModel's design-space exploration (Sec. VI.C), by name."""


@dataclass(frozen=True)
class DataflowChip:
    """One chip for the intra-chip pass: ``tiles`` compute tiles, each a ``lanes x stages`` array at ``clock_hz``;
    ``sram_bytes`` of on-chip memory; DRAM of ``dram_bandwidth`` bytes/s and ``dram_capacity`` bytes; its
    ``execution`` style; ``utilisation`` (0 < u <= 1) to price every kernel at that fraction of peak instead of by
    array quantisation (None); ``source`` cites where the numbers come from."""

    name: str
    tiles: int
    lanes: int
    stages: int
    clock_hz: float
    sram_bytes: int
    dram_bandwidth: float
    dram_capacity: int
    execution: Execution
    utilisation: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        problems = list(self._problems())
        if problems:
            raise ValueError(f"dataflow chip {self.name!r}: {'; '.join(problems)}")

    def _problems(self) -> Iterator[str]:
        for key in ("tiles", "lanes", "stages", "sram_bytes", "dram_capacity"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                yield f"{key} must be a positive integer, got {value!r}"
        for key in ("clock_hz", "dram_bandwidth"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                yield f"{key} must be a positive number, got {value!r}"
        if self.execution not in ("dataflow", "kernel_by_kernel"):
            yield f"execution must be 'dataflow' or 'kernel_by_kernel', got {self.execution!r}"
        if self.utilisation is not None and not 0 < self.utilisation <= 1:
            yield f"utilisation must be in (0, 1] or None, got {self.utilisation!r}"

    @property
    def tile_flops(self) -> float:
        """Peak FLOP/s of one tile (a multiply-add counts two)."""
        return 2.0 * self.lanes * self.stages * self.clock_hz

    @property
    def peak_flops(self) -> float:
        """Peak FLOP/s of the whole chip."""
        return self.tiles * self.tile_flops

    def tile_options(self) -> tuple[int, ...]:
        """The tile counts a kernel may be given: powers of two below the chip's tiles, and all of them."""
        return tuple(2**e for e in range(self.tiles.bit_length()) if 2**e < self.tiles) + (self.tiles,)

    def kernel_seconds(self, op: compute_pb2.OperatorDesc, tiles: int) -> float:
        """Seconds ``op`` takes on ``tiles`` tiles when nothing else limits it."""
        if self.utilisation is not None or op.flops == 0:
            return op.flops / (tiles * self.tile_flops * (self.utilisation or 1.0))
        kind = op.WhichOneof("shape")
        if kind == "elementwise":
            return math.ceil(op.elementwise.elements / (tiles * self.lanes)) / self.clock_hz
        if kind == "gemm":
            rows, columns = max(1, op.gemm.batch) * op.gemm.m, op.gemm.n
        elif kind == "attention":
            rows, columns = op.attention.batch * op.attention.queries, op.attention.keys
        else:
            return op.flops / (tiles * self.tile_flops)
        return op.flops / (tiles * self.tile_flops * self._array_use(rows, columns, tiles))

    def _array_use(self, rows: int, columns: int, tiles: int) -> float:
        """The share of ``tiles`` arrays a ``rows x columns`` output keeps busy, its rows spread over ``lanes``
        and its columns over ``stages`` of some ``a x b = tiles`` grid of tiles (the best grid)."""
        best = 0.0
        for a in _divisors(tiles):
            b = tiles // a
            row_passes = math.ceil(rows / (a * self.lanes))
            column_passes = math.ceil(columns / (b * self.stages))
            best = max(best, rows * columns / (row_passes * a * self.lanes * column_passes * b * self.stages))
        return best


def _divisors(number: int) -> Iterator[int]:
    for low in range(1, math.isqrt(number) + 1):
        if number % low == 0:
            yield low
            if low * low != number:
                yield number // low


def _clock(peak: float, tiles: int, lanes: int, stages: int) -> float:
    """The clock at which ``tiles`` arrays of ``lanes x stages`` reach ``peak`` FLOP/s."""
    return peak / (2 * tiles * lanes * stages)


_H100 = DataflowChip(
    name="h100",
    tiles=528,
    lanes=32,
    stages=16,
    # The h100 preset's dense bf16 peak (989.4 TFLOPS; the paper rounds DFModel's 1.837 GHz to 993 TFLOPS).
    clock_hz=_clock(PRESETS["h100"].peak_flops[compute_pb2.BF16], 528, 32, 16),
    sram_bytes=parse_bytes("113MiB"),
    dram_bandwidth=PRESETS["h100"].memory_bandwidth,
    dram_capacity=PRESETS["h100"].memory_capacity,
    execution="kernel_by_kernel",
    source="DFModel Table V (993 TFLOPS, 113 MB on chip) and its repository's GPU setup (528 cores, 118,489,088 "
    "bytes SRAM); 528 tensor cores of 512 dense bf16 MACs a clock; peak, HBM3 bandwidth and capacity of the h100 "
    "preset",
)

_TPUV4 = DataflowChip(
    name="tpuv4",
    tiles=8,
    lanes=128,
    stages=128,
    clock_hz=_clock(PRESETS["tpuv4"].peak_flops[compute_pb2.BF16], 8, 128, 128),
    sram_bytes=parse_bytes("160MiB"),
    dram_bandwidth=PRESETS["tpuv4"].memory_bandwidth,
    dram_capacity=PRESETS["tpuv4"].memory_capacity,
    execution="kernel_by_kernel",
    source="DFModel Table V (275 TFLOPS, 160 MB on chip: 128 MiB CMEM and 32 MiB VMEM); eight 128 x 128 MXUs; peak "
    "and HBM of the tpuv4 preset",
)

_SN30 = DataflowChip(
    name="sn30",
    tiles=1280,
    lanes=32,
    stages=6,
    clock_hz=1.25e9,
    sram_bytes=parse_bytes("640MiB"),
    dram_bandwidth=MEMORIES["ddr4"].bandwidth,
    dram_capacity=MEMORIES["ddr4"].capacity,
    execution="dataflow",
    source="DFModel Table V (614 TFLOPS, 640 MB) and its repository's SN30 setup: 1,280 cores of 32 x 6 at 1.25 GHz, "
    "671,088,640 bytes SRAM (614.4 TFLOPS); DDR4 per Sec. VI.C",
)

_SN10 = replace(
    _SN30,
    name="sn10",
    tiles=640,
    sram_bytes=parse_bytes("320MiB"),
    source="DFModel Sec. VII: 307.2 TFLOPS, 320 MB SRAM, DDR at 200 GB/s (PCIe at 25 GB/s between chips): half an "
    "SN30, 640 cores of 32 x 6 at 1.25 GHz",
)

_WSE2 = DataflowChip(
    name="wse2",
    tiles=853_776,
    lanes=4,
    stages=1,
    clock_hz=1.1e9,
    sram_bytes=41_964_011_520,
    dram_bandwidth=MEMORIES["ddr4"].bandwidth,
    dram_capacity=MEMORIES["ddr4"].capacity,
    execution="dataflow",
    source="DFModel Table V (7500 TFLOPS, 40 GB) and its repository's WSE-2 setup: 853,776 cores of 4 x 1 at "
    "1.1 GHz (7.5 PFLOPS), 41,964,011,520 bytes SRAM; DDR4 per Sec. VI.C",
)

DATAFLOW_CHIPS: Mapping[str, DataflowChip] = MappingProxyType(
    {chip.name: chip for chip in (_H100, _TPUV4, _SN30, _SN10, _WSE2)}
)
"""The preset chips by name: ``h100``, ``tpuv4``, ``sn30``, ``sn10``, ``wse2``."""

_KEYS = tuple(f.name for f in fields(DataflowChip) if f.name != "name")


def dataflow_chip(name: str, memory: str | None = None, **overrides: object) -> DataflowChip:
    """The preset chip ``name`` with DRAM ``memory`` (``ddr4`` or ``hbm3``; None: its own) and ``overrides``
    replacing its fields key by key; ValueError naming what is unknown or invalid."""
    chip = DATAFLOW_CHIPS.get(name.lower())
    if chip is None:
        raise ValueError(f"unknown dataflow chip {name!r}: the presets are {', '.join(DATAFLOW_CHIPS)}")
    unknown = sorted(set(overrides) - set(_KEYS))
    if unknown:
        raise ValueError(f"dataflow chip {name!r}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})")
    if memory is not None:
        if memory not in MEMORIES:
            raise ValueError(f"dataflow chip {name!r}: unknown memory {memory!r} (known: {', '.join(MEMORIES)})")
        chip = replace(chip, dram_bandwidth=MEMORIES[memory].bandwidth, dram_capacity=MEMORIES[memory].capacity)
    return replace(chip, **overrides)  # type: ignore[arg-type]
