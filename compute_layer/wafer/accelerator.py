"""Tiled / wafer-scale accelerators as PALM models them, and PALM's wafer of Table VI as a preset.

PALM (``shared/seeds/000``) models a two-level tiled accelerator (section IV, Fig. 1(c)): a 2-D mesh of *tiles*
(dies), each a 2-D mesh of *cores* (Table VI's "intra-tiles") with their own compute and SRAM, joined by a
NoC. DRAM sits at the edge and is shared: Table VI gives "Edge shared DRAM per tile", so each tile owns that
bandwidth and its cores reach it over the tile's NoC (PALM's released code attaches the controllers to each
tile's west and east columns). Here every core row of a tile has one DRAM channel at its west end and, when
the row has two or more cores, one at its east end; the tile's DRAM bandwidth is split evenly over them.

Units: FLOP/s, bytes, bytes/s and picoseconds, all integers so the backend's arithmetic stays exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stratasim.compute_layer.catalog import by_name, find, unknown_device
from stratasim.compute_layer.device_bounds import MAX_CORES, MAX_ON_CHIP_BYTES, beyond
from stratasim.kernel.operators import DType, dtype_name
from stratasim.v1 import compute_pb2

__all__ = ["Wafer", "WaferEnergy", "HOROWITZ_45NM", "PRESETS", "PALM_WAFER", "catalog", "palm_wafer", "wafer"]


@dataclass(frozen=True)
class WaferEnergy:
    """Energy per unit of work, in picojoules: per FLOP, per byte moved through SRAM and DRAM, per byte per NoC
    hop. PALM models no energy; these make the backend's ``energy_pj`` a first-order estimate, not a figure
    the paper validates."""

    flop_pj: float
    sram_byte_pj: float
    dram_byte_pj: float
    noc_byte_hop_pj: float

    def __post_init__(self) -> None:
        negative = [name for name, value in vars(self).items() if not value >= 0]
        if negative:
            raise ValueError(f"wafer energy: {', '.join(negative)} cannot be negative")


HOROWITZ_45NM = WaferEnergy(flop_pj=0.75, sram_byte_pj=100 / 8, dram_byte_pj=1300 / 8, noc_byte_hop_pj=1.0)
"""Horowitz, 'Computing's energy problem', ISSCC 2014 (45 nm): an FP16 multiply (1.1 pJ) and add (0.4 pJ) are
two FLOPs; a 64-bit read of a 1 MB SRAM 100 pJ; of DRAM 1.3-2.6 nJ (the lower end). A NoC hop is taken as about
1 mm of wire at 0.1 pJ/bit/mm plus its router (1 pJ a byte) — an assumption: neither PALM nor Horowitz gives it.
The same source as the ``timeloop`` presets' energies, so backends compare on one footing."""


def _beyond_any_device(wafer: Wafer) -> list[str]:
    """What of ``wafer`` (its sizes valid) is larger than any real device (:mod:`..device_bounds`)."""
    found = [
        beyond("tiles x cores", wafer.core_count, MAX_CORES, "cores"),
        beyond("sram_bytes", wafer.sram_bytes, MAX_ON_CHIP_BYTES, "bytes"),
    ]
    return [problem for problem in found if problem is not None]


@dataclass(frozen=True)
class Wafer:
    """A tiled accelerator: ``tiles`` (x, y) tiles of ``cores`` (x, y) cores on one 2-D mesh NoC.

    ``peak_flops`` pairs each supported dtype with one *tile's* peak in FLOP/s; ``sram_bytes`` and
    ``dram_bandwidth`` are per tile too (a core gets an equal share, PALM's "virtual tile" assumption of
    section IV.A that every core of a group costs the same). ``link_bandwidth`` is a NoC link's bandwidth
    inside a tile, in bytes/s each way. ``dram_latency_ps`` is PALM's Response_Time (Eq. 4) and
    ``link_latency_ps`` its per-hop Link_Time (Eq. 2). ``energy`` prices the work (see :class:`WaferEnergy`).
    """

    name: str
    tiles: tuple[int, int]
    cores: tuple[int, int]
    peak_flops: tuple[tuple[DType, int], ...]
    sram_bytes: int
    dram_bandwidth: int
    link_bandwidth: int
    dram_latency_ps: int = 0
    link_latency_ps: int = 0
    source: str = ""
    energy: WaferEnergy = HOROWITZ_45NM

    def __post_init__(self) -> None:
        pairs = {"tiles": self.tiles, "cores": self.cores}
        positive = {
            "sram_bytes": self.sram_bytes,
            "dram_bandwidth": self.dram_bandwidth,
            "link_bandwidth": self.link_bandwidth,
        }
        latencies = {"dram_latency_ps": self.dram_latency_ps, "link_latency_ps": self.link_latency_ps}
        problems = [
            f"{label} must be two positive integers, got {pair!r}"
            for label, pair in pairs.items()
            if not _positive_pair(pair)
        ]
        problems += [
            f"{label} must be a positive integer, got {value!r}"
            for label, value in positive.items()
            if not _positive(value)
        ]
        problems += [
            f"{label} must be a non-negative integer, got {value!r}"
            for label, value in latencies.items()
            if not _positive(value, least=0)
        ]
        if not self.peak_flops or any(not _positive(peak) for _, peak in self.peak_flops):
            problems.append(f"peak_flops must pair dtypes with positive FLOP/s, got {self.peak_flops!r}")
        if not problems:
            problems += _beyond_any_device(self)
        if not problems and self.cores_per_tile > self.sram_bytes:
            problems.append(f"sram_bytes {self.sram_bytes} gives its {self.cores_per_tile} cores no byte each")
        if problems:
            raise ValueError(f"wafer {self.name!r}: {'; '.join(problems)}")

    @property
    def cores_per_tile(self) -> int:
        """Cores in one tile."""
        return self.cores[0] * self.cores[1]

    @property
    def tile_count(self) -> int:
        """Tiles on the wafer."""
        return self.tiles[0] * self.tiles[1]

    @property
    def core_count(self) -> int:
        """Cores on the wafer: the largest group an operator can be split over."""
        return self.tile_count * self.cores_per_tile

    @property
    def core_sram_bytes(self) -> int:
        """One core's SRAM: Algorithm 1's S_Cap (a tile's SRAM split evenly, rounded down)."""
        return self.sram_bytes // self.cores_per_tile

    @property
    def channels_per_tile(self) -> int:
        """DRAM channels of one tile: one at each end of every core row (one per row if rows have one core)."""
        return self.cores[1] * min(self.cores[0], 2)

    def core_peak(self, dtype: DType) -> tuple[int, int] | None:
        """One core's peak for ``dtype`` as a fraction (FLOP/s numerator, denominator), or None if unsupported."""
        for supported, peak in self.peak_flops:
            if supported == dtype:
                return peak, self.cores_per_tile
        return None

    def supported_dtypes(self) -> list[str]:
        """Names of the dtypes the cores compute in, for messages."""
        return [dtype_name(dtype) for dtype, _ in self.peak_flops]


def _positive(value: object, least: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _positive_pair(pair: object) -> bool:
    return isinstance(pair, tuple) and len(pair) == 2 and all(_positive(value) for value in pair)


_TERA = 10**12
_GIGA = 10**9


def palm_wafer(tiles_x: int = 5, tiles_y: int = 4) -> Wafer:
    """PALM's wafer (Table VI, section V.B) with ``tiles_x`` x ``tiles_y`` tiles (the paper's is 5 x 4).

    Per tile: 256 TFLOP/s at FP16 (BF16 taken at the same rate: both are 16-bit multiplies; Table VI names only
    FP16), 60 MB SRAM (read as MiB), 4 x 4 cores, 256 GB/s of edge-shared DRAM, 1024 GB/s intra-tile NoC links.
    Table VI's inter-tile links (256 GB/s) carry traffic between tiles, which no single operator sends here; a
    study gives them to the network layer. Table VI gives no latencies, so both are zero.
    """
    name = "palm-wafer" if (tiles_x, tiles_y) == (5, 4) else f"palm-wafer-{tiles_x}x{tiles_y}"
    return Wafer(
        name=name,
        tiles=(tiles_x, tiles_y),
        cores=(4, 4),
        peak_flops=((compute_pb2.FP16, 256 * _TERA), (compute_pb2.BF16, 256 * _TERA)),
        sram_bytes=60 * 2**20,
        dram_bandwidth=256 * _GIGA,
        link_bandwidth=1024 * _GIGA,
        source="PALM (Fang et al.), Table VI: wafer-scale configuration, 5x4 tiles of 4x4 cores, 2-D mesh",
    )


def catalog(wafers: Iterable[Wafer]) -> Mapping[str, Wafer]:
    """A read-only ``{lower-case name: wafer}``; ValueError when two share a name."""
    return by_name(wafers, "wafers")


PALM_WAFER = palm_wafer()
"""PALM's Table VI wafer: 5 x 4 tiles of 4 x 4 cores, 5120 TFLOP/s at FP16 in all."""

PRESETS: Mapping[str, Wafer] = catalog([PALM_WAFER, palm_wafer(1, 1)])
"""Preset wafers by name; any ``palm-wafer-<X>x<Y>`` (Table VI tiles, X x Y of them) is also accepted."""

_SIZED = re.compile(r"palm-wafer-(\d+)x(\d+)")


def wafer(name: str, wafers: Mapping[str, Wafer] | None = None) -> Wafer:
    """The wafer called ``name`` (case-insensitive), or Table VI tiles as ``palm-wafer-<X>x<Y>``.

    Raises :class:`~stratasim.kernel.errors.BackendError` listing the known names when there is none, and
    ValueError when a ``palm-wafer-<X>x<Y>`` name describes no wafer (a zero size).
    """
    table = PRESETS if wafers is None else wafers
    found = find(table, name)
    if found is not None:
        return found
    match = _SIZED.fullmatch(name.strip().lower())
    if match and wafers is None:
        return palm_wafer(int(match[1]), int(match[2]))
    raise unknown_device(name, table, "palm-wafer-<X>x<Y>" if wafers is None else "")
