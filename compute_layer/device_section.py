"""``compute.device`` as a mapping: a roofline device described in the study rather than named.

Either a ``preset`` that the other keys override one by one (``peak`` dtype by dtype, ``sram`` and ``tiling`` key
by key), or a complete description without one (``name``, ``peak``, ``memory_bandwidth``, ``memory_capacity``
required)::

    device: {preset: h100, memory_bandwidth: 4TB/s, peak: {bf16: 1000TFLOPS}, usd_per_hour: 2.5}
    device: {name: mychip, peak: {bf16: 400TFLOPS}, memory_bandwidth: 2TB/s, memory_capacity: 64GiB, tdp: 500W}

(``file: chip.yaml``, a file holding such a mapping, is read by the study file before this schema sees it.)
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Generic, Self, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from stratasim.compute_layer.device_presets import PRESETS, device
from stratasim.compute_layer.devices import Device, Sram, Tiling
from stratasim.kernel.errors import BackendError, did_you_mean
from stratasim.kernel.operators import parse_dtype
from stratasim.kernel.plausible import Usual
from stratasim.kernel.schema import Bandwidth, Bytes, Flops, MemoryBandwidth, MemoryCapacity, Section, quantity, written
from stratasim.kernel.units import no_unit

__all__ = [
    "BuiltByItsModel",
    "DeviceSection",
    "PeakTable",
    "described_source",
    "names_device_preset",
    "SramSection",
    "TilingSection",
]


def _known_dtypes(peak: dict[str, float]) -> dict[str, float]:
    for name in peak:
        parse_dtype(name)  # ValueError naming the dtypes there are
    return peak


PeakTable = Annotated[
    dict[str, Annotated[Flops, Usual("throughput", "a device's peak", 10**9, 10**18)]], AfterValidator(_known_dtypes)
]
"""Peak throughput by dtype name (``bf16: 989TFLOPS``), every name one an operator can have."""

Built = TypeVar("Built")


class BuiltByItsModel(Section, Generic[Built]):
    """A described device its model builds and checks: validation builds it once, so what the model refuses is a
    validation error with the model's own reason. Subclasses say how to build it by overriding :meth:`built`."""

    @model_validator(mode="after")
    def _buildable(self) -> Self:
        self.built()
        return self

    def built(self) -> Built:
        """The device described, as its model builds it (a ValueError naming what the model refuses)."""
        raise NotImplementedError


def described_source(section: Section, base_source: str | None) -> str:
    """Where a described device's figures come from: the section's own ``source``, else its preset's, naming the
    keys the study overrode, else "described in the study"."""
    own: str | None = getattr(section, "source", None)
    if own is not None:
        return own
    if base_source is None:
        return "described in the study"
    overridden = sorted(key for key in section.model_fields_set if key not in ("preset", "source"))
    return f"{base_source}; the study overrides {', '.join(overridden)}" if overridden else base_source


_WATTS = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>kW|W)?\s*$")


def _watts(value: object) -> object:
    """``700W`` or ``1.2kW`` as watts; a bare number is refused, suggesting a unit; anything else is left for the
    float check."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(no_unit(value, "700W or 1.2kW", "W"))
    if isinstance(value, str):
        match = _WATTS.match(value)
        if match is None:
            raise ValueError(f"cannot read {value!r} as a power; write it like '700W' or '1.2kW'")
        if match["unit"] is None:
            raise ValueError(no_unit(value, "700W or 1.2kW", "W"))
        return float(match["num"]) * (1000 if match["unit"] == "kW" else 1)
    return value


Watts = Annotated[float, BeforeValidator(_watts), Field(ge=0), quantity("power", "700W"), written("W")]
"""A power in watts (accepts ``700W``, ``1.2kW``)."""

Usd = Annotated[float, Field(ge=0)]


class SramSection(Section):
    """``compute.device.sram``: the on-chip level — ``capacity`` and, when known, ``bandwidth``."""

    capacity: Annotated[Bytes, Usual("size", "an on-chip SRAM", 2**16, 2**32), Field(gt=0)] | None = None
    """On-chip memory capacity."""
    bandwidth: Annotated[Bandwidth, Usual("bandwidth", "an on-chip SRAM", 10**11, 10**16)] | None = None
    """On-chip memory bandwidth, when known."""


class TilingSection(Section):
    """``compute.device.tiling``: the output tile each compute unit works on and how many units run at once."""

    tile_m: int | None = Field(None, gt=0)
    """Rows of the output tile each compute unit works on."""
    tile_n: int | None = Field(None, gt=0)
    """Columns of the output tile each compute unit works on."""
    tile_k: int | None = Field(None, gt=0)
    """Depth of the reduction step of a tile."""
    units: int | None = Field(None, gt=0)
    """Compute units running tiles at once."""


class DeviceSection(Section):
    """``compute.device`` described: a ``preset`` overridden key by key, or a whole device.

    ``peak`` maps dtypes (``bf16``...) to dense peak throughputs; ``tdp`` is board power (``700W``);
    ``price_usd`` buys one device and ``usd_per_hour`` rents one, in US dollars.
    """

    preset: str | None = None
    """The preset the other keys override (none: a whole device is described)."""
    name: str | None = Field(None, min_length=1)
    """The device's name in reports (required without a preset)."""
    peak: PeakTable | None = None
    """Dense peak throughput by data type (``bf16``, ``fp8``...)."""
    memory_bandwidth: MemoryBandwidth | None = None
    """DRAM (HBM) bandwidth."""
    memory_capacity: Annotated[MemoryCapacity, Field(gt=0)] | None = None
    """DRAM (HBM) capacity."""
    sram: SramSection | None = None
    """The on-chip memory level."""
    tiling: TilingSection | None = None
    """How GEMMs are tiled over the compute units."""
    tdp: Watts | None = None
    """Board power."""
    price_usd: Usd | None = None
    """Price of one device, in US dollars."""
    usd_per_hour: Usd | None = None
    """Rent of one device, in US dollars per hour (default: the preset's dated cloud rate, where it has one)."""
    source: str | None = None
    """Where the figures come from."""
    calibration_from: str | None = None
    """A preset whose fitted efficiency model a whole device described without one takes (its compute and memory
    efficiencies, kernel floor and, with its tiling unless the description gives one, tile and wave quantization):
    a device of the same architecture priced like its calibrated sibling rather than at datasheet speed. A device
    from a ``preset`` has that preset's already."""

    @field_validator("preset", "calibration_from")
    @classmethod
    def _known_preset(cls, name: str | None) -> str | None:
        if name is not None:
            try:
                device(name)
            except BackendError:
                hint = did_you_mean(name.strip().lower(), PRESETS)
                raise ValueError(
                    f"unknown preset {name!r}; {hint}expected one of {', '.join(sorted(PRESETS))}"
                ) from None
        return name

    @model_validator(mode="after")
    def _complete(self) -> DeviceSection:
        if self.preset is None:
            missing = [
                key for key in ("name", "peak", "memory_bandwidth", "memory_capacity") if getattr(self, key) is None
            ]
            if missing:
                raise ValueError(f"a device without a preset needs {', '.join(missing)} (or start from 'preset: NAME')")
        elif self.calibration_from is not None:
            raise ValueError(
                f"calibration_from: a device from 'preset: {self.preset}' is priced with that preset's efficiency "
                "model already; give calibration_from to a whole device described without a preset"
            )
        self.device()  # a sram or tiling a description leaves incomplete is reported here
        return self

    def device(self) -> Device:
        """The device described: the preset with this section's keys in place of its own, or this section alone."""
        base = None if self.preset is None else PRESETS[self.preset.strip().lower()]
        model = base or (None if self.calibration_from is None else PRESETS[self.calibration_from.strip().lower()])
        peak = {**(base.peak_flops if base else {}), **{parse_dtype(k): v for k, v in (self.peak or {}).items()}}
        source = described_source(self, base.source if base else None)
        return Device(
            name=self.name or (base.name if base else ""),
            peak_flops=peak,
            memory_bandwidth=_pick(self.memory_bandwidth, base and base.memory_bandwidth),
            memory_capacity=_pick(self.memory_capacity, base and base.memory_capacity),
            tdp_w=self.tdp if self.tdp is not None else (base.tdp_w if base else None),
            source=source,
            sram=_sram(self.sram, base.sram if base else None),
            tiling=_tiling(self.tiling, model.tiling if model else None),
            price_usd=self.price_usd if self.price_usd is not None else (base.price_usd if base else None),
            usd_per_hour=self.usd_per_hour if self.usd_per_hour is not None else (base.usd_per_hour if base else None),
            comm=base.comm if base else None,  # a description has no keys for it: its preset's SMs and links
            **(_efficiency_model(model) if model else {}),
        )


def names_device_preset(value: dict[object, object]) -> bool:
    """Whether a ``compute.device`` mapping starts from one of the roofline's presets."""
    preset = value.get("preset")
    return isinstance(preset, str) and preset.strip().lower() in PRESETS


def _efficiency_model(base: Device) -> dict[str, Any]:
    """The preset's fitted efficiency model, which a device described from it keeps: its compute units and
    software are the preset's, whatever else the study changes."""
    return {
        "compute_efficiency": base.compute_efficiency,
        "memory_efficiency": base.memory_efficiency,
        "launch_overhead_ps": base.launch_overhead_ps,
        "size_efficiency": base.size_efficiency,
        "calibration_source": base.calibration_source and f"{base.calibration_source} (the {base.name} preset's model)",
    }


def _pick(value: Any, fallback: Any) -> Any:
    return value if value is not None else fallback


def _sram(section: SramSection | None, base: Sram | None) -> Sram | None:
    """The preset's level with the section's keys in place; a new level needs its capacity."""
    if section is None:
        return base
    capacity = _pick(section.capacity, base.capacity if base else None)
    if capacity is None:
        raise ValueError("sram.capacity: required for an on-chip level the preset does not have")
    return Sram(capacity=capacity, bandwidth=_pick(section.bandwidth, base.bandwidth if base else None))


def _tiling(section: TilingSection | None, base: Tiling | None) -> Tiling | None:
    """The preset's tiling with the section's keys in place; a new tiling needs tile_m, tile_n and units."""
    if section is None:
        return base
    values = {
        key: _pick(getattr(section, key), getattr(base, key) if base else None) for key in ("tile_m", "tile_n", "units")
    }
    missing = [key for key, value in values.items() if value is None]
    if missing:
        raise ValueError(f"tiling needs {', '.join(missing)} (the preset has no tiling to start from)")
    return Tiling(tile_k=_pick(section.tile_k, base.tile_k if base else 1), **values)
