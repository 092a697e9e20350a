"""NPU ids as a study writes them: a list of ids and ``a-b`` ranges (both ends included), or one such string
(``"8-15"``, ``"0-3, 12"``)."""

from __future__ import annotations

__all__ = ["NpuIds", "npu_ids"]

NpuIds = str | list[int | str]
"""What a study may write for a set of NPUs: ``"8-15"``, ``"0-3, 12"``, ``[8, 9, "12-15"]``."""


def npu_ids(value: NpuIds) -> tuple[int, ...]:
    """The NPU ids ``value`` names, sorted, each once; ValueError (naming the part it cannot read) otherwise."""
    parts = value.split(",") if isinstance(value, str) else value
    ids: set[int] = set()
    for part in parts:
        ids.update(_part(part))
    if not ids:
        raise ValueError("names no NPU; expected NPU ids and ranges, e.g. '8-15' or [0, 1, '4-7']")
    return tuple(sorted(ids))


def _part(part: int | str) -> range:
    """The ids one part names: an id, or a range ``a-b`` with ``a <= b``."""
    if isinstance(part, bool):
        raise ValueError(f"expected an NPU id or a range 'a-b', got {part!r}")
    if isinstance(part, int):
        if part < 0:
            raise ValueError(f"an NPU id is 0 or more, got {part}")
        return range(part, part + 1)
    text = part.strip()
    first, dash, last = text.partition("-")
    try:
        low, high = int(first), int(last if dash else first)
    except ValueError:
        raise ValueError(f"cannot read {part!r} as an NPU id or a range 'a-b' (e.g. '8-15')") from None
    if low < 0 or high < low:
        raise ValueError(f"{part!r} is not a range of NPU ids: expected 'a-b' with 0 <= a <= b")
    return range(low, high + 1)
