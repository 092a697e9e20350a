"""The results store: one SQLite file, a row per trial, each committed as soon as the trial ends.

A trial is known by its parameters (canonical JSON) and its fidelity level: re-running a sweep on the same store
skips the trials already finished (done or failed) and runs the rest, so a sweep killed at any moment — even
``kill -9`` — loses nothing it finished. A store holds one sweep, run on one set of inputs: opening it for another
sweep, or after its base study (or a file the trials read) changed, is an error unless ``fresh`` discards what it
holds. A store is marked as ours (SQLite's ``application_id``); StrataSim never writes into a database it did not
create. Every row is validated as it is read: a store is anyone's file.
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.explore.generators import Generator
from stratasim.explore.inputs import changed_inputs, input_digests
from stratasim.explore.sweep_file import Range, Sweep, SweepSection, split_quantity
from stratasim.kernel.errors import InputError, StrataSimError
from stratasim.kernel.safe_load import parse_json

__all__ = ["TrialRecord", "ResultStore", "trial_key", "read_store", "check_trials", "APPLICATION_ID"]

APPLICATION_ID = 0x53545253
"""SQLite's ``application_id`` of a results store ("STRS"): what marks a database as one StrataSim created."""

_TABLES = ("sweep", "trials", "inputs")
_SCHEMA = """
CREATE TABLE sweep (id INTEGER PRIMARY KEY CHECK (id = 1), definition TEXT NOT NULL);
CREATE TABLE inputs (name TEXT PRIMARY KEY, digest TEXT NOT NULL);
CREATE TABLE trials (
    number INTEGER NOT NULL,
    fidelity INTEGER NOT NULL DEFAULT 0,
    key TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL,
    metrics TEXT,
    error TEXT,
    wall_seconds REAL,
    PRIMARY KEY (number, fidelity),
    UNIQUE (key, fidelity)
);
"""
_EARLIER_COLUMNS = {"number", "key", "params", "status", "metrics", "error", "wall_seconds"}
"""The trials table of every store written before the mark: a database without them is not one of ours."""
_COLUMNS = "number, params, status, metrics, error, wall_seconds, fidelity"
_AGAIN = "give another --db, or --fresh to discard its trials and run them again"


def trial_key(params: dict[str, Any]) -> str:
    """A trial's identity: its parameters as canonical JSON."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial: its number (order in the sweep), parameters, ``done`` or ``failed``, the report's
    numeric metrics (done) or the error (failed), how long it took, and the fidelity level it ran at (0, the
    first, without a ladder)."""

    number: int
    params: dict[str, Any]
    status: str
    metrics: dict[str, float]
    error: str
    wall_seconds: float
    fidelity: int = 0


class ResultStore:
    """A sweep's trials in the SQLite file ``path``, created if missing, for the sweep ``definition`` (its section
    as JSON) run on ``inputs`` (:func:`~stratasim.explore.inputs.input_digests`; None: not checked). ``fresh``
    discards the trials of a store of ours that holds another sweep or other inputs."""

    def __init__(
        self, path: str | Path, definition: str, inputs: dict[str, str] | None = None, fresh: bool = False
    ) -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(self.path, timeout=5.0)
        except sqlite3.Error as exc:
            raise StrataSimError(f"{self.path}: cannot use it as a results store: {exc}") from None
        try:
            self._open(definition, inputs, fresh)
        except (sqlite3.Error, StrataSimError) as exc:
            self._db.close()
            if isinstance(exc, StrataSimError):
                raise
            raise StrataSimError(f"{self.path}: cannot use it as a results store: {exc}") from None

    @classmethod
    def for_sweep(cls, path: str | Path, sweep: Sweep, fresh: bool = False) -> ResultStore:
        """The store at ``path`` for ``sweep``, its inputs' digests recorded (and checked when it holds trials)."""
        return cls(path, sweep.section.model_dump_json(), input_digests(sweep), fresh)

    def _open(self, definition: str, inputs: dict[str, str] | None, fresh: bool) -> None:
        kind = _kind(self._db)
        if kind == "foreign":
            raise StrataSimError(
                f"{self.path}: a database StrataSim did not create (not a results store of stratasim sweep); "
                "it never writes into another database: give another --db"
            )
        if kind == "earlier" and not fresh:
            raise StrataSimError(
                f"{self.path}: written by an earlier StrataSim (no fidelity levels, no record of its inputs); {_AGAIN}"
            )
        if kind == "ours" and not fresh:
            self._check(definition, inputs)
            return
        with self._db:
            for table in _TABLES:
                self._db.execute(f"DROP TABLE IF EXISTS {table}")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._db.execute("INSERT INTO sweep (id, definition) VALUES (1, ?)", (definition,))
            self._db.executemany("INSERT INTO inputs (name, digest) VALUES (?, ?)", sorted((inputs or {}).items()))

    def _check(self, definition: str, inputs: dict[str, str] | None) -> None:
        """Refuse to reuse the store for another sweep, or for this one on changed inputs."""
        row = self._db.execute("SELECT definition FROM sweep WHERE id = 1").fetchone()
        if row is None or row[0] != definition:
            raise StrataSimError(f"{self.path}: this results store holds another sweep; {_AGAIN}")
        stored = dict(self._db.execute("SELECT name, digest FROM inputs").fetchall())
        if not stored and inputs:  # made without its inputs (from Python, with none given): it adopts these
            with self._db:
                self._db.executemany("INSERT INTO inputs (name, digest) VALUES (?, ?)", sorted(inputs.items()))
            return
        changed = changed_inputs(stored, inputs) if inputs is not None else []
        if changed:
            raise StrataSimError(
                f"{self.path}: the stored trials ran on other inputs: {', '.join(changed)} changed since, so their "
                f"numbers would be stale; {_AGAIN}"
            )

    def finished(self, fidelity: int = 0) -> dict[str, TrialRecord]:
        """The trials finished so far at fidelity level ``fidelity``, by key."""
        try:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM trials WHERE fidelity = ?", (int(fidelity),)).fetchall()
        except sqlite3.Error as exc:
            raise StrataSimError(f"{self.path}: cannot read the results store: {exc}") from None
        records = [_record(row, self.path) for row in rows]
        return {trial_key(record.params): record for record in records}

    def record(self, record: TrialRecord) -> None:
        """Keep one finished trial, committed at once."""
        self.record_many([record])

    def record_many(self, records: Sequence[TrialRecord]) -> None:
        """Keep finished trials, committed together (a screening level's, priced in one call)."""
        try:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO trials (number, fidelity, key, params, status, metrics, error, "
                    "wall_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            record.number,
                            record.fidelity,
                            trial_key(record.params),
                            json.dumps(record.params),
                            record.status,
                            json.dumps(record.metrics),
                            record.error,
                            record.wall_seconds,
                        )
                        for record in records
                    ],
                )
        except sqlite3.Error as exc:
            numbers = ", ".join(str(record.number) for record in records[:3])
            raise StrataSimError(f"{self.path}: cannot record trial {numbers}: {exc}") from None

    def close(self) -> None:
        self._db.close()


def _kind(db: sqlite3.Connection) -> str:
    """``new`` (an empty database), ``ours`` (marked), ``earlier`` (a store of a StrataSim before the mark) or
    ``foreign``."""
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    mark = db.execute("PRAGMA application_id").fetchone()[0]
    if mark == APPLICATION_ID:
        return "ours"
    if not tables and mark == 0:
        return "new"
    columns = {row[1] for row in db.execute("PRAGMA table_info(trials)")}
    if mark != 0 or not tables <= {"sweep", "trials"} or not columns >= _EARLIER_COLUMNS:
        return "foreign"
    return "earlier"


def _record(row: tuple[Any, ...], path: Path) -> TrialRecord:
    """A trials row as a record, every column checked: one :class:`StrataSimError` naming what is wrong."""
    number, params, status, metrics, error, wall, fidelity = row
    where = (
        f"{path}: a corrupt results store: trial {number!r}" if _whole(number) else f"{path}: a corrupt results store"
    )
    try:
        params, metrics = _json(params, path), _json(metrics if metrics is not None else "{}", path)
    except InputError as exc:  # a params or metrics column that is not JSON
        raise StrataSimError(f"{where}: {exc.what}") from None
    problems = [
        *([] if _whole(number) else ["its number is not a whole number at least 0"]),
        *([] if _whole(fidelity) else ["its fidelity level is not a whole number at least 0"]),
        *([] if isinstance(params, dict) else ["its params are not a mapping"]),
        *([] if status in ("done", "failed") else ["its status is neither done nor failed"]),
        *([] if isinstance(metrics, dict) and all(map(_number, metrics.values())) else ["its metrics are not numbers"]),
        *([] if error is None or isinstance(error, str) else ["its error is not text"]),
        *([] if wall is None or _number(wall) else ["its wall_seconds is not a number"]),
    ]
    if problems:
        raise StrataSimError(f"{where}: {'; '.join(problems)}")
    return TrialRecord(number, params, status, metrics, error or "", float(wall or 0.0), fidelity)


def check_trials(section: SweepSection, records: Iterable[TrialRecord], path: str | Path) -> None:
    """Every trial holds a value for each key of the space (a range's a number or a quantity) and, done, a number
    for each objective and constraint: one :class:`StrataSimError` for the first that does not (a corrupt store)."""
    keys = [key for key, values in section.space.items() if not isinstance(values, Generator)]
    ranges = {key: values.log for key, values in section.space.items() if isinstance(values, Range)}
    wanted = [o.metric for o in section.objectives] + [c.metric for c in section.constraints]
    for record in records:
        problems = [f"no value of {key}" for key in keys if key not in record.params]
        problems += [
            f"{key} is not a {'positive ' if log else ''}number or quantity"
            for key, log in ranges.items()
            if not _quantity(record.params.get(key), log)
        ]
        if record.status == "done":
            problems += [f"no number {name}" for name in wanted if name not in record.metrics]
        if problems:
            raise StrataSimError(f"{path}: a corrupt results store: trial {record.number}: {'; '.join(problems)}")


def _quantity(value: object, positive: bool) -> bool:
    try:
        number = split_quantity(value)[0]
    except ValueError:
        return False
    return math.isfinite(number) and (number > 0 or not positive)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> bool:
    """A finite int or float (a whole number beyond a double, as JSON may hold, is none)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return abs(value) <= sys.float_info.max if isinstance(value, int) else math.isfinite(value)


def _json(text: object, path: str | Path) -> Any:
    """A params or metrics column, parsed with the caps of :mod:`stratasim.kernel.safe_load` (a store may be
    anyone's file)."""
    return parse_json(text if isinstance(text, str) else repr(text), str(path))


def read_store(path: str | Path, lock_wait_seconds: float = 5.0) -> tuple[str, list[TrialRecord]]:
    """A store's sweep definition and its trials by fidelity level and number, read without changing (or creating)
    the file; one :class:`StrataSimError` for a missing file, one that is not a results store, a corrupt or a
    locked one."""
    path = Path(path)
    if not path.is_file():
        raise StrataSimError(f"{path}: no such results store (a file written by stratasim sweep --db)")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=lock_wait_seconds)
        try:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if _kind(db) == "foreign" or not {"sweep", "trials"} <= tables:
                raise StrataSimError(f"{path}: a SQLite database, but not a results store written by stratasim sweep")
            row = db.execute("SELECT definition FROM sweep WHERE id = 1").fetchone()
            rows = db.execute(f"SELECT {_COLUMNS} FROM trials ORDER BY fidelity, number").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        why = "it is locked by another process; try again when it is done" if "locked" in str(exc) else str(exc)
        raise StrataSimError(f"{path}: cannot read it as a results store: {why}") from None
    if row is None or not isinstance(row[0], str):
        raise StrataSimError(f"{path}: a results store without its sweep's definition (corrupt)")
    return row[0], [_record(trial, path) for trial in rows]
