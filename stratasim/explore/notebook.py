"""Sweeps from Python, for notebooks: run one (a sweep file, or its contents as a mapping) and get its results
back as records, or as a pandas DataFrame with ``.to_frame()``."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stratasim.explore.results import SweepResults, read_results
from stratasim.explore.run import run_sweep
from stratasim.explore.store import ResultStore
from stratasim.explore.sweep_file import load_sweep, parse_sweep

__all__ = ["sweep"]


def sweep(
    definition: str | Path | Mapping[str, Any],
    db: str | Path | None = None,
    *,
    workers: int = 1,
    cluster: str | None = None,
) -> SweepResults:
    """Run a sweep — a sweep file's path, or its contents as a mapping (``base`` relative to the current folder)
    — into the store ``db`` (resuming what it holds; None: a temporary store, removed afterwards) on ``workers``
    local processes or the Dask scheduler at ``cluster``, and read its results back."""
    if isinstance(definition, str | Path):
        plan = load_sweep(definition)
    else:
        plan = parse_sweep(definition, "the sweep mapping", Path.cwd())
    with tempfile.TemporaryDirectory(prefix="stratasim-sweep-") as folder:
        path = Path(db) if db is not None else Path(folder) / "sweep.db"
        store = ResultStore.for_sweep(path, plan)
        try:
            run_sweep(plan, store, workers=workers, cluster=cluster)
        finally:
            store.close()
        return read_results(path)
