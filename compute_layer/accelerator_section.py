"""``compute.device`` as a mapping for the ``timeloop`` backend: a Timeloop-style accelerator described in the study.

A whole accelerator (:class:`AcceleratorDescription`: ``name``, ``pe_rows``, ``pe_cols``, ``clock``, ``mac_pj`` and
its storage ``levels`` as a list, innermost first, the last the unbounded backing store), or a ``preset`` (one of
the model's, or any ``systolic-<R>x<C>-<os|ws|is>``) that the other keys override one by one:
the PE array (``pe_rows``, ``pe_cols``), the systolic ``dataflow``, the ``clock``, the energy of a MAC and, level by
level (by the preset's level names), any storage level's capacity, per-operand buffers, bandwidths and energies::

    device: {preset: systolic-32x32-os, pe_rows: 64, levels: {sram: {partitions: {weights: 131072}}}}
    device: {preset: gemmini, clock: 1GHz, levels: {scratchpad: {words: 524288}, dram: {read_bandwidth: 32}}}
    device: {preset: systolic-32x32-ws, dram_words_per_cycle: 10}     # SCALE-Sim's USER bandwidth mode
    device: {preset: zigzag-tpu-like, zigzag_compat: false}            # the model's own schedule
    device: {preset: gemmini, levels: {dram: {shared_bandwidth: 16}, accumulator: {operand_read_pj: {outputs: 5}}}}
    device:                                                            # a whole accelerator, no preset
      name: mychip
      pe_rows: 16
      pe_cols: 16
      dataflow: ws
      clock: 1GHz
      mac_pj: 0.23
      levels:
        - {name: registers, keeps: [inputs, weights, outputs], partitions: {inputs: 1, weights: 1, outputs: 1},
           read_pj: 0.23, write_pj: 0.23}
        - {name: sram, keeps: [inputs, weights, outputs], words: 262144, read_bandwidth: 64, write_bandwidth: 64,
           read_pj: 2.5, write_pj: 2.5}
        - {name: dram, keeps: [inputs, weights, outputs], read_bandwidth: 16, write_bandwidth: 16, read_pj: 162.5,
           write_pj: 162.5}

Units are the model's (:mod:`stratasim.compute_layer.timeloop.accelerator`): words, words per cycle for the whole
level, pJ per word access. The accelerator is built and checked by the model itself, so a combination it refuses
(a ``dataflow`` on a preset whose unrolling is fixed otherwise, say) is reported with the model's own reason.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from stratasim.compute_layer.device_section import BuiltByItsModel, described_source
from stratasim.compute_layer.timeloop.accelerator import Accelerator, StorageLevel
from stratasim.compute_layer.timeloop.accelerator_presets import accelerator
from stratasim.kernel.errors import BackendError
from stratasim.kernel.schema import Section, quantity, written
from stratasim.kernel.units import no_unit

__all__ = [
    "AcceleratorDescription",
    "AcceleratorSection",
    "LevelSection",
    "StorageLevelSection",
    "UnrollSection",
    "describes_accelerator",
]

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
Clock = Annotated[int, BeforeValidator(_hertz), Field(gt=0), quantity("frequency", "700MHz"), written("Hz")]
Dims = Annotated[str, Field(pattern=r"^[A-Z]+$")]
_Unroll = tuple[frozenset[str], frozenset[str]]


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


class StorageLevelSection(LevelSection):
    """``compute.device.levels[i]`` of a whole accelerator: one storage level in full — its ``name``, the operands it
    ``keeps``, its bounds (``words``, ``partitions``; none: unbounded, as the backing store must be), bandwidths in
    words per cycle (none: never the bottleneck) and energies in pJ per word."""

    name: str = Field(min_length=1)
    """The level's name in reports (``registers``, ``sram``, ``dram``...)."""
    keeps: list[Operand] = Field(min_length=1)
    """The operands it holds (``inputs``, ``weights``, ``outputs``)."""
    read_pj: Picojoules
    """Energy of a word read, in pJ."""
    write_pj: Picojoules
    """Energy of a word written, in pJ."""

    def level(self) -> StorageLevel:
        """The level described."""
        return StorageLevel(
            name=self.name,
            keeps=frozenset(self.keeps),
            words=self.words,
            partitions={str(operand): words for operand, words in (self.partitions or {}).items()},
            read_bandwidth=self.read_bandwidth,
            write_bandwidth=self.write_bandwidth,
            read_pj=self.read_pj,
            write_pj=self.write_pj,
            shared_bandwidth=self.shared_bandwidth,
            operand_read_pj={str(operand): pj for operand, pj in (self.operand_read_pj or {}).items()},
            operand_write_pj={str(operand): pj for operand, pj in (self.operand_write_pj or {}).items()},
        )


class UnrollSection(Section):
    """``compute.device.unrolls.<kind>``: the problem dimensions a non-systolic array may unroll on its rows and on
    its columns (``{rows: RCK, cols: PK}``: Eyeriss's row stationary for ``conv``)."""

    rows: Dims
    """Dimensions allowed on the array's rows, as letters (GEMM ``M K N``; convolution ``N K C P Q R S``)."""
    cols: Dims
    """Dimensions allowed on the array's columns, as letters."""


class _AcceleratorKeys(BuiltByItsModel[Accelerator]):
    """The keys of both forms of a described accelerator (a whole one requires some of them); subclasses build the
    accelerator by overriding :meth:`built`."""

    name: str | None = Field(None, min_length=1)
    """The accelerator's name in reports."""
    pe_rows: Words | None = None
    """Rows of the PE array."""
    pe_cols: Words | None = None
    """Columns of the PE array."""
    dataflow: Literal["os", "ws", "is"] | None = None
    """What stays in the PEs of a systolic array: outputs (``os``), weights (``ws``) or inputs (``is``)."""
    clock: Clock | None = None
    """Clock frequency."""
    mac_pj: Picojoules | None = None
    """Energy of a multiply-accumulate, in pJ."""
    dram_words_per_cycle: Words | None = None
    """SCALE-Sim's user bandwidth (its ``Bandwidth``): words per cycle of each SRAM's own DRAM port, so that memory
    stalls appear (systolic arrays with an input, weight and output partition at their second level only; unset:
    memory never stalls)."""
    zigzag_compat: bool | None = None
    """Cost ZigZag's schedule rather than the model's own: loops allocated bottom-up as its LOMA mapper does, one
    systolic fill and drain per operator, one-time transfers before or after compute unless DRAM is idle enough."""
    unrolls: dict[Literal["gemm", "conv"], UnrollSection] | None = None
    """For an array without a ``dataflow``: the dimensions each problem kind may unroll on rows and columns (kinds
    it omits unroll anything)."""
    onload: list[Operand] | None = None
    """Operands whose tile at the outermost on-chip level keeping them is loaded before compute starts (ZigZag's
    data onloading)."""
    source: str | None = None
    """Where the figures come from."""

    def accelerator(self) -> Accelerator:
        """The accelerator described."""
        return self.built()

    def _unrolls(self, base: Mapping[str, _Unroll]) -> dict[str, _Unroll]:
        """The dimensions each kind unrolls on rows and columns: this section's ``unrolls``, else ``base``."""
        if self.unrolls is None:
            return dict(base)
        return {str(kind): (frozenset(unroll.rows), frozenset(unroll.cols)) for kind, unroll in self.unrolls.items()}


class AcceleratorDescription(_AcceleratorKeys):
    """``compute.device`` for the ``timeloop`` backend, a whole accelerator without a preset: a ``pe_rows`` x
    ``pe_cols`` array of PEs doing one MAC per cycle under storage ``levels``, innermost (each PE's own) first, the
    last the unbounded backing store keeping every operand."""

    name: str = Field(min_length=1)
    """The accelerator's name in reports."""
    pe_rows: Words
    """Rows of the PE array."""
    pe_cols: Words
    """Columns of the PE array."""
    clock: Clock
    """Clock frequency."""
    mac_pj: Picojoules
    """Energy of a multiply-accumulate, in pJ."""
    levels: list[StorageLevelSection] = Field(min_length=2)
    """The storage levels, innermost first: the PEs' own (its bounds per PE), then the shared ones, then DRAM."""

    def built(self) -> Accelerator:
        """The accelerator described."""
        return Accelerator(
            name=self.name,
            rows=self.pe_rows,
            cols=self.pe_cols,
            levels=tuple(level.level() for level in self.levels),
            clock_hz=self.clock,
            mac_pj=self.mac_pj,
            source=self.source or "described in the study",
            dataflow=self.dataflow,
            unrolls=self._unrolls({}),
            dram_bandwidth=self.dram_words_per_cycle,
            onload=frozenset(self.onload or ()),
            zigzag_compat=bool(self.zigzag_compat),
        )


class AcceleratorSection(_AcceleratorKeys):
    """``compute.device`` described for the ``timeloop`` backend: a ``preset`` overridden key by key."""

    preset: str
    """The accelerator preset the other keys override (``systolic-32x32-os``...)."""
    levels: dict[str, LevelSection] | None = None
    """Changes to the preset's storage levels, by level name."""

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
    def _known_levels(
        cls, levels: dict[str, LevelSection] | None, info: ValidationInfo
    ) -> dict[str, LevelSection] | None:
        preset = info.data.get("preset")  # absent when it failed its own check
        if preset is None or levels is None:
            return levels
        names = [level.name for level in accelerator(preset).levels]
        unknown = sorted(set(levels) - set(names))
        if unknown:
            raise ValueError(f"{preset} has no level {unknown[0]!r}; its levels are {', '.join(names)}")
        return levels

    def built(self) -> Accelerator:
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
            unrolls=self._unrolls(base.unrolls),
            onload=base.onload if self.onload is None else frozenset(self.onload),
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


_ACCELERATOR_ONLY = frozenset(
    {
        "pe_rows",
        "pe_cols",
        "dataflow",
        "clock",
        "mac_pj",
        "levels",
        "dram_words_per_cycle",
        "unrolls",
        "onload",
        "zigzag_compat",
    }
)
