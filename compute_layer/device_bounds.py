"""The largest device a study or a request may describe: bounds beyond every real accelerator, each with its source,
so a PE array, a wafer or a buffer past them is one clear error naming the key, not a run on a device nobody built.

The anchors are the largest chip built, Cerebras's WSE-3 (2024: 900,000 cores on one wafer, 44 GB of on-chip SRAM,
21 PB/s of SRAM bandwidth at about 1.1 GHz) and the largest accelerator memory, 288 GB of HBM3e (NVIDIA B300, AMD
MI355X, 2025). Each bound leaves a margin of at least ten times over its anchor, for designs a study explores beyond
today's. The models check them (:class:`~stratasim.compute_layer.timeloop.accelerator.Accelerator`,
:class:`~stratasim.compute_layer.wafer.accelerator.Wafer`, :class:`~stratasim.compute_layer.devices.Device`), so
study sections and devices described on the wire alike are refused.
"""

from __future__ import annotations

__all__ = ["MAX_CORES", "MAX_LEVEL_WORDS", "MAX_ON_CHIP_BYTES", "MAX_PES", "MAX_WORDS_PER_CYCLE", "beyond"]

MAX_PES = 1 << 24
"""PEs of one array (rows x cols), 16,777,216: WSE-3's 900,000 cores, each one PE, times 18."""

MAX_CORES = 1 << 24
"""Cores of one wafer (tiles x cores per tile), or compute units of one device (and its tile's sides), 16,777,216:
WSE-3's 900,000 cores times 18."""

MAX_LEVEL_WORDS = 1 << 42
"""Words a bounded storage level (or one operand's partition) keeps, some 4.4 x 10^12: 4.4 TB at a byte a word, 15
times the 288 GB of HBM3e of the largest accelerator memory."""

MAX_WORDS_PER_CYCLE = 1 << 28
"""Words a storage level moves per cycle, some 2.7 x 10^8: WSE-3's 21 PB/s of SRAM bandwidth at 1.1 GHz is 1.9 x 10^7
bytes a cycle, so 14 times that at a byte a word."""

MAX_ON_CHIP_BYTES = 1 << 40
"""Bytes of one tile's or one device's on-chip SRAM, 1 TiB: 25 times WSE-3's 44 GB for its whole wafer."""


def beyond(key: str, value: int, bound: int, what: str) -> str | None:
    """The problem with ``key``'s ``value`` when it exceeds ``bound`` (``what`` it counts, as the bound's docstring
    says where it comes from), else None."""
    if value <= bound:
        return None
    return f"{key}: {value:,} {what} is more than any real device has (at most {bound:,}, ten times the largest built)"
