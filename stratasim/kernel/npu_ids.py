"""NPU ids as a study writes them: whole numbers and ``a-b`` ranges (both ends included), in a list or in one
text (``[0, "8-15"]``, ``"0-3, 12"``).

One reading for every key that names NPUs (a job's ``place``, a device group's ``npus``, a slow-down's ``npus``):
the ids come back in the order written, repeats kept, so a key that cares (a placement's rank order, a repeat
refused) can say so itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

__all__ = ["NpuIds", "npu_ids", "npu_ranges"]

_RANGE_PATTERN = r"^\s*\d+\s*(-\s*\d+\s*)?$"
_TEXT_PATTERN = r"^\s*\d+\s*(-\s*\d+\s*)?(,\s*\d+\s*(-\s*\d+\s*)?)*$"
_EXAMPLE = "e.g. '8-15', '0-3, 12' or [0, '4-7']"


def npu_ids(value: object) -> tuple[int, ...]:
    """The NPU ids ``value`` names, in the order written; ValueError naming the part it cannot read."""
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, (list, tuple)):
        raise ValueError(f"expected NPU ids and ranges, {_EXAMPLE}; got {value!r}")
    ids: list[int] = []
    for part in parts:
        ids.extend(_part(part))
    if not ids:
        raise ValueError(f"names no NPU; expected NPU ids and ranges, {_EXAMPLE}")
    return tuple(ids)


def _part(part: object) -> range:
    """The ids one part names: an id, or a range ``a-b`` with ``a <= b``."""
    if isinstance(part, int) and not isinstance(part, bool):
        if part < 0:
            raise ValueError(f"an NPU id is 0 or more, got {part}")
        return range(part, part + 1)
    if not isinstance(part, str):
        raise ValueError(f"expected an NPU id or a range 'a-b', got {part!r}")
    first, dash, last = part.strip().partition("-")
    if not (first.strip().isdigit() and (not dash or last.strip().isdigit())):
        raise ValueError(f"cannot read {part.strip()!r} as an NPU id or a range 'a-b' ({_EXAMPLE})")
    low, high = int(first), int(last if dash else first)
    if high < low:
        raise ValueError(f"range {part.strip()!r} runs backwards; write it low-high")
    return range(low, high + 1)


def npu_ranges(ids: Iterable[int], separator: str = ", ") -> str:
    """NPU ids written back as :func:`npu_ids` reads them, in the order given, each run of consecutive ids as a range
    (``0-3, 8, 10-11``); sort them first for a set."""
    ranges: list[list[int]] = []
    for npu in ids:
        if ranges and npu == ranges[-1][1] + 1:
            ranges[-1][1] = npu
        else:
            ranges.append([npu, npu])
    return separator.join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


NpuIds = Annotated[
    tuple[int, ...],
    BeforeValidator(npu_ids),
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": _RANGE_PATTERN}]
                    },
                },
                {"type": "string", "pattern": _TEXT_PATTERN},
            ]
        }
    ),
]
"""A key naming NPUs: validated by :func:`npu_ids` into the ids in the order written."""
