"""Building blocks for validating study sections: strict frozen models and unit-aware field types.

Every section of a study is a :class:`Section`: unknown keys are errors and the result is immutable.
Quantity fields accept what people write (``50GB/s``, ``500ns``) and hold plain numbers in base units.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from stratasim.kernel import operators, units

__all__ = ["Section", "Bytes", "TimePs", "Bandwidth", "EnergyPerBit", "Flops", "DTypeName"]


def _wrap(parse: Any) -> BeforeValidator:
    def check(value: object) -> object:
        try:
            return parse(value)
        except units.UnitError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(check)


class Section(BaseModel):
    """A study section: strict keys, frozen after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


Bytes = Annotated[int, _wrap(units.parse_bytes)]
"""A size in bytes (accepts ``64MiB``, ``1GB``, a bare number of bytes)."""

TimePs = Annotated[int, _wrap(units.parse_time_ps)]
"""A duration in picoseconds (accepts ``500ns``, ``1.5us``, a bare number of nanoseconds)."""

Bandwidth = Annotated[float, _wrap(units.parse_bandwidth)]
"""A bandwidth in bytes per second (accepts ``50GB/s``, ``400Gbps``, a bare number of GB/s)."""

EnergyPerBit = Annotated[float, _wrap(units.parse_energy_per_bit_pj)]
"""An energy per bit moved in picojoules (accepts ``1.3pJ/bit``, ``500fJ/bit``, a bare number of pJ/bit)."""

Flops = Annotated[float, _wrap(units.parse_flops)]
"""A throughput in FLOP/s (accepts ``989TFLOPS``, a bare number of TFLOPS)."""


def _known_dtype(value: str) -> str:
    operators.parse_dtype(value)
    return value


DTypeName = Annotated[str, AfterValidator(_known_dtype)]
"""A data type's name as a study writes it (``bf16``, ``fp32``...), checked against the known ones."""
