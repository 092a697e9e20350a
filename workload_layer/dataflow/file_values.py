"""Reading the values of a dataflow-graph file, each problem recorded under the key path a user writes
(``kernels[2].m``) instead of raised, so one error can list them all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stratasim.kernel import units
from stratasim.kernel.errors import UnitError, did_you_mean

__all__ = ["Problems", "shown"]

_LARGEST = 2**50
"""The largest size a file may give in bytes (1 PiB), as a study's sizes."""


def shown(value: object) -> str:
    """``value`` as a message quotes it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Problems:
    """The ``(key path, message)`` problems found so far, and readers that record one and return None when a value
    is not what its key expects."""

    found: list[tuple[str, str]] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        """Record that the value at ``path`` is wrong, as ``message`` says."""
        self.found.append((path, message))

    def keys(self, data: Mapping[str, object], path: str, allowed: Sequence[str], required: Sequence[str]) -> None:
        """Record each key of ``data`` not ``allowed`` (with the closest allowed one) and each ``required`` one
        missing; ``path`` is the mapping's own (empty at the top)."""
        prefix = f"{path}." if path else ""
        for key in data:
            if key not in allowed:
                hint = did_you_mean(str(key), allowed)
                self.add(f"{prefix}{key}", f"unknown key; {hint}expected one of {', '.join(allowed)}")
        for key in required:
            if key not in data:
                self.add(f"{prefix}{key}", "required")

    def integer(self, value: object, path: str, least: int = 1) -> int | None:
        """``value`` as an integer of at least ``least`` (1: "a positive integer")."""
        if isinstance(value, int) and not isinstance(value, bool) and value >= least:
            return value
        said = "a positive integer" if least == 1 else f"an integer of at least {least}"
        self.add(path, f"expected {said}, got {shown(value)}")
        return None

    def boolean(self, value: object, path: str) -> bool | None:
        """``value`` as ``true`` or ``false``."""
        if isinstance(value, bool):
            return value
        self.add(path, f"expected true or false, got {shown(value)}")
        return None

    def text(self, value: object, path: str) -> str | None:
        """``value`` as a non-empty string."""
        if isinstance(value, str) and value.strip():
            return value
        self.add(path, f"expected a non-empty string, got {shown(value)}")
        return None

    def size(self, value: object, path: str) -> int | None:
        """``value`` as a size in bytes: a whole number, or a quantity with a unit (``64MiB``), at most 1 PiB."""
        if isinstance(value, str):
            try:
                return units.parse_bytes(value)
            except UnitError as exc:
                self.add(path, str(exc))
                return None
        size = self.integer(value, path, least=0)
        if size is not None and size > _LARGEST:
            self.add(path, f"expected at most 1 PiB ({_LARGEST} bytes), got {size}")
            return None
        return size
