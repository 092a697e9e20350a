"""Request traces: CSV or JSON Lines, in Azure's public LLM inference trace format or a plain one.

Azure's traces (AzurePublicDataset, ``AzureLLMInferenceTrace_{code,conv}.csv`` of 2023 and the 2024 week-long
ones) have the header ``TIMESTAMP,ContextTokens,GeneratedTokens``, ``TIMESTAMP`` a wall-clock time such as
``2023-11-16 18:15:46.6474004`` (fractions of a second of any length, an optional ``+00:00`` or ``Z``): a request
arrives that long after the trace's first. A plain trace has ``arrival_s`` (or ``arrival_ms``), ``prompt_tokens``
and ``output_tokens``, the arrival counted from 0. A JSONL file holds one object per line with either set of
keys. Rows may come in any order; requests are sorted by arrival (ties in file order). Every malformed row is an
error naming the file and line.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from stratasim.kernel.errors import InputError
from stratasim.kernel.safe_load import TABLE_BYTES, csv_rows, parse_json, read_text
from stratasim.workload_layer.serving.requests import PS_PER_SECOND, Request

__all__ = ["read_trace"]

_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_PLAIN = {"arrival_s": PS_PER_SECOND, "arrival_ms": PS_PER_SECOND // 1000}
_TIMESTAMP = re.compile(r"^\s*(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2}:\d{2})?\s*$")
_NUMBER = re.compile(r"^\s*(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$")

Row = tuple[int, dict[str, object]]


def read_trace(path: str | Path, limit: int | None = None) -> tuple[Request, ...]:
    """The requests of the trace at ``path`` (the first ``limit`` rows), sorted by arrival."""
    text = read_text(path, TABLE_BYTES, "a request trace")
    source = str(path)
    rows = _jsonl_rows(text, source) if str(path).endswith((".jsonl", ".json")) else _csv_rows(text, source)
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise InputError(source, "", "the trace holds no request")
    keys = set(rows[0][1])
    azure = set(_AZURE) <= keys
    if azure:
        parsed = [
            (line, _azure_time(source, line, row[_AZURE[0]]), row[_AZURE[1]], row[_AZURE[2]]) for line, row in rows
        ]
        prompt_key, output_key = _AZURE[1], _AZURE[2]
    else:
        unit = next((key for key in _PLAIN if key in keys), None)
        if unit is None or not {"prompt_tokens", "output_tokens"} <= keys:
            raise InputError(
                source,
                f"line {rows[0][0]}",
                "expected the columns TIMESTAMP, ContextTokens, "
                "GeneratedTokens (Azure's trace) or arrival_s (or arrival_ms), prompt_tokens, output_tokens",
            )
        parsed = [
            (
                line,
                _seconds(source, line, unit, row.get(unit)) * _PLAIN[unit],
                row.get("prompt_tokens"),
                row.get("output_tokens"),
            )
            for line, row in rows
        ]
        prompt_key, output_key = "prompt_tokens", "output_tokens"
    start = min(time for _, time, _, _ in parsed) if azure else Fraction(0)
    requests = []
    for line, time, prompt, output in parsed:
        requests.append(
            (
                round(time - start),
                line,
                _tokens(source, line, prompt_key, prompt, 1),
                _tokens(source, line, output_key, output, 1),
            )
        )
    requests.sort()
    return tuple(Request(i, arrival, prompt, output) for i, (arrival, _, prompt, output) in enumerate(requests))


def _csv_rows(text: str, source: str) -> list[Row]:
    """The CSV's rows as header-keyed mappings, with their line numbers; blank lines skipped."""
    table = [(line, row) for line, row in csv_rows(text, source) if any(cell.strip() for cell in row)]
    if not table:
        return []
    header = [cell.strip() for cell in table[0][1]]
    rows: list[Row] = []
    for line, row in table[1:]:
        if len(row) != len(header):
            raise InputError(
                source, f"line {line}", f"expected {len(header)} columns, as the header has, got {len(row)}"
            )
        rows.append((line, dict(zip(header, row))))
    return rows


def _jsonl_rows(text: str, source: str) -> list[Row]:
    """One JSON object per non-blank line, with its line number."""
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        value = parse_json(line, f"{source}:{number}")
        if not isinstance(value, dict):
            raise InputError(source, f"line {number}", "expected a JSON object with a request's keys")
        rows.append((number, value))
    return rows


def _azure_time(source: str, line: int, value: object) -> Fraction:
    """An Azure ``TIMESTAMP`` in picoseconds since the epoch (UTC unless an offset says otherwise)."""
    match = _TIMESTAMP.match(value) if isinstance(value, str) else None
    if match is None:
        raise InputError(
            source, f"line {line}", "TIMESTAMP must read like 2023-11-16 18:15:46.647 (the value is not shown)"
        )
    day, hour, minute, second, fraction, zone = match.groups()
    try:
        when = datetime.fromisoformat(f"{day}T{hour}:{minute}:{second}{'+00:00' if zone in (None, 'Z') else zone}")
    except ValueError:
        raise InputError(source, f"line {line}", "TIMESTAMP is not a valid date and time") from None
    whole = int((when - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())
    return (whole + Fraction(int(fraction or "0"), 10 ** len(fraction or "0"))) * PS_PER_SECOND


def _seconds(source: str, line: int, key: str, value: object) -> Fraction:
    """A non-negative number from the trace (``key`` names the column)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or not _NUMBER.match(str(value)):
        raise InputError(source, f"line {line}", f"{key} must be a non-negative number")
    number = Fraction(str(value).strip())
    if number > 10**7:
        raise InputError(source, f"line {line}", f"{key} is beyond any trace's span (10^7 s)")
    return number


def _tokens(source: str, line: int, key: str, value: object, minimum: int) -> int:
    """A whole token count of at least ``minimum``."""
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not text.isdigit() or int(text) < minimum or int(text) > 1 << 31:
        raise InputError(source, f"line {line}", f"{key} must be a whole number from {minimum} to 2^31")
    return int(text)
