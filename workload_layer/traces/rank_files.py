"""Traces of one file per rank, ``<prefix>.<rank><suffix>`` for ranks 0..N-1 (Chakra's ``.et`` files, StrataSim's
own): finding the files, bounding the work replaying them builds (:class:`~stratasim.kernel.work.WorkEstimate`)
from their records or sizes, and the workload base that checks a study runs them on as many NPUs as there are
files."""

from __future__ import annotations

import mmap
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.work import WorkEstimate
from stratasim.workload_layer.traces.et_records import length_prefix

__all__ = ["COUNTED_RECORDS", "RankFileTrace", "RankFiles", "files_estimate", "trace_files"]


_BYTES_PER_NODE = 4
"""Fewer bytes than any serialised node takes (an id, a type and a record length at least): a file's size over it
bounds the nodes it holds."""
COUNTED_RECORDS = 1 << 20
"""Records the estimate counts, over all of a Chakra trace's rank files, before it bounds the rest by their sizes
over :data:`_BYTES_PER_NODE`. A real node takes some 50 to 200 bytes (the transformer example's export: 67), so the
size bound alone is 15 to 50 times the nodes there are; counting costs a length prefix per record (some 0.3 s a
million) and stops where the nodes alone would pass the default memory budget, so a huge trace still meets the
size bound."""


def files_estimate(files: Sequence[Path], drivers: str, records: bool = False) -> WorkEstimate:
    """What replaying ``files`` (one per rank) builds: with ``records`` (a file of length-delimited records, one
    node each after the metadata) the nodes counted in each, up to :data:`COUNTED_RECORDS` over all files; past
    that, or without ``records``, bounded by the files' sizes. Messages are unknown until read
    (``largest_message`` 0)."""
    left = COUNTED_RECORDS if records else 0
    nodes = 1
    for file in files:
        counted = _count_records(file, left) if left else None
        if counted is None:
            left = 0
            nodes = max(nodes, file.stat().st_size // _BYTES_PER_NODE + 1)
        else:
            left -= counted
            nodes = max(nodes, counted)
    return WorkEstimate(len(files), nodes, nodes, 0, drivers)


def _count_records(path: Path, most: int) -> int | None:
    """The length-delimited records of ``path`` (its length prefixes walked, nothing decoded); None past ``most``
    or when the file cannot be walked (the reader then says why)."""
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            position, count, end = 0, 0, len(data)
            while position < end:
                prefix = length_prefix(data, position)
                if prefix is None:
                    return None
                length, position = prefix
                position += length
                count += 1
                if count > most:
                    return None
            return count if position == end else None
    except (OSError, ValueError):  # unreadable, a device, an empty file (mmap refuses it)
        return None


def trace_files(prefix: str | Path, suffix: str = ".et", what: str = "Chakra") -> list[Path]:
    """The files ``<prefix>.<rank><suffix>`` for ranks 0..N-1, relative paths resolved against the current
    directory; raises :class:`WorkloadError` if none exist (naming ``what`` traces) or a rank in between is
    missing."""
    base = Path(prefix).absolute()
    pattern = re.compile(re.escape(base.name) + r"\.(\d+)" + re.escape(suffix))
    ranks: dict[int, Path] = {}
    if base.parent.is_dir():
        for candidate in base.parent.iterdir():
            match = pattern.fullmatch(candidate.name)
            if match and candidate.is_file():
                ranks[int(match.group(1))] = candidate
    if not ranks:
        raise WorkloadError(f"no {what} traces match {prefix}.<rank>{suffix}")
    missing = next((rank for rank in range(len(ranks)) if rank not in ranks), None)
    if missing is not None:
        raise WorkloadError(
            f"{prefix}: ranks must be 0..N-1; {prefix}.{missing}{suffix} is missing (found up to rank {max(ranks)})"
        )
    return [ranks[rank] for rank in range(len(ranks))]


class RankFiles(Protocol):
    """What a trace of one file per rank says of its files: their prefix, and how many ranks it expects."""

    path: str
    npus: int | None


class RankFileTrace:
    """A workload replayed from one file per rank, ``<path>.<rank><suffix>``: the files, the NPUs they need, an
    estimate bounded by their sizes, and the check that a study runs them on as many NPUs as there are files."""

    def __init__(self, files: RankFiles, suffix: str, what: str) -> None:
        self._rank_files = files
        self._suffix = suffix
        self._what = what

    def _files(self) -> list[Path]:
        config = self._rank_files
        files = trace_files(config.path, self._suffix, self._what)
        if config.npus is not None and config.npus != len(files):
            raise WorkloadError(
                f"workload.npus is {config.npus} but {len(files)} {self._what} traces match {config.path}"
            )
        return files

    def npus_required(self) -> int:
        """The number of rank files of the trace."""
        return len(self._files())

    def estimate(self, npus: int) -> WorkEstimate:
        """A graph per rank file, bounded by the files' sizes."""
        return files_estimate(self._files(), f"the trace {self._rank_files.path}", records=self._suffix == ".et")

    def _check_ranks(self, npus: int) -> None:
        ranks = len(self._files())
        if npus != ranks:
            raise WorkloadError(f"the {self._what} trace {self._rank_files.path} has {ranks} ranks, not {npus}")
