"""Building blocks for validating study sections: strict frozen models and unit-aware field types.

Every section of a study is a :class:`Section`: unknown keys are errors and the result is immutable, and each
field's meaning is the one-line docstring under it (it becomes the field's description in the JSON Schema and in
docs/reference/study-keys.md, through :class:`DocumentedSchema`). Quantity fields accept what people write (``50GB/s``, ``500ns``; a bare number is an error
naming the key and suggesting a unit) and hold plain numbers in base units; their JSON Schema (:func:`quantity`) is a
string with a unit. A section dumps a quantity as its base unit written out (``500000ps``), so a dumped section
validates back to itself.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from fractions import Fraction
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, PlainSerializer, WithJsonSchema
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from stratasim.kernel import operators, units
from stratasim.kernel.plausible import Usual

__all__ = [
    "Section",
    "DocumentedSchema",
    "Bytes",
    "TimePs",
    "Latency",
    "Bandwidth",
    "EnergyPerBit",
    "Flops",
    "ByteCount",
    "LinkBandwidth",
    "MemoryBandwidth",
    "MemoryCapacity",
    "DTypeName",
    "quantity",
    "written",
    "QUANTITY_KEY",
    "QUANTITY_FORMS",
]


def _wrap(parse: Any) -> BeforeValidator:
    def check(value: object) -> object:
        try:
            return parse(value)
        except units.UnitError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(check)


QUANTITY_KEY = "x-quantity"
"""The JSON Schema keyword (an extension, ignored by validators) saying what a quantity field holds and its units."""


QUANTITY_FORMS = (
    {"type": "string", "pattern": r"^\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\s*[A-Za-zµ/]+\s*$"},
)
"""The JSON Schemas of a quantity as written: a string of a number and its unit."""


def quantity(what: str, example: str) -> WithJsonSchema:
    """The JSON Schema of a quantity written as a string with a unit (``example``)."""
    return WithJsonSchema({**QUANTITY_FORMS[0], QUANTITY_KEY: f"{what}, e.g. {example}"})


def written(unit: str) -> PlainSerializer:
    """Dump a quantity held in base units as a string with that ``unit`` (``500000ps``): exact, and read back the
    same by its field, where a bare number would be refused."""
    return PlainSerializer(lambda value: f"{value!r}{unit}", return_type=str)


class Section(BaseModel):
    """A study section: strict keys, frozen after validation; a field's docstring is its description in the JSON
    Schema :class:`DocumentedSchema` generates.

    The docstrings are read when a schema is generated, not when the class is made (pydantic's
    ``use_attribute_docstrings`` reads each class's source as it is defined: a third of a study's start-up), and a
    section's validator is built when it first validates (``defer_build``): a study builds those of the sections
    it has, not of every section a study may have."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, defer_build=True)

    study_files: ClassVar[tuple[str, ...]] = ()
    """The fields naming a file (or a trace's prefix): relative to the study file's folder, where the study reads
    them (see :func:`stratasim.config.study_file.parse_study`); absolute paths are kept."""


class DocumentedSchema(GenerateJsonSchema):
    """JSON Schema generation (``schema_generator=``) that describes each model field without a description by the
    docstring written under it, in the class that declares it (as pydantic's ``use_attribute_docstrings`` would)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._docstrings: dict[type, dict[str, str]] = {}

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        properties = json_schema.get("properties", {})
        model: type[BaseModel] = schema["cls"]
        for name, field in model.model_fields.items():
            alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
            prop = properties.get(alias or name)
            owner = next((klass for klass in model.__mro__ if name in vars(klass).get("__annotations__", {})), None)
            if prop is None or "description" in prop or owner is None:
                continue
            if owner not in self._docstrings:
                self._docstrings[owner] = _field_docstrings(owner)
            if name in self._docstrings[owner]:
                prop["description"] = self._docstrings[owner][name]
        return json_schema


def _field_docstrings(owner: type) -> dict[str, str]:
    """The docstring under each field annotated in class ``owner``'s body, by field name."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(owner)))
    except (OSError, TypeError, SyntaxError):  # no source (a class made in a REPL)
        return {}
    body = next((node.body for node in tree.body if isinstance(node, ast.ClassDef)), [])
    return {
        node.target.id: inspect.cleandoc(after.value.value)
        for node, after in zip(body, body[1:])
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
    }


Bytes = Annotated[
    int,
    _wrap(units.parse_bytes),
    quantity("size at most 1 PiB", "64MiB"),
    written("B"),
    Usual("size", "a size", 1, 2**40),
]
"""A size in bytes (accepts ``64MiB``, ``1GB``, ``512B``)."""


def _bounded_time(high_ps: int, said: str) -> Any:
    """Read a time, refusing one above ``high_ps`` (said as ``said``)."""

    def parse(value: object) -> int:
        ps = units.parse_time_ps(value)
        units.check_band(Fraction(ps), "time", value, Fraction(high_ps), said)
        return ps

    return parse


TimePs = Annotated[
    int,
    _wrap(_bounded_time(3600 * 10**12, "at most 1 h")),
    quantity("time at most 1 h", "500ns"),
    written("ps"),
    Usual("time", "a duration", 0, 60 * 10**12),
]
"""A duration in picoseconds (accepts ``500ns``, ``1.5us``), at most an hour: a study's durations are a node's
compute time or a delay, and an hour of either is a typo."""

Latency = Annotated[
    int,
    _wrap(_bounded_time(10**12, "at most 1 s")),
    quantity("time at most 1 s", "500ns"),
    written("ps"),
    Usual("time", "a latency", 0, 100 * 10**6),
]
"""A latency or per-message delay in picoseconds (accepts ``500ns``, ``1us``), at most a second: no link, switch or
endpoint of a machine a collective runs on takes longer."""

Bandwidth = Annotated[
    float,
    _wrap(units.parse_bandwidth),
    quantity("bandwidth from 1kB/s to 100PB/s", "50GB/s"),
    written("B/s"),
    Usual("bandwidth", "a bandwidth", 10**6, 10**15),
]
"""A bandwidth in bytes per second (accepts ``50GB/s``, ``400Gbps``)."""

EnergyPerBit = Annotated[
    float,
    _wrap(units.parse_energy_per_bit_pj),
    quantity("energy per bit at most 10nJ/bit", "1.3pJ/bit"),
    written("pJ/bit"),
    Usual("energy per bit", "an energy per bit", 0.01, 100),
]
"""An energy per bit moved in picojoules (accepts ``1.3pJ/bit``, ``500fJ/bit``)."""

Flops = Annotated[
    float,
    _wrap(units.parse_flops),
    quantity("throughput from 1MFLOPS to 10^21 FLOPS", "989TFLOPS"),
    written("FLOPS"),
    Usual("throughput", "a throughput", 10**9, 10**17),
]
"""A throughput in FLOP/s (accepts ``989TFLOPS``, ``312TFLOP/s``)."""

LinkBandwidth = Annotated[Bandwidth, Usual("bandwidth", "a network link", 10**9, 10**13)]
"""A network link's bandwidth, usually from 1GB/s (10 Gb Ethernet, the slowest a training cluster uses) to 10TB/s
(ten times an NVLink 5 port each way, room for a dimension's links together)."""

MemoryBandwidth = Annotated[Bandwidth, Usual("bandwidth", "a device's main memory", 10**10, 10**14)]
"""A device's main-memory (DRAM, HBM) bandwidth, usually from 10GB/s (one DDR channel) to 100TB/s (more than ten
times the fastest HBM stacks of today's accelerators)."""

MemoryCapacity = Annotated[Bytes, Usual("size", "a device's main memory", 2**28, 2**42)]
"""A device's main-memory capacity, usually from 256MiB (an edge accelerator's DRAM) to 4TiB (beyond any
accelerator's HBM and a host's memory attached to it)."""


def _byte_count(value: object) -> object:
    """A whole number as it is (the key's name says bytes), anything else read as a size with its unit."""
    if isinstance(value, int) and not isinstance(value, bool):
        units.check_band(Fraction(value), "size", value)
        return value
    return units.parse_bytes(value)


ByteCount = Annotated[
    int,
    _wrap(_byte_count),
    WithJsonSchema({"anyOf": [{"type": "integer"}, *QUANTITY_FORMS], QUANTITY_KEY: "bytes, e.g. 64 or 64B"}),
    Usual("size", "a size", 1, 2**40),
]
"""A size under a key whose name says bytes (``flit_bytes``): a plain number of bytes, or a size with its unit."""


def _known_dtype(value: str) -> str:
    operators.parse_dtype(value)
    return value


DTypeName = Annotated[str, AfterValidator(_known_dtype)]
"""A data type's name as a study writes it (``bf16``, ``fp32``...), checked against the known ones."""
