"""Building blocks for validating study sections: strict frozen models and unit-aware field types.

Every section of a study is a :class:`Section`: unknown keys are errors and the result is immutable, and each
field's meaning is the one-line docstring under it (it becomes the field's description in the JSON Schema and in
docs/study-keys.md). Quantity fields accept what people write (``50GB/s``, ``500ns``) and hold plain numbers in
base units; their JSON Schema (:func:`quantity`) accepts a number or a string with a unit.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

from stratasim.kernel import operators, units

__all__ = ["Section", "Bytes", "TimePs", "Bandwidth", "EnergyPerBit", "Flops", "DTypeName", "quantity", "QUANTITY_KEY", "QUANTITY_FORMS"]


def _wrap(parse: Any) -> BeforeValidator:
    def check(value: object) -> object:
        try:
            return parse(value)
        except units.UnitError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(check)


QUANTITY_KEY = "x-quantity"
"""The JSON Schema keyword (an extension, ignored by validators) saying what a quantity field holds and its units."""


QUANTITY_FORMS = ({"type": "number"}, {"type": "string", "pattern": r"^\s*[-+.0-9eE]+\s*[A-Za-z/]*\s*$"})
"""The JSON Schemas of a quantity as written: a bare number, or a string of a number and a unit."""


def quantity(what: str, example: str, bare: str) -> WithJsonSchema:
    """The JSON Schema of a quantity written as a number (meaning ``bare``) or a string with a unit (``example``)."""
    return WithJsonSchema({
        "anyOf": [dict(form) for form in QUANTITY_FORMS],
        QUANTITY_KEY: f"{what}, e.g. {example} (a bare number: {bare})",
    })  # fmt: skip


class Section(BaseModel):
    """A study section: strict keys, frozen after validation; a field's docstring is its description."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, use_attribute_docstrings=True)


Bytes = Annotated[int, _wrap(units.parse_bytes), quantity("size", "64MiB", "bytes")]
"""A size in bytes (accepts ``64MiB``, ``1GB``, a bare number of bytes)."""

TimePs = Annotated[int, _wrap(units.parse_time_ps), quantity("time", "500ns", "ns")]
"""A duration in picoseconds (accepts ``500ns``, ``1.5us``, a bare number of nanoseconds)."""

Bandwidth = Annotated[float, _wrap(units.parse_bandwidth), quantity("bandwidth", "50GB/s", "GB/s")]
"""A bandwidth in bytes per second (accepts ``50GB/s``, ``400Gbps``, a bare number of GB/s)."""

EnergyPerBit = Annotated[float, _wrap(units.parse_energy_per_bit_pj), quantity("energy per bit", "1.3pJ/bit", "pJ/bit")]
"""An energy per bit moved in picojoules (accepts ``1.3pJ/bit``, ``500fJ/bit``, a bare number of pJ/bit)."""

Flops = Annotated[float, _wrap(units.parse_flops), quantity("throughput", "989TFLOPS", "TFLOPS")]
"""A throughput in FLOP/s (accepts ``989TFLOPS``, a bare number of TFLOPS)."""


def _known_dtype(value: str) -> str:
    operators.parse_dtype(value)
    return value


DTypeName = Annotated[str, AfterValidator(_known_dtype)]
"""A data type's name as a study writes it (``bf16``, ``fp32``...), checked against the known ones."""
