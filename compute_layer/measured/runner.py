"""Measuring a profile: every operator of the grid timed by a timing function, as rows of the reference CSV.

The timing function takes a :class:`~stratasim.compute_layer.measured.grid.Case` and returns the median time per
call in microseconds; on a GPU it is :class:`~stratasim.compute_layer.measured.cuda_timing.CudaTimer`, in tests any
function. The rows and the file are the reference profiles' (``data/*.csv``): ``kind``, ``us`` (rounded to the
nanosecond), the kind's shape columns, and for GEMMs the achieved ``tflops``; the header names every column,
cells a kind has no use for stay empty, so :func:`~stratasim.compute_layer.measured.profile_rows.read_profile`
reads the file back.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from stratasim.compute_layer.measured.grid import Case

__all__ = ["CaseTimer", "COLUMNS", "MeasuredRow", "measure", "profile_row", "write_rows"]

CaseTimer = Callable[[Case], float]
"""The median time per call of one case, in microseconds."""

MeasuredRow = Mapping[str, int | float | str]

COLUMNS = (
    "kind",
    "us",
    "B",
    "K",
    "M",
    "N",
    "batch",
    "batch_heads",
    "context",
    "elements",
    "head_dim",
    "heads",
    "kv_bytes",
    "kv_heads",
    "pass_",
    "seq",
    "tflops",
)
"""The reference CSV's header: ``kind`` and ``us``, then every shape column and ``tflops`` in sorted order."""


def profile_row(case: Case, us: float) -> dict[str, int | float | str]:
    """The CSV row of ``case`` measured at ``us`` microseconds per call."""
    row: dict[str, int | float | str] = {"kind": case.kind, "us": round(us, 3), **case.shape}
    if case.kind in ("gemm", "bmm"):
        batch = case.dim("B") if case.kind == "bmm" else 1
        flops = 2 * batch * case.dim("M") * case.dim("K") * case.dim("N")
        row["tflops"] = round(flops / us / 1e6, 2)
    return row


def measure(
    cases: Iterable[Case], timer: CaseTimer, progress: Callable[[int], None] | None = None
) -> list[dict[str, int | float | str]]:
    """The rows of ``cases`` timed by ``timer``, in order; ``progress`` (if given) hears each row's index."""
    rows = []
    for index, case in enumerate(cases):
        rows.append(profile_row(case, timer(case)))
        if progress is not None:
            progress(index)
    return rows


def write_rows(rows: Iterable[MeasuredRow], path: str | Path) -> Path:
    """Write ``rows`` as the reference CSV at ``path`` and return the path."""
    target = Path(path)
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return target
