"""Named hardware descriptions by name: the one lookup table every compute backend's presets are kept in, and
the one way a device name that is not there is reported."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Protocol, TypeVar

from stratasim.kernel.errors import BackendError, did_you_mean

__all__ = ["Named", "by_name", "find", "unknown_device"]


class Named(Protocol):
    """Anything with a ``name`` (a device, an accelerator, a wafer)."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


def by_name(items: Iterable[T], what: str) -> Mapping[str, T]:
    """A read-only ``{lower-case name: item}``; ValueError naming ``what`` (``"devices"``) when two share a name."""
    table: dict[str, T] = {}
    for item in items:
        key = item.name.lower()
        if key in table:
            raise ValueError(f"two {what} are named {item.name!r}")
        table[key] = item
    return MappingProxyType(table)


def find(table: Mapping[str, T], name: str) -> T | None:
    """The item ``by_name`` keeps under ``name`` (case-insensitive, surrounding spaces ignored), or None."""
    return table.get(name.strip().lower())


def unknown_device(name: str, table: Mapping[str, Named], also: str = "") -> BackendError:
    """The error for a device ``table`` lacks, suggesting the closest of its names and listing them all and ``also``
    (names made on demand)."""
    known = ", ".join(sorted(table)) or "none"
    hint = did_you_mean(name.strip().lower(), table)
    return BackendError(f"unknown device {name!r}; {hint}known devices: {known}" + (f" (and {also})" if also else ""))
