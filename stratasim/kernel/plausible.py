"""Soft plausibility bands: the range a quantity usually lies in, outside which a study still runs but is warned.

A hard band (:data:`stratasim.kernel.units.BANDS`) refuses a value no machine has; a soft band (:class:`Usual`) only
says "check the unit": a network link of 5 MB/s or an HBM of 64 KiB is possible but far more often a slip of a
prefix. Each quantity type of :mod:`stratasim.kernel.schema` carries its kind's band and a section field may narrow
it to what it names (``Annotated[Bandwidth, Usual(...)]``: the last band in a field's metadata wins).
:func:`unusual_values` walks a validated section and returns one warning per value outside its band, under its
dotted key, naming the value and the band; it keeps nothing between calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, GetJsonSchemaHandler

from stratasim.kernel.units import format_bytes, format_time_ps

__all__ = ["Usual", "unusual_values", "said", "USUAL_KEY"]

USUAL_KEY = "x-usual"
"""The JSON Schema keyword (an extension, ignored by validators) giving a quantity's usual band."""

_SI = ((10**18, "E"), (10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"))
_UNITS = {"bandwidth": "B/s", "throughput": "FLOPS", "energy per bit": "pJ/bit"}


def said(value: float, kind: str) -> str:
    """``value`` (in the base unit of ``kind``: ps, B, B/s, FLOP/s, pJ/bit) as a reader writes it: ``5MB/s``."""
    if kind == "time":
        return format_time_ps(round(value)).replace(" ", "")
    if kind == "size":
        return format_bytes(round(value)).replace(" ", "")
    unit = _UNITS[kind]
    if kind != "energy per bit":
        for scale, prefix in _SI:
            if value >= scale:
                return f"{value / scale:.3g}{prefix}{unit}"
    return f"{value:.3g}{unit}"


@dataclass(frozen=True)
class Usual:
    """The band ``low``..``high`` (base units of ``kind``) a quantity of ``what`` usually lies in (``what`` reads
    after "the usual range of": ``a network link``)."""

    kind: str
    what: str
    low: float
    high: float

    def warning(self, value: float, shown: bool = True) -> str | None:
        """What is unusual about ``value`` (written out unless not ``shown``), or None when it lies in the band."""
        if self.low <= value <= self.high:
            return None
        side = "below" if value < self.low else "above"
        written = said(value, self.kind) if shown else "its value"
        return f"{written} is {side} the usual range of {self.what} ({self.band()}); check the unit"

    def band(self) -> str:
        """The band as a reader says it: ``100MB/s to 10TB/s``, or ``up to 100us`` when it starts at zero."""
        high = said(self.high, self.kind)
        return f"{said(self.low, self.kind)} to {high}" if self.low else f"up to {high}"

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        """The field's JSON Schema with the band under :data:`USUAL_KEY` (a narrower band, later, replaces it)."""
        return {**handler(core_schema), USUAL_KEY: self.band()}


def _bands(annotation: Any) -> Iterator[Usual]:
    """Every :class:`Usual` in ``annotation``'s metadata and in the types it is made of, innermost first."""
    for arg in get_args(annotation):
        yield from _bands(arg)
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, Usual):
            yield meta


def unusual_values(
    section: BaseModel, prefix: str, hidden: Callable[[str], bool] = lambda _: False
) -> list[tuple[str, str]]:
    """A ``(dotted.key, warning)`` pair for each quantity in the validated ``section`` (at the dotted ``prefix``),
    its sub-sections, lists and mappings, that lies outside its field's usual band; the value is not written out
    where ``hidden(dotted.key)`` (read from a file the study includes, whose contents are not echoed)."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, BaseModel]] = [(prefix, section)]
    while stack:
        where, model = stack.pop()
        for name, field in type(model).model_fields.items():
            bands = [meta for meta in field.metadata if isinstance(meta, Usual)] + list(_bands(field.annotation))
            _check(getattr(model, name), f"{where}.{name}", bands[-1] if bands else None, hidden, found, stack)
    return sorted(found)


def _check(
    value: object,
    where: str,
    band: Usual | None,
    hidden: Callable[[str], bool],
    found: list[tuple[str, str]],
    stack: list[tuple[str, BaseModel]],
) -> None:
    if isinstance(value, BaseModel):
        stack.append((where, value))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check(item, f"{where}[{index}]", band, hidden, found, stack)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check(item, f"{where}.{key}", band, hidden, found, stack)
    elif band is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        found.extend((where, warning) for warning in (band.warning(value, not hidden(where)),) if warning is not None)
