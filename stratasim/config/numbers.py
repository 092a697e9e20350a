"""Numbers a study may not hold anywhere: a whole number beyond the wire's int64, or a float that is infinite or
NaN (YAML's ``.inf``, ``.nan``). Found before any section reads them, so no key meets one; the sections' own
bands (:mod:`stratasim.kernel.units`, field bounds) then say what is plausible for each key."""

from __future__ import annotations

import math
from collections.abc import Mapping

from stratasim.kernel.units import INT64_MAX

__all__ = ["unfit_numbers"]


def unfit_numbers(data: object, root: str = "") -> list[tuple[str, str]]:
    """Every number in ``data`` (nested mappings and lists, walked without recursion) that no key accepts, as
    ``(dotted.path, message)`` problems."""
    problems: list[tuple[str, str]] = []
    pending: list[tuple[str, object]] = [(root, data)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, Mapping):
            pending.extend((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
        elif isinstance(value, list | tuple):
            pending.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and not -INT64_MAX - 1 <= value <= INT64_MAX:
            problems.append(
                (
                    path,
                    f"a whole number of {value.bit_length()} bits does not fit a 64-bit integer; no key "
                    "takes a number this large",
                )
            )
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append((path, f"{value} is not a finite number; write a finite value with its unit if it has one"))
    return sorted(problems)
