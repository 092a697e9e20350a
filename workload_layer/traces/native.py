"""Replaying StrataSim's own trace files, ``<prefix>.<rank>.pb`` (one ``ExecutionGraph`` each, see
:mod:`stratasim.workload_layer.traces.convert`), as ``workload: {kind: stratasim_trace, path: <prefix>}``.

Unlike a Chakra trace, these keep everything the IR says: operators for the compute layer to price, blocks,
communicator groups, roots, exact picosecond durations; so a study's workload exported with ``stratasim trace
export --to stratasim`` replays to the same time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from stratasim.kernel.graph_blocks import foreign
from stratasim.kernel.schema import Section
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.convert import read_graphs
from stratasim.workload_layer.traces.rank_files import RankFileTrace

__all__ = ["StrataSimTraceConfig", "StrataSimTraceWorkload"]


class StrataSimTraceConfig(Section):
    """``workload:`` keys of ``kind: stratasim_trace``: ``path`` is the trace prefix (files ``<path>.<rank>.pb``,
    relative to the study file's folder); ``npus``, when given, must equal the number of rank files."""

    study_files: ClassVar[tuple[str, ...]] = ("path",)
    path: str = Field(min_length=1)
    """Prefix of the trace files ``<path>.<rank>.pb``, relative to the study file's folder."""
    npus: int | None = Field(default=None, ge=1)
    """NPUs the trace must have (a check against the number of rank files; default: however many there are)."""


class StrataSimTraceWorkload(RankFileTrace):
    """Replays a StrataSim trace: NPU ``i`` runs the graph of ``<path>.<i>.pb``."""

    name = "stratasim_trace"
    Config = StrataSimTraceConfig

    def __init__(self, config: StrataSimTraceConfig) -> None:
        super().__init__(config, ".pb", "StrataSim")
        self.config = config

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        self._check_ranks(npus)
        return foreign(read_graphs(self.config.path))
