"""Named hardware descriptions by name: the one lookup table every compute backend's presets are kept in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Protocol, TypeVar

__all__ = ["Named", "by_name"]


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
