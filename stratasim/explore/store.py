"""The results store: one SQLite file, a row per trial, each committed as soon as the trial ends.

A trial is known by its parameters (canonical JSON) and its fidelity level: re-running a sweep on the same store skips the trials
already finished (done or failed) and runs the rest, so a sweep killed at any moment — even ``kill -9`` — loses
nothing it finished. A store holds one sweep: opening it for another is an error.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.kernel.errors import InputError, StrataSimError
from stratasim.kernel.safe_load import parse_json

__all__ = ["TrialRecord", "ResultStore", "trial_key", "read_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweep (id INTEGER PRIMARY KEY CHECK (id = 1), definition TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
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
    """A sweep's trials in the SQLite file ``path``, created if missing."""

    def __init__(self, path: str | Path, definition: str) -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(self.path, timeout=5.0)
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(trials)")}
            if "fidelity" not in columns:
                self._db.close()
                raise StrataSimError(
                    f"{self.path}: written by an earlier StrataSim (no fidelity levels); give another --db or delete it"
                )
            row = self._db.execute("SELECT definition FROM sweep WHERE id = 1").fetchone()
            if row is None:
                with self._db:
                    self._db.execute("INSERT INTO sweep (id, definition) VALUES (1, ?)", (definition,))
            elif row[0] != definition:
                raise StrataSimError(
                    f"{self.path}: this results store holds another sweep; give another --db or delete it"
                )
        except sqlite3.Error as exc:
            raise StrataSimError(f"{self.path}: cannot use it as a results store: {exc}") from None

    def finished(self, fidelity: int = 0) -> dict[str, TrialRecord]:
        """The trials finished so far at fidelity level ``fidelity``, by key."""
        rows = self._query(
            "SELECT number, key, params, status, metrics, error, wall_seconds FROM trials "
            f"WHERE fidelity = {int(fidelity)}"
        )
        return {
            key: TrialRecord(
                number, _json(params, self.path), status, _json(metrics or "{}", self.path), error or "", wall, fidelity
            )
            for number, key, params, status, metrics, error, wall in rows
        }

    def record(self, record: TrialRecord) -> None:
        """Keep one finished trial, committed at once."""
        try:
            with self._db:
                self._db.execute(
                    "INSERT OR REPLACE INTO trials (number, fidelity, key, params, status, metrics, error, "
                    "wall_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.number,
                        record.fidelity,
                        trial_key(record.params),
                        json.dumps(record.params),
                        record.status,
                        json.dumps(record.metrics),
                        record.error,
                        record.wall_seconds,
                    ),
                )
        except sqlite3.Error as exc:
            raise StrataSimError(f"{self.path}: cannot record trial {record.number}: {exc}") from None

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(sql).fetchall()
        except sqlite3.Error as exc:
            raise StrataSimError(f"{self.path}: cannot read the results store: {exc}") from None

    def close(self) -> None:
        self._db.close()


def _json(text: object, path: str | Path) -> Any:
    """A params or metrics column, parsed with the caps of :mod:`stratasim.kernel.safe_load` (a store may be
    anyone's file)."""
    return parse_json(text if isinstance(text, str) else repr(text), str(path))


def read_store(path: str | Path, lock_wait_seconds: float = 5.0) -> tuple[str, list[TrialRecord]]:
    """A store's sweep definition and its trials by fidelity level and number, read without changing (or creating) the file; one
    :class:`StrataSimError` for a missing file, one that is not a results store, a corrupt or a locked one."""
    path = Path(path)
    if not path.is_file():
        raise StrataSimError(f"{path}: no such results store (a file written by stratasim sweep --db)")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=lock_wait_seconds)
        try:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"sweep", "trials"} <= tables:
                raise StrataSimError(f"{path}: a SQLite database, but not a results store written by stratasim sweep")
            row = db.execute("SELECT definition FROM sweep WHERE id = 1").fetchone()
            rows = db.execute(
                "SELECT number, params, status, metrics, error, wall_seconds, fidelity FROM trials "
                "ORDER BY fidelity, number"
            )
            trials = [
                TrialRecord(number, _json(params, path), status, _json(metrics or "{}", path), error or "", wall, level)
                for number, params, status, metrics, error, wall, level in rows
            ]
        finally:
            db.close()
    except sqlite3.Error as exc:
        why = "it is locked by another process; try again when it is done" if "locked" in str(exc) else str(exc)
        raise StrataSimError(f"{path}: cannot read it as a results store: {why}") from None
    except InputError as exc:  # a params or metrics column that is not JSON
        raise StrataSimError(f"{path}: a corrupt results store: {exc.what}") from None
    if row is None:
        raise StrataSimError(f"{path}: a results store without its sweep's definition (corrupt)")
    return str(row[0]), trials
