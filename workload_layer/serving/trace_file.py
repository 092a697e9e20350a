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

Either may also give ``session``, ``prefix_id`` and ``prefix_tokens`` columns, and a session trace (``session``,
``turn``, ``new_prompt_tokens``, ``output_tokens``, an arrival on first turns and a think time on later ones) holds
closed-loop conversations: both are read by :mod:`~stratasim.workload_layer.serving.session_trace`, recognised by
the first row's keys; a trace mixing the two schemas is an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from itertools import chain
from pathlib import Path

from stratasim.kernel.errors import InputError
from stratasim.workload_layer.serving.request_config import ARRIVAL_LIMIT_PS, MAX_REQUESTS, horizon_said
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.session_trace import Labels, is_session_trace, labelled, labels, sessions
from stratasim.workload_layer.serving.trace_numbers import MAX_TOKENS, NUMBER_CHARACTERS, picoseconds, tokens
from stratasim.workload_layer.serving.trace_rows import Row, trace_rows

__all__ = ["MAX_TOKENS", "NUMBER_CHARACTERS", "read_trace"]

_NO_LABELS: Labels = ("", "", 0)


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
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Parsed = tuple[int, int, int, int, Labels]
"""A request as read: its arrival (ps; Azure's since the epoch), line, prompt and output tokens, its session and
prefix."""


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
    with closing(trace_rows(source, source.endswith((".jsonl", ".json")))) as rows:
        first = next(rows, None)
        if first is None:
            raise InputError(source, "", "the trace holds no request")
        if is_session_trace(source, *first):
            requests = sessions(source, chain([first], rows), stop)
        else:
            requests = _plain(source, chain([first], rows), stop)
    if len(requests) > MAX_REQUESTS:
        raise InputError(source, "", f"the trace holds more than {MAX_REQUESTS:,} requests, the most a study serves")
    return requests


def _plain(source: str, rows: Iterator[Row], stop: int) -> tuple[Request, ...]:
    """The requests of a plain or Azure trace's first ``stop`` rows, sorted by arrival, with any sessions and
    prefixes its columns give (:func:`~stratasim.workload_layer.serving.session_trace.labelled`)."""
    parsed: list[Parsed] = []
    form: _Format | None = None
    clock = _AzureClock()
    for line, row in rows:
        form = form or _format(source, line, row)
        parsed.append(_request(source, line, row, form, clock))
        if len(parsed) == stop:
            break
    assert form is not None
    return _sorted(source, parsed, form)


def _format(source: str, line: int, row: dict[str, object]) -> _Format:
    """The format the first row's keys (a CSV's header) name; one arrival key, and its token keys, required."""
    arrivals = [key for key in _ARRIVALS if key in row]
    if len(arrivals) > 1:
        raise InputError(source, f"line {line}", f"both {' and '.join(arrivals)}: give one arrival column")
    keys = _TOKENS.get(arrivals[0], _PLAIN_TOKENS) if arrivals else ()
    if not arrivals or not all(key in row for key in keys):
        raise InputError(source, f"line {line}", _EXPECTED)
    return _Format(arrivals[0], *keys)


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
        else picoseconds(source, line, form.arrival, value, _ARRIVALS[form.arrival])
    )
    return (
        arrival,
        line,
        tokens(source, line, form.prompt, row[form.prompt]),
        tokens(source, line, form.output, row[form.output]),
        labels(source, line, row),
    )


def _sorted(source: str, parsed: list[Parsed], form: _Format) -> tuple[Request, ...]:
    """The requests by arrival (ties in file order), Azure's counted from the first; refuses an arrival beyond
    :data:`ARRIVAL_LIMIT_PS` naming its line."""
    start = min(request[0] for request in parsed) if form.arrival == "TIMESTAMP" else 0
    requests = sorted((arrival - start, line, prompt, output, tags) for arrival, line, prompt, output, tags in parsed)
    last, line = requests[-1][:2]
    if last > ARRIVAL_LIMIT_PS:
        after = " after the trace's first" if start else ""
        raise InputError(
            source,
            f"line {line}",
            f"{form.arrival} lies {last / 10**12 / 86400:,.1f} days{after}, beyond {horizon_said()}",
        )
    if any(request[4] != _NO_LABELS for request in requests):
        return labelled(source, requests)
    return tuple(Request(i, arrival, prompt, output) for i, (arrival, _, prompt, output, _) in enumerate(requests))


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
