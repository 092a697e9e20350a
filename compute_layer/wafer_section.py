"""``compute.device`` as a mapping for the ``wafer`` backend: a PALM-style tiled / wafer-scale accelerator described
in the study, its Table-VI parameters as a ``preset`` (``palm-wafer``, or Table VI tiles as ``palm-wafer-<X>x<Y>``)
that the other keys override one by one, or whole without one (:class:`WaferDescription`: ``name``, ``tiles``,
``cores``, ``peak``, ``sram``, ``dram_bandwidth`` and ``link_bandwidth`` required; latencies default to zero, as
Table VI gives none, and ``energy`` to Horowitz's 45 nm figures, key by key)::

    device: {preset: palm-wafer, tiles: {x: 10}, dram_bandwidth: 128GB/s, peak: {fp16: 512TFLOPS}}
    device: {preset: palm-wafer-1x1, cores: {x: 8, y: 8}, sram: 120MiB, link_latency: 2ns, energy: {flop_pj: 0.5}}
    device: {name: mywafer, tiles: {x: 4, y: 4}, cores: {x: 4, y: 4}, peak: {fp16: 256TFLOPS}, sram: 60MiB,
             dram_bandwidth: 256GB/s, link_bandwidth: 1TB/s, link_latency: 1ns}

As in the model (:mod:`stratasim.compute_layer.wafer.accelerator`), ``peak`` (dtype by dtype), ``sram`` and
``dram_bandwidth`` are one *tile's*; ``link_bandwidth`` is one intra-tile NoC link's, each way; ``dram_latency`` and
``link_latency`` are PALM's Response_Time and per-hop Link_Time; ``energy`` (key by key) is in pJ per FLOP, per
byte of SRAM and DRAM, per byte per NoC hop. The wafer is built and checked by the model itself, so what it refuses
(an SRAM smaller than one byte per core, say) is reported with the model's own reason.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from pydantic import Field, field_validator

from stratasim.compute_layer.device_section import BuiltByItsModel, PeakTable, described_source
from stratasim.compute_layer.wafer.accelerator import HOROWITZ_45NM, Wafer, WaferEnergy, wafer
from stratasim.kernel.errors import BackendError
from stratasim.kernel.operators import DType, parse_dtype
from stratasim.kernel.schema import Bandwidth, Bytes, Latency, Section

__all__ = ["EnergySection", "MeshSection", "MeshDescription", "WaferDescription", "WaferSection", "describes_wafer"]

Picojoules = Annotated[float, Field(ge=0)]


class MeshSection(Section):
    """``compute.device.tiles`` or ``.cores``: what the study changes of a mesh's extent, ``x`` and ``y``."""

    x: int | None = Field(None, gt=0)
    """Along x (columns); absent: the preset's."""
    y: int | None = Field(None, gt=0)
    """Along y (rows); absent: the preset's."""

    def applied(self, mesh: tuple[int, int]) -> tuple[int, int]:
        """``mesh`` with this section's extents in place of its own."""
        return (mesh[0] if self.x is None else self.x, mesh[1] if self.y is None else self.y)


class MeshDescription(MeshSection):
    """``compute.device.tiles`` or ``.cores`` of a whole wafer: a mesh's extent, ``x`` and ``y``, both given."""

    x: int = Field(gt=0)
    """Along x (columns)."""
    y: int = Field(gt=0)
    """Along y (rows)."""

    def mesh(self) -> tuple[int, int]:
        """The mesh as (x, y)."""
        return (self.x, self.y)


class EnergySection(Section):
    """``compute.device.energy``: what the study changes of the wafer's energies, in pJ."""

    flop_pj: Picojoules | None = None
    """Energy of one FLOP, in pJ."""
    sram_byte_pj: Picojoules | None = None
    """Energy of a byte read or written in a core's SRAM, in pJ."""
    dram_byte_pj: Picojoules | None = None
    """Energy of a byte moved to or from the edge DRAM, in pJ."""
    noc_byte_hop_pj: Picojoules | None = None
    """Energy of a byte crossing one NoC hop, in pJ."""

    def applied(self, energy: WaferEnergy) -> WaferEnergy:
        """``energy`` with this section's keys in place of its own."""
        return dataclasses.replace(energy, **{key: getattr(self, key) for key in self.model_fields_set})


class _WaferKeys(BuiltByItsModel[Wafer]):
    """The keys of both forms of a described wafer (a whole one requires some of them); subclasses build the wafer
    by overriding :meth:`built`."""

    name: str | None = Field(None, min_length=1)
    """The wafer's name in reports (default: the preset's)."""
    tiles: MeshSection | None = None
    """Tiles (dies) on the wafer's mesh, ``{x, y}``."""
    cores: MeshSection | None = None
    """Cores in each tile's mesh, ``{x, y}``."""
    peak: PeakTable | None = None
    """One tile's peak throughput per dtype (``fp16: 512TFLOPS``)."""
    sram: Annotated[Bytes, Field(gt=0)] | None = None
    """One tile's SRAM, shared evenly by its cores."""
    dram_bandwidth: Bandwidth | None = None
    """One tile's edge DRAM bandwidth (Table VI's "edge shared DRAM per tile")."""
    link_bandwidth: Bandwidth | None = None
    """One intra-tile NoC link's bandwidth, each way."""
    dram_latency: Annotated[Latency, Field(ge=0)] | None = None
    """DRAM response time (PALM's Response_Time, Eq. 4)."""
    link_latency: Annotated[Latency, Field(ge=0)] | None = None
    """Time per NoC hop (PALM's Link_Time, Eq. 2)."""
    energy: EnergySection | None = None
    """Energy per unit of work, each key on its own (default: the preset's, else Horowitz 45 nm)."""
    source: str | None = None
    """Where the figures come from, for the report."""

    def wafer(self) -> Wafer:
        """The wafer described."""
        return self.built()


def _peaks(base: tuple[tuple[DType, int], ...], peak: dict[str, float] | None) -> tuple[tuple[DType, int], ...]:
    """``base``'s peaks with ``peak``'s in place, dtype by dtype, in whole FLOP/s."""
    peaks = dict(base)
    peaks.update({parse_dtype(dtype): round(flops) for dtype, flops in (peak or {}).items()})
    return tuple(peaks.items())


class WaferDescription(_WaferKeys):
    """``compute.device`` for the ``wafer`` backend, a whole wafer without a preset: every Table-VI parameter."""

    name: str = Field(min_length=1)
    """The wafer's name in reports."""
    tiles: MeshDescription
    """Tiles (dies) on the wafer's mesh, ``{x, y}``."""
    cores: MeshDescription
    """Cores in each tile's mesh, ``{x, y}``."""
    peak: PeakTable
    """One tile's peak throughput per dtype (``fp16: 256TFLOPS``)."""
    sram: Annotated[Bytes, Field(gt=0)]
    """One tile's SRAM, shared evenly by its cores."""
    dram_bandwidth: Bandwidth
    """One tile's edge DRAM bandwidth (Table VI's "edge shared DRAM per tile")."""
    link_bandwidth: Bandwidth
    """One intra-tile NoC link's bandwidth, each way."""

    def built(self) -> Wafer:
        """The wafer described."""
        return Wafer(
            name=self.name,
            tiles=self.tiles.mesh(),
            cores=self.cores.mesh(),
            peak_flops=_peaks((), self.peak),
            sram_bytes=self.sram,
            dram_bandwidth=round(self.dram_bandwidth),
            link_bandwidth=round(self.link_bandwidth),
            dram_latency_ps=self.dram_latency or 0,
            link_latency_ps=self.link_latency or 0,
            source=self.source or "described in the study",
            energy=HOROWITZ_45NM if self.energy is None else self.energy.applied(HOROWITZ_45NM),
        )


class WaferSection(_WaferKeys):
    """``compute.device`` described for the ``wafer`` backend: a ``preset`` overridden key by key."""

    preset: str
    """The wafer to start from: ``palm-wafer`` (PALM's Table VI), ``palm-wafer-1x1`` or ``palm-wafer-<X>x<Y>``."""

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, name: str) -> str:
        try:
            wafer(name)
        except BackendError as exc:
            raise ValueError(str(exc)) from None  # it lists the presets
        return name

    def built(self) -> Wafer:
        """The wafer described: the preset with this section's keys in place of its own."""
        base = wafer(self.preset)
        source = described_source(self, base.source)
        return dataclasses.replace(
            base,
            name=self.name or base.name,
            tiles=base.tiles if self.tiles is None else self.tiles.applied(base.tiles),
            cores=base.cores if self.cores is None else self.cores.applied(base.cores),
            peak_flops=_peaks(base.peak_flops, self.peak),
            sram_bytes=base.sram_bytes if self.sram is None else self.sram,
            dram_bandwidth=base.dram_bandwidth if self.dram_bandwidth is None else round(self.dram_bandwidth),
            link_bandwidth=base.link_bandwidth if self.link_bandwidth is None else round(self.link_bandwidth),
            dram_latency_ps=base.dram_latency_ps if self.dram_latency is None else self.dram_latency,
            link_latency_ps=base.link_latency_ps if self.link_latency is None else self.link_latency,
            energy=base.energy if self.energy is None else self.energy.applied(base.energy),
            source=source,
        )


def describes_wafer(value: dict[object, object]) -> bool:
    """Whether a ``compute.device`` mapping describes a wafer: it starts from one of the model's presets (or a
    ``palm-wafer-<X>x<Y>`` name, even one the model then refuses), or sets a key only a wafer has."""
    preset = value.get("preset")
    if isinstance(preset, str):
        try:
            wafer(preset)
        except BackendError:
            return False
        except ValueError:
            return True
        return True
    return any(key in _WAFER_ONLY for key in value)


_WAFER_ONLY = frozenset(
    {"tiles", "cores", "dram_bandwidth", "link_bandwidth", "dram_latency", "link_latency", "energy"}
)
