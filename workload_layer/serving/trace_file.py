"""Request traces: CSV or JSON Lines, in Azure's public LLM inference trace format or a plain one, read by one
bounded reader.

Azure's traces (AzurePublicDataset, ``AzureLLMInferenceTrace_{code,conv}.csv`` of 2023 and the 2024 week-long
ones) have the header ``TIMESTAMP,ContextTokens,GeneratedTokens``, ``TIMESTAMP`` a wall-clock time such as
``2023-11-16 18:15:46.6474004`` (fractions of a second to 18 digits, an optional ``+00:00`` or ``Z``): a request
arrives that long after the trace's first. A plain trace has ``arrival_s`` (or ``arrival_ms``), ``prompt_tokens``
and ``output_tokens``, the arrival counted from 0. A JSONL file holds one object per line with either set of
keys, the same on every line. Rows may come in any order; requests are sorted by arrival (ties in file order).

The file is streamed (:mod:`~stratasim.workload_layer.serving.trace_rows`), never read whole, and reading stops
once it holds more requests than the caller allows (a run's memory budget). Every number is range-checked before
any arithmetic: a time has at most :data:`NUMBER_CHARACTERS` characters and every arrival lies within
:data:`~stratasim.workload_layer.serving.requests.ARRIVAL_LIMIT_PS` of the first, a token count is a whole number
from 1 to 2^31. Two arrival columns (``arrival_s`` beside ``arrival_ms``, or either beside ``TIMESTAMP``) are an
error, not a choice. Every error names the file, the line and the key, never what the file holds.
"""

from __future__ import annotations

import re
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from stratasim.kernel.errors import InputError
from stratasim.workload_layer.serving.requests import ARRIVAL_LIMIT_PS, MAX_REQUESTS, Request, horizon_said
from stratasim.workload_layer.serving.trace_rows import trace_rows

__all__ = ["NUMBER_CHARACTERS", "read_trace"]

NUMBER_CHARACTERS = 64
"""Most characters of a number in a trace (a time to the picosecond over 53 days has about 20)."""
MAX_TOKENS = 1 << 31
"""Most tokens of a request's prompt or output."""

_ARRIVALS = {"TIMESTAMP": 0, "arrival_s": 12, "arrival_ms": 9}  # the arrival keys and their unit as 10^n ps
_TOKENS = {"TIMESTAMP": ("ContextTokens", "GeneratedTokens")}
_PLAIN_TOKENS = ("prompt_tokens", "output_tokens")
_EXPECTED = (
    "expected the columns TIMESTAMP, ContextTokens, GeneratedTokens (Azure's trace) or arrival_s (or arrival_ms), "
    "prompt_tokens, output_tokens"
)
_TIMESTAMP = re.compile(
    r"\s*([0-9]{4}-[0-9]{2}-[0-9]{2})[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,18}))?\s*(Z|[+-][0-9]{2}:[0-9]{2})?\s*"
)
_DECIMAL = re.compile(r"\s*([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,6}))?\s*")
_WHOLE = re.compile(r"\s*([0-9]{1,10})\s*")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Parsed = tuple[int, int, int, int]
"""A request as read: its arrival (ps; Azure's since the epoch), line, prompt and output tokens."""


@dataclass(frozen=True)
class _Format:
    """The keys of a trace's arrival (``arrival``) and token counts (``prompt``, ``output``)."""

    arrival: str
    prompt: str
    output: str

    @property
    def keys(self) -> tuple[str, str, str]:
        return self.arrival, self.prompt, self.output


def read_trace(path: str | Path, limit: int | None = None, most: int | None = None) -> tuple[Request, ...]:
    """The requests of the trace at ``path`` (its first ``limit`` rows), sorted by arrival (module docstring).

    With ``most``, reading stops at the request after the ``most``-th and returns the ``most + 1`` read so far: the
    caller's budget refuses them without the rest of the file being read. No row past ``limit`` is read, and a
    trace of more than :data:`~stratasim.workload_layer.serving.requests.MAX_REQUESTS` is an error."""
    source = str(path)
    stop = min(limit or MAX_REQUESTS + 1, MAX_REQUESTS + 1, MAX_REQUESTS + 1 if most is None else most + 1)
    parsed: list[Parsed] = []
    form: _Format | None = None
    clock = _AzureClock()
    with closing(trace_rows(source, source.endswith((".jsonl", ".json")))) as rows:
        for line, row in rows:
            form = form or _format(source, line, row)
            parsed.append(_request(source, line, row, form, clock))
            if len(parsed) == stop:
                break
    if not parsed or form is None:
        raise InputError(source, "", "the trace holds no request")
    if len(parsed) > MAX_REQUESTS:
        raise InputError(source, "", f"the trace holds more than {MAX_REQUESTS:,} requests, the most a study serves")
    return _sorted(source, parsed, form)


def _format(source: str, line: int, row: dict[str, object]) -> _Format:
    """The format the first row's keys (a CSV's header) name; one arrival key, and its token keys, required."""
    arrivals = [key for key in _ARRIVALS if key in row]
    if len(arrivals) > 1:
        raise InputError(source, f"line {line}", f"both {' and '.join(arrivals)}: give one arrival column")
    tokens = _TOKENS.get(arrivals[0], _PLAIN_TOKENS) if arrivals else ()
    if not arrivals or not all(key in row for key in tokens):
        raise InputError(source, f"line {line}", _EXPECTED)
    return _Format(arrivals[0], *tokens)


def _request(source: str, line: int, row: dict[str, object], form: _Format, clock: _AzureClock) -> Parsed:
    """One row read in ``form``: every key present (and no other arrival key), every number in range."""
    missing = [key for key in form.keys if key not in row]
    if missing:
        raise InputError(
            source, f"line {line}", f"no {missing[0]}: every row needs {', '.join(form.keys)}, as the first has"
        )
    others = [key for key in _ARRIVALS if key in row and key != form.arrival]
    if others:
        raise InputError(source, f"line {line}", f"both {form.arrival} and {others[0]}: give one arrival column")
    value = row[form.arrival]
    arrival = (
        clock(source, line, value)
        if form.arrival == "TIMESTAMP"
        else _picoseconds(source, line, form.arrival, value, _ARRIVALS[form.arrival])
    )
    return (
        arrival,
        line,
        _tokens(source, line, form.prompt, row[form.prompt]),
        _tokens(source, line, form.output, row[form.output]),
    )


def _sorted(source: str, parsed: list[Parsed], form: _Format) -> tuple[Request, ...]:
    """The requests by arrival (ties in file order), Azure's counted from the first; refuses an arrival beyond
    :data:`ARRIVAL_LIMIT_PS` naming its line."""
    start = min(arrival for arrival, _, _, _ in parsed) if form.arrival == "TIMESTAMP" else 0
    requests = sorted((arrival - start, line, prompt, output) for arrival, line, prompt, output in parsed)
    last, line, _, _ = requests[-1]
    if last > ARRIVAL_LIMIT_PS:
        after = " after the trace's first" if start else ""
        raise InputError(
            source,
            f"line {line}",
            f"{form.arrival} lies {last / 10**12 / 86400:,.1f} days{after}, beyond {horizon_said()}",
        )
    return tuple(Request(i, arrival, prompt, output) for i, (arrival, _, prompt, output) in enumerate(requests))


class _AzureClock:
    """Azure ``TIMESTAMP`` values in picoseconds since the epoch (UTC unless an offset says otherwise), rounded to
    the picosecond; each day (and offset) checked by :mod:`datetime` once, the rest by integer arithmetic."""

    def __init__(self) -> None:
        self._days: dict[tuple[str, str], int] = {}

    def __call__(self, source: str, line: int, value: object) -> int:
        match = _TIMESTAMP.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise InputError(source, f"line {line}", "TIMESTAMP must read like 2023-11-16 18:15:46.647")
        day, hour, minute, second, fraction, zone = match.groups()
        zone = "+00:00" if zone in (None, "Z") else zone
        start = self._days.get((day, zone))
        if start is None:
            start = self._days[day, zone] = self._day(source, line, day, zone)
        if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
            raise InputError(source, f"line {line}", "TIMESTAMP is not a valid date and time")
        whole = start + 3600 * int(hour) + 60 * int(minute) + int(second)
        fraction = fraction or "0"
        if len(fraction) <= 12:
            return whole * 10**12 + int(fraction) * 10 ** (12 - len(fraction))
        return whole * 10**12 + round(Fraction(int(fraction), 10 ** (len(fraction) - 12)))

    @staticmethod
    def _day(source: str, line: int, day: str, zone: str) -> int:
        """Seconds from the epoch to midnight of ``day`` at offset ``zone``."""
        try:
            return int((datetime.fromisoformat(f"{day}T00:00:00{zone}") - _EPOCH).total_seconds())
        except ValueError:
            raise InputError(source, f"line {line}", "TIMESTAMP is not a valid date and time") from None


def _picoseconds(source: str, line: int, key: str, value: object, unit: int) -> int:
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


def _tokens(source: str, line: int, key: str, value: object) -> int:
    """A whole token count from 1 to :data:`MAX_TOKENS`."""
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    match = _WHOLE.fullmatch(text) if len(text) <= NUMBER_CHARACTERS else None
    if match is None or not 1 <= int(match[1]) <= MAX_TOKENS:
        raise InputError(source, f"line {line}", f"{key} must be a whole number from 1 to {MAX_TOKENS:,}")
    return int(match[1])
