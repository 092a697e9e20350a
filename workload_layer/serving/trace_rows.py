"""A request trace's rows, streamed: the file read line by line, never whole, with every cap checked as it goes.

A trace may be at most :data:`TRACE_FILE_BYTES` and a line at most :data:`LINE_BYTES`; each line must be UTF-8
text without a NUL byte. A CSV's first non-blank row is its header, and every later row needs as many cells; a
JSON Lines file holds one object per non-blank line. Rows come with their line numbers, blank lines skipped, so a
reader can stop at any row and have read no further. Errors name the file and line, never what the file holds.
"""

from __future__ import annotations

import csv
from collections.abc import Generator, Iterator
from typing import BinaryIO

from stratasim.kernel.errors import InputError
from stratasim.kernel.safe_load import TABLE_BYTES, open_bounded, parse_json

__all__ = ["LINE_BYTES", "TRACE_FILE_BYTES", "Row", "trace_rows"]

TRACE_FILE_BYTES = TABLE_BYTES
"""Largest request trace (256 MiB: Azure's week-long 2024 traces are some 30 MB per million requests)."""
LINE_BYTES = 64 << 10
"""Longest line of a request trace (64 KiB; a request is some 40 bytes)."""

Row = tuple[int, dict[str, object]]
"""A row's line number and its cells by column (a JSON line's values by key)."""


def trace_rows(path: str, jsonl: bool) -> Generator[Row, None, None]:
    """The rows of the trace at ``path``, read as they are asked for (module docstring)."""
    with open_bounded(path, TRACE_FILE_BYTES, "request trace") as file:
        lines = _lines(file, path)
        yield from (_json_rows(lines, path) if jsonl else _csv_rows(lines, path))


def _lines(file: BinaryIO, source: str) -> Iterator[str]:
    """Each line of ``file`` as text (a leading byte-order mark dropped), its end kept; refuses a line above
    :data:`LINE_BYTES`, a file above :data:`TRACE_FILE_BYTES` (a pipe's included), binary data and invalid
    UTF-8."""
    read = 0
    for number in range(1, TRACE_FILE_BYTES + 2):
        try:
            data = file.readline(LINE_BYTES + 1)
        except OSError as exc:
            raise InputError(source, "", f"cannot read the request trace: {exc.strerror or exc}") from None
        if not data:
            return
        read += len(data)
        if read > TRACE_FILE_BYTES:
            raise InputError(source, "", f"the request trace is above the limit of {TRACE_FILE_BYTES >> 20} MiB")
        if len(data) > LINE_BYTES:
            raise InputError(source, f"line {number}", f"a line is longer than {LINE_BYTES >> 10} KiB")
        if b"\0" in data:
            raise InputError(source, f"line {number}", "the request trace is binary, not text (a NUL byte)")
        try:
            yield data.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                source,
                f"line {number}",
                f"the request trace is not UTF-8 text (invalid byte at column {exc.start + 1})",
            ) from None


def _csv_rows(lines: Iterator[str], source: str) -> Iterator[Row]:
    """The CSV's rows after its header, as header-keyed mappings with their line numbers."""
    reader = csv.reader(lines)
    header: list[str] | None = None
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                continue
            if len(row) != len(header):
                raise InputError(
                    source,
                    f"line {reader.line_num}",
                    f"expected {len(header)} columns as the header has, got {len(row)}",
                )
            yield reader.line_num, dict(zip(header, row))
    except csv.Error:
        raise InputError(
            source, f"line {reader.line_num}", "invalid CSV (a quote left open, or a cell too long)"
        ) from None


def _json_rows(lines: Iterator[str], source: str) -> Iterator[Row]:
    """One JSON object per non-blank line, with its line number."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        value = parse_json(line, f"{source}:{number}")
        if not isinstance(value, dict):
            raise InputError(source, f"line {number}", "expected a JSON object with a request's keys")
        yield number, value
