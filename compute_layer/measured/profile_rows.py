"""Reading a measured operator profile (``data/*.csv``): one row per operator, its kind, its time and its shape.

The table is the one ``measure_profile.py`` writes (see ``data/provenance.json``): a ``kind`` column, the median time
per call ``us`` in microseconds, and the shape columns each kind needs (:data:`SHAPE_COLUMNS`), empty where a kind
has no such column. A malformed row raises :class:`~stratasim.kernel.errors.ConfigError` naming the file and line.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from stratasim.kernel.errors import ConfigError

__all__ = ["LAUNCH_EAGER", "ProfileRow", "SHAPE_COLUMNS", "UNFITTED_KINDS", "read_profile"]

ELEMENTWISE_KINDS = ("add", "gelu", "silu_mul", "layernorm", "rmsnorm", "softmax", "copy")
"""The element-wise and normalisation kinds a profile measures, each over ``elements`` bf16 values."""

LAUNCH_EAGER = "launch_eager"
"""The optional kind measuring the host's time to issue one kernel without a CUDA graph (``stratasim profile``
measures it; the shipped reference profiles do not have it)."""

UNFITTED_KINDS = ("tiny_kernel", LAUNCH_EAGER)
"""The kinds no fitted class prices: the floors' evidence and the eager host time, each a class of its own."""

SHAPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "tiny_kernel": (),
    LAUNCH_EAGER: (),
    "gemm": ("M", "K", "N"),
    "bmm": ("B", "M", "K", "N"),
    "attention_causal": ("batch_heads", "seq", "head_dim", "pass_"),
    "attention_decode": ("batch", "context", "head_dim", "heads", "kv_heads", "kv_bytes"),
    **{kind: ("elements",) for kind in ELEMENTWISE_KINDS},
}
"""The columns each kind's shape is read from (``pass_`` is ``forward`` or ``backward``; the rest are integers)."""


@dataclass(frozen=True)
class ProfileRow:
    """One measured operator: its ``kind``, time ``us`` (microseconds), shape (column name to value) and ``line``."""

    kind: str
    us: float
    shape: dict[str, int | str]
    line: int

    def dim(self, column: str) -> int:
        """The integer shape column ``column``."""
        value = self.shape[column]
        assert isinstance(value, int)
        return value


def read_profile(path: str | Path) -> list[ProfileRow]:
    """The rows of the profile at ``path``, in file order; ConfigError on a missing column, an unknown kind, a
    missing or non-integer shape value or a time that is not a positive number."""
    source = str(path)
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = set(reader.fieldnames or ())
        for column in ("kind", "us"):
            if column not in header:
                raise ConfigError(source, [("line 1", f"the header has no {column!r} column")])
        return [_row(record, reader.line_num, source, header) for record in reader]


def _row(record: dict[str, str], line: int, source: str, header: set[str]) -> ProfileRow:
    def fail(message: str) -> ConfigError:
        return ConfigError(source, [(f"line {line}", message)])

    kind = (record.get("kind") or "").strip()
    if kind not in SHAPE_COLUMNS:
        raise fail(f"kind {kind!r} is not one of {', '.join(SHAPE_COLUMNS)}")
    try:
        us = float(record["us"])
    except ValueError:
        raise fail(f"time us={record['us']!r} is not a number") from None
    if not us > 0:
        raise fail(f"time us={record['us']} is not positive")
    shape: dict[str, int | str] = {}
    for column in SHAPE_COLUMNS[kind]:
        text = (record.get(column) or "").strip() if column in header else ""
        if not text:
            raise fail(f"a {kind} row needs the shape column {column!r}")
        if column == "pass_":
            if text not in ("forward", "backward"):
                raise fail(f"pass_={text!r} is neither 'forward' nor 'backward'")
            shape[column] = text
            continue
        try:
            shape[column] = int(text)
        except ValueError:
            raise fail(f"{column}={text!r} is not an integer") from None
    return ProfileRow(kind, us, shape, line)
