"""Numbers in a request trace, range-checked before any arithmetic: times as decimal seconds or milliseconds
read exactly to the picosecond, token counts as whole numbers. Errors name the file, the line and the key, never
the value."""

from __future__ import annotations

import re
from fractions import Fraction

from stratasim.kernel.errors import InputError
from stratasim.workload_layer.serving.requests import ARRIVAL_LIMIT_PS, horizon_said

__all__ = ["MAX_TOKENS", "NUMBER_CHARACTERS", "picoseconds", "tokens"]

NUMBER_CHARACTERS = 64
"""Most characters of a number in a trace (a time to the picosecond over 53 days has about 20)."""
MAX_TOKENS = 1 << 31
"""Most tokens of a request's prompt or output."""

_DECIMAL = re.compile(r"\s*([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,6}))?\s*")
_WHOLE = re.compile(r"\s*([0-9]{1,10})\s*")


def picoseconds(source: str, line: int, key: str, value: object, unit: int) -> int:
    """A non-negative decimal number of ``10^unit`` ps in picoseconds, exactly rounded (half to even), read only
    once its size is known to be within :data:`ARRIVAL_LIMIT_PS`."""
    text = value if isinstance(value, str) else repr(value) if isinstance(value, (int, float)) else ""
    match = _DECIMAL.fullmatch(text) if not isinstance(value, bool) and len(text) <= NUMBER_CHARACTERS else None
    if match is None or not (match[1] or match[2]):
        said = "seconds" if unit == 12 else "milliseconds"
        raise InputError(
            source,
            f"line {line}",
            f"{key} must be a non-negative number of {said} of at most {NUMBER_CHARACTERS} characters",
        )
    fraction = match[2] or ""
    digits = (match[1] + fraction).lstrip("0")
    shift = int(match[3] or 0) - len(fraction) + unit
    if not digits or len(digits) + shift < 0:  # zero, or below half a picosecond
        return 0
    if len(digits) + shift > len(str(ARRIVAL_LIMIT_PS)):
        raise InputError(source, f"line {line}", f"{key} lies beyond {horizon_said()}")
    return int(digits) * 10**shift if shift >= 0 else round(Fraction(int(digits), 10**-shift))


def tokens(source: str, line: int, key: str, value: object) -> int:
    """A whole token count from 1 to :data:`MAX_TOKENS`."""
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    match = _WHOLE.fullmatch(text) if len(text) <= NUMBER_CHARACTERS else None
    if match is None or not 1 <= int(match[1]) <= MAX_TOKENS:
        raise InputError(source, f"line {line}", f"{key} must be a whole number from 1 to {MAX_TOKENS:,}")
    return int(match[1])
