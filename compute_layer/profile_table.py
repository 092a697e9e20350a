"""Reading a table of measured kernel times (CSV or JSON) into :class:`ProfileTable`, with every problem named.

A row measures one operator on one device::

    device, kind, dtype, <the kind's dims>, time [, energy_pj]

``kind`` is ``gemm`` (dims ``m``, ``k``, ``n`` and an optional ``batch``, default 1) or ``elementwise`` (dim
``elements``: the product of the tensor's shape). ``time`` is written with its unit (``12.5us``, ``800ns``; a
bare number is an error, as everywhere in StrataSim); ``energy_pj`` is optional, in picojoules. A CSV file has
these as its header (cells of dims another kind uses stay empty); a JSON file is a list of such objects, or
``{"rows": [...]}``. Unknown columns or keys, missing ones, unreadable or negative values and two rows for the
same point are errors naming the line (CSV) or ``rows[i]`` (JSON) and the column, never echoing the file's cells or
unknown column names (a study may name any file as its profile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType

from stratasim.kernel.errors import ConfigError, InputError, UnitError
from stratasim.kernel.operators import DType, dtype_name, parse_dtype
from stratasim.kernel.safe_load import TABLE_BYTES, csv_rows, parse_json, read_text
from stratasim.kernel.units import check_band, parse_time_ps
from stratasim.v1 import compute_pb2

__all__ = ["KIND_DIMS", "Measurement", "ProfileTable", "load_profile"]

KIND_DIMS: Mapping[compute_pb2.OperatorKind.ValueType, tuple[str, ...]] = MappingProxyType(
    {compute_pb2.GEMM: ("batch", "m", "k", "n"), compute_pb2.ELEMENTWISE: ("elements",)}
)
"""The dims a profile keys each operator kind by, in the order interpolation brackets them."""

_KINDS = {"gemm": compute_pb2.GEMM, "elementwise": compute_pb2.ELEMENTWISE}
_REQUIRED = ("device", "kind", "dtype", "time")
_OPTIONAL_DIMS = {"batch": 1}  # a dim a row may leave out, and its value then
_COLUMNS = (*_REQUIRED, "batch", "m", "k", "n", "elements", "energy_pj")

# (device lower-case, kind, dtype)
Key = tuple[str, compute_pb2.OperatorKind.ValueType, DType]


@dataclass(frozen=True)
class Measurement:
    """One measured point: duration in picoseconds, energy in picojoules (None if not measured), and where it
    was read (``line 4`` or ``rows[3]``)."""

    time_ps: int
    energy_pj: Fraction | None
    where: str


@dataclass(frozen=True)
class ProfileTable:
    """The measurements of one file, by (device, kind, dtype) and then by the kind's dims (:data:`KIND_DIMS`)."""

    source: str
    points: Mapping[Key, Mapping[tuple[int, ...], Measurement]]
    device_names: tuple[str, ...]

    def available(self, device: str) -> list[str]:
        """What the table measured on ``device``, as ``"gemm bf16"`` labels, sorted."""
        return sorted(
            f"{compute_pb2.OperatorKind.Name(kind).lower()} {dtype_name(dtype)}"
            for dev, kind, dtype in self.points
            if dev == device.strip().lower()
        )


def load_profile(path: str | Path) -> ProfileTable:
    """Read the CSV (``.csv``) or JSON (any other suffix) profile at ``path``; raise one :class:`ConfigError`
    listing every problem."""
    source = str(path)
    problems: list[tuple[str, str]] = []
    try:
        text = read_text(path, TABLE_BYTES, "profile")
        csv_file = Path(path).suffix.lower() == ".csv"
        rows = _csv_rows(text, source, problems) if csv_file else _json_rows(text, source, problems)
    except InputError as exc:
        what = (
            exc.what if exc.what.startswith(("cannot read", "the profile")) else f"cannot read the profile: {exc.what}"
        )
        raise ConfigError(source, [(exc.where, what)]) from None
    points: dict[Key, dict[tuple[int, ...], Measurement]] = {}
    names: dict[str, str] = {}
    for where, row in rows:
        parsed = _parse_row(where, row, problems)
        if parsed is None:
            continue
        key, dims, measurement, device = parsed
        names.setdefault(key[0], device)
        table = points.setdefault(key, {})
        if dims in table:
            problems.append((where, f"measures the same point as {table[dims].where}"))
            continue
        table[dims] = measurement
    if not points and not problems:
        problems.append(("", "the profile holds no measurements"))
    if problems:
        raise ConfigError(source, problems)
    frozen = {key: MappingProxyType(table) for key, table in points.items()}
    return ProfileTable(source, MappingProxyType(frozen), tuple(sorted(names.values(), key=str.lower)))


def _csv_rows(text: str, source: str, problems: list[tuple[str, str]]) -> list[tuple[str, Mapping[str, object]]]:
    lines = csv_rows(text, source)
    if not lines:
        problems.append(("line 1", f"expected a header naming the columns {', '.join(_COLUMNS)}"))
        return []
    columns = [column.strip().lower() for column in lines[0][1]]
    if not _known_columns("line 1", columns, problems):
        return []
    rows: list[tuple[str, Mapping[str, object]]] = []
    for number, row in lines[1:]:
        where = f"line {number}"
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(columns):
            problems.append((where, f"has {len(row)} cells but the header names {len(columns)} columns"))
            continue
        rows.append((where, {column: cell.strip() for column, cell in zip(columns, row) if cell.strip()}))
    return rows


def _json_rows(text: str, source: str, problems: list[tuple[str, str]]) -> list[tuple[str, Mapping[str, object]]]:
    try:
        data = parse_json(text, source)
    except InputError as exc:
        if not exc.what.startswith("invalid JSON: "):
            raise
        problems.append((exc.where.split(",")[0], f"not valid JSON: {exc.what.removeprefix('invalid JSON: ')}"))
        return []
    if isinstance(data, Mapping) and set(data) == {"rows"}:
        data = data["rows"]
    if not isinstance(data, list):
        problems.append(("", 'expected a JSON list of measurements, or {"rows": [...]}'))
        return []
    rows: list[tuple[str, Mapping[str, object]]] = []
    for index, row in enumerate(data):
        where = f"rows[{index}]"
        if not isinstance(row, Mapping):
            problems.append((where, f"expected an object with keys {', '.join(_REQUIRED)}..."))
        elif _known_columns(where, [str(key).lower() for key in row], problems):
            rows.append((where, {str(key).lower(): value for key, value in row.items() if value is not None}))
    return rows


def _known_columns(where: str, columns: list[str], problems: list[tuple[str, str]]) -> bool:
    unknown = [column for column in columns if column not in _COLUMNS]
    if unknown:  # not named: the file may be anyone's (a study can name any path)
        problems.append((where, f"{len(unknown)} unknown column(s); a profile has {', '.join(_COLUMNS)}"))
    missing = [column for column in _REQUIRED if column not in columns]
    if missing:
        problems.append((where, f"missing column(s) {', '.join(missing)}"))
    return not unknown and not missing


def _parse_row(
    where: str, row: Mapping[str, object], problems: list[tuple[str, str]]
) -> tuple[Key, tuple[int, ...], Measurement, str] | None:
    """The row's key, dims and measurement, or None after adding what is wrong with it to ``problems``."""
    before = len(problems)
    device = row.get("device")
    if not isinstance(device, str) or not device.strip():
        problems.append((f"{where}, device", "expected a device name"))
    kind = _KINDS.get(str(row.get("kind", "")).strip().lower())
    if kind is None:
        problems.append((f"{where}, kind", f"expected one of {', '.join(_KINDS)}"))
    try:
        dtype = parse_dtype(row.get("dtype"))
    except ValueError as exc:
        problems.append((f"{where}, dtype", _hidden(str(exc), row.get("dtype"))))
    dims = _dims(where, row, kind, problems) if kind is not None else ()
    try:
        time_ps = parse_time_ps(row.get("time"))
        check_band(Fraction(time_ps), "time", row.get("time"), Fraction(3600 * 10**12), "at most 1 h")
    except UnitError as exc:
        problems.append((f"{where}, time", _hidden(str(exc), row.get("time"))))
    energy = _energy(where, row.get("energy_pj"), problems)
    if len(problems) > before or kind is None or not isinstance(device, str):
        return None
    return (device.strip().lower(), kind, dtype), dims, Measurement(time_ps, energy, where), device.strip()


def _dims(
    where: str, row: Mapping[str, object], kind: compute_pb2.OperatorKind.ValueType, problems: list[tuple[str, str]]
) -> tuple[int, ...]:
    names = KIND_DIMS[kind]
    kind_name = compute_pb2.OperatorKind.Name(kind).lower()
    for other in ("batch", "m", "k", "n", "elements"):
        if other not in names and other in row:
            problems.append((f"{where}, {other}", f"a {kind_name} row has no {other}; its dims are {', '.join(names)}"))
    values: list[int] = []
    for name in names:
        raw = row.get(name, _OPTIONAL_DIMS.get(name))
        value = _positive_int(raw)
        if value is None:
            problems.append((f"{where}, {name}", f"a {kind_name} row needs {name}, a positive integer"))
            value = 0
        values.append(value)
    return tuple(values)


def _hidden(message: str, raw: object) -> str:
    """``message`` without the cell's text it quotes: a profile may be anyone's file."""
    return message.replace(repr(raw), "its value").replace(repr(str(raw).strip()), "its value")


def _positive_int(raw: object) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw)
    return raw if isinstance(raw, int) and 0 < raw < 2**63 else None


def _energy(where: str, raw: object, problems: list[tuple[str, str]]) -> Fraction | None:
    if raw is None or raw == "":
        return None
    try:
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise ValueError
        value = Fraction(raw.strip()) if isinstance(raw, str) else Fraction(raw)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError):
        problems.append((f"{where}, energy_pj", "expected a number of picojoules"))
        return None
    if value < 0:
        problems.append((f"{where}, energy_pj", "energy cannot be negative"))
        return None
    if value > 10**15:  # a kJ per kernel is no measurement
        problems.append((f"{where}, energy_pj", f"expected at most 10^15 picojoules (1 kJ), got {raw!r}"))
        return None
    return value
