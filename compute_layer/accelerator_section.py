"""``compute.device`` as a mapping for the ``timeloop`` backend: a Timeloop-style accelerator described in the study.

A ``preset`` (one of the model's, or any ``systolic-<R>x<C>-<os|ws|is>``) that the other keys override one by one:
the PE array (``pe_rows``, ``pe_cols``), the systolic ``dataflow``, the ``clock``, the energy of a MAC and, level by
level (by the preset's level names), any storage level's capacity, per-operand buffers, bandwidths and energies::

    device: {preset: systolic-32x32-os, pe_rows: 64, levels: {sram: {partitions: {weights: 131072}}}}
    device: {preset: gemmini, clock: 1GHz, levels: {scratchpad: {words: 524288}, dram: {read_bandwidth: 32}}}
    device: {preset: systolic-32x32-ws, dram_words_per_cycle: 10}     # SCALE-Sim's USER bandwidth mode
    device: {preset: zigzag-tpu-like, zigzag_compat: false}            # the model's own schedule
    device: {preset: gemmini, levels: {dram: {shared_bandwidth: 16}, accumulator: {operand_read_pj: {outputs: 5}}}}

Units are the model's (:mod:`stratasim.compute_layer.timeloop.accelerator`): words, words per cycle for the whole
level, pJ per word access. The accelerator is built and checked by the model itself, so a combination it refuses
(a ``dataflow`` on a preset whose unrolling is fixed otherwise, say) is reported with the model's own reason.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from stratasim.compute_layer.device_section import described_source
from stratasim.compute_layer.timeloop.accelerator import Accelerator, StorageLevel, accelerator
from stratasim.kernel.errors import BackendError
from stratasim.kernel.schema import Section, quantity, written
from stratasim.kernel.units import no_unit

__all__ = ["AcceleratorSection", "LevelSection", "describes_accelerator"]

_HERTZ = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[kMG]?Hz)?\s*$")
_SCALE = {"Hz": 1, "kHz": 10**3, "MHz": 10**6, "GHz": 10**9}


def _hertz(value: object) -> object:
    """``700MHz`` or ``1.2GHz`` as whole hertz; a bare number is refused, suggesting a unit; anything else is left
    for the int check."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(no_unit(value, "700MHz or 1GHz", "Hz"))
    if isinstance(value, str):
        match = _HERTZ.match(value)
        if match is None:
            raise ValueError(f"cannot read {value!r} as a clock; write it like '700MHz' or '1GHz'")
        if match["unit"] is None:
            raise ValueError(no_unit(value, "700MHz or 1GHz", "Hz"))
        return round(float(match["num"]) * _SCALE[match["unit"]])
    return value


Words = Annotated[int, Field(gt=0)]
Picojoules = Annotated[float, Field(ge=0)]
Operand = Literal["inputs", "weights", "outputs"]


class LevelSection(Section):
    """``compute.device.levels.<name>``: what the study changes of one of the preset's storage levels — ``words``
    (the bound on what it keeps), ``partitions`` (bounds per operand), bandwidths in words per cycle and energies
    in pJ per word."""

    words: Words | None = None
    """Words the level keeps."""
    partitions: dict[Operand, Words] | None = None
    """Words the level keeps of each operand (``inputs``, ``weights``, ``outputs``)."""
    read_bandwidth: Words | None = None
    """Words read per cycle."""
    write_bandwidth: Words | None = None
    """Words written per cycle."""
    read_pj: Picojoules | None = None
    """Energy of a word read, in pJ."""
    write_pj: Picojoules | None = None
    """Energy of a word written, in pJ."""
    shared_bandwidth: Words | None = None
    """Words read and written per cycle together, through one read-write port."""
    operand_read_pj: dict[Operand, Picojoules] | None = None
    """Energy of a word read, in pJ, for the operands priced apart from ``read_pj``."""
    operand_write_pj: dict[Operand, Picojoules] | None = None
    """Energy of a word written, in pJ, for the operands priced apart from ``write_pj``."""

    def applied(self, level: StorageLevel) -> StorageLevel:
        """``level`` with this section's keys in its own's place (``partitions`` and per-operand prices operand by
        operand)."""
        by_operand = ("partitions", "operand_read_pj", "operand_write_pj")
        changes = {key: getattr(self, key) for key in self.model_fields_set if key not in by_operand}
        for key in by_operand:
            changes[key] = {**getattr(level, key), **{str(o): v for o, v in (getattr(self, key) or {}).items()}}
        return dataclasses.replace(level, **changes)


class AcceleratorSection(Section):
    """``compute.device`` described for the ``timeloop`` backend: a ``preset`` overridden key by key."""

    preset: str
    """The accelerator preset the other keys override (``systolic-32x32-os``...)."""
    name: str | None = Field(None, min_length=1)
    """The accelerator's name in reports."""
    pe_rows: Words | None = None
    """Rows of the PE array."""
    pe_cols: Words | None = None
    """Columns of the PE array."""
    dataflow: Literal["os", "ws", "is"] | None = None
    """What stays in the PEs: outputs (``os``), weights (``ws``) or inputs (``is``)."""
    clock: Annotated[int, BeforeValidator(_hertz), Field(gt=0), quantity("frequency", "700MHz"), written("Hz")] | None = None
    """Clock frequency."""
    mac_pj: Picojoules | None = None
    """Energy of a multiply-accumulate, in pJ."""
    dram_words_per_cycle: Words | None = None
    """SCALE-Sim's user bandwidth (its ``Bandwidth``): words per cycle of each SRAM's own DRAM port, so that memory
    stalls appear (systolic-* presets only; unset: memory never stalls)."""
    zigzag_compat: bool | None = None
    """Cost ZigZag's schedule rather than the model's own: loops allocated bottom-up as its LOMA mapper does, one
    systolic fill and drain per operator, one-time transfers before or after compute unless DRAM is idle enough."""
    levels: dict[str, LevelSection] | None = None
    """Changes to the preset's storage levels, by level name."""
    source: str | None = None
    """Where the figures come from."""

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, name: str) -> str:
        try:
            accelerator(name)
        except BackendError as exc:
            raise ValueError(str(exc)) from None  # it lists the presets
        return name

    @field_validator("levels")
    @classmethod
    def _known_levels(cls, levels: dict[str, LevelSection] | None, info: ValidationInfo) -> dict[str, LevelSection] | None:
        preset = info.data.get("preset")  # absent when it failed its own check
        if preset is None or levels is None:
            return levels
        names = [level.name for level in accelerator(preset).levels]
        unknown = sorted(set(levels) - set(names))
        if unknown:
            raise ValueError(f"{preset} has no level {unknown[0]!r}; its levels are {', '.join(names)}")
        return levels

    @model_validator(mode="after")
    def _buildable(self) -> AcceleratorSection:
        self.accelerator()  # the model's own checks: a ValueError naming what it refuses
        return self

    def accelerator(self) -> Accelerator:
        """The accelerator described: the preset with this section's keys in place of its own."""
        base = accelerator(self.preset)
        source = described_source(self, base.source)
        changed = self.levels or {}
        levels = tuple(changed[level.name].applied(level) if level.name in changed else level for level in base.levels)
        return dataclasses.replace(
            base,
            name=self.name or base.name,
            rows=self.pe_rows or base.rows,
            cols=self.pe_cols or base.cols,
            dataflow=self.dataflow or base.dataflow,
            clock_hz=self.clock or base.clock_hz,
            mac_pj=base.mac_pj if self.mac_pj is None else self.mac_pj,
            dram_bandwidth=self.dram_words_per_cycle or base.dram_bandwidth,
            zigzag_compat=base.zigzag_compat if self.zigzag_compat is None else self.zigzag_compat,
            levels=levels,
            source=source,
        )



def describes_accelerator(value: dict[object, object]) -> bool:
    """Whether a ``compute.device`` mapping describes a Timeloop-style accelerator: it starts from one of the
    model's presets, or sets a key only an accelerator has."""
    preset = value.get("preset")
    if isinstance(preset, str):
        try:
            accelerator(preset)
        except BackendError:
            return False
        return True
    return any(key in _ACCELERATOR_ONLY for key in value)


_ACCELERATOR_ONLY = frozenset({"pe_rows", "pe_cols", "dataflow", "clock", "mac_pj", "levels", "dram_words_per_cycle"})
