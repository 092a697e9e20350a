"""A measured profile in the ``profile`` backend's table format, so the backend replays the measurements directly.

The ``profile`` backend (:mod:`stratasim.compute_layer.profile_table`) keys GEMMs by ``batch, m, k, n`` and
element-wise operators by ``elements``. A profile's ``gemm`` rows become GEMMs of batch 1 and its ``bmm`` rows
batched GEMMs; its ``add`` rows (two inputs, one output: the plain element-wise kernel) become the element-wise
points. Attention, normalisation and the other kinds have no place in that format and are left out (the
``measured`` backend, or a fitted model, prices them).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from stratasim.compute_layer.measured.profile_rows import ProfileRow

__all__ = ["BACKEND_COLUMNS", "ELEMENTWISE_SOURCE", "backend_rows", "write_backend_table"]

BACKEND_COLUMNS = ("device", "kind", "dtype", "batch", "m", "k", "n", "elements", "time")
ELEMENTWISE_SOURCE = "add"
"""The profile kind whose rows stand for the ``profile`` backend's element-wise operator."""


def backend_rows(rows: Iterable[ProfileRow], device: str, dtype: str) -> list[dict[str, str | int]]:
    """The backend table's rows of ``rows`` measured on ``device`` in ``dtype``, in profile order."""
    table: list[dict[str, str | int]] = []
    for row in rows:
        point: dict[str, str | int] = {"device": device, "dtype": dtype, "time": f"{row.us!r}us"}
        if row.kind in ("gemm", "bmm"):
            batch = row.dim("B") if row.kind == "bmm" else 1
            dims = {"batch": batch, "m": row.dim("M"), "k": row.dim("K"), "n": row.dim("N")}
            table.append({**point, "kind": "gemm", **dims})
        elif row.kind == ELEMENTWISE_SOURCE:
            table.append({**point, "kind": "elementwise", "elements": row.dim("elements")})
    return table


def write_backend_table(rows: Iterable[ProfileRow], path: str | Path, device: str, dtype: str) -> Path:
    """Write the backend table of ``rows`` (see :func:`backend_rows`) as CSV at ``path`` and return the path."""
    target = Path(path)
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=BACKEND_COLUMNS)
        writer.writeheader()
        writer.writerows(backend_rows(rows, device, dtype))
    return target
