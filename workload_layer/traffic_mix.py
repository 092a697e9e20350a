"""Several independent traffic tasks at once on every tile: PALM's congestion case (its Fig. 7).

PALM stacks all-reduce, all-to-all and DRAM read and write tasks on a tiled accelerator and shows that an
analytical network, which lets every message run as if alone, underestimates their time. Each task here is

- a collective (``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``) of ``size`` bytes over
  every tile or over a ``group`` of tiles, run by the system layer's algorithms; or
- a DRAM-like transfer: with ``dram_read`` every tile receives ``size`` bytes from its memory controller, with
  ``dram_write`` it sends them there, as one point-to-point message each (communicator name ``dram``).

The first ``tiles`` NPUs are the tiles; the ``memory_controllers`` NPUs after them stand for DRAM controllers
(they compute nothing and only move DRAM bytes), and tile ``t`` uses controller ``tiles + t % memory_controllers``.
On a mesh of shape ``[C, R + 1]`` with ``C`` controllers and ``C x R`` tiles the controllers are thus the mesh's
last row — the edge where a tiled accelerator reaches its off-chip DRAM — and each serves the tiles of its
column, whose DRAM traffic shares the column's links with the collectives.

Nothing orders the tasks of a round, so their traffic overlaps. With ``repeat`` the round runs again on an NPU
once every node of its previous round finished: whole rounds (rather than one chain per task) keep the order in
which each tile issues collectives on a group the same on every tile, which is how collectives are matched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from stratasim.kernel.collective_types import COLLECTIVE_TYPES
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.schema import Bytes, Section
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import workload_pb2

__all__ = ["TrafficMixWorkload", "TrafficMixConfig", "TaskConfig"]

_DRAM = ("dram_read", "dram_write")


class TaskConfig(Section):
    """One task of the mix: its ``kind``, ``size`` in bytes per tile and, for a collective, the tiles it spans
    (``group``, NPU ids; default every tile)."""

    kind: Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "dram_read", "dram_write"]
    """A collective, or a transfer to or from the memory controllers."""
    size: Bytes = Field(gt=0)
    """Bytes per tile."""
    group: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, min_length=2)
    """Tiles a collective spans, by NPU id (default: every tile)."""

    @field_validator("group")
    @classmethod
    def _group_fits(cls, group: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if group is None:
            return None
        kind = info.data.get("kind")
        if kind in _DRAM:
            raise ValueError(f"a {kind} runs on every tile; only collectives take a group")
        repeated = sorted(npu for npu in set(group) if group.count(npu) > 1)
        if repeated:
            raise ValueError(f"lists NPU {repeated[0]} more than once")
        return group


class TrafficMixConfig(Section):
    """``workload:`` keys of ``kind: traffic_mix``: the ``tasks`` every tile runs at once, ``repeat`` rounds of
    them; ``tiles`` NPUs run them (default: every NPU of the topology but the controllers), followed by
    ``memory_controllers`` NPUs standing for DRAM controllers (needed by DRAM transfers)."""

    tasks: list[TaskConfig] = Field(min_length=1)
    """Tasks every tile runs at once."""
    tiles: int | None = Field(default=None, ge=2)
    """NPUs running the tasks (default: every NPU but the memory controllers)."""
    memory_controllers: int = Field(default=0, ge=0, validate_default=True)
    """NPUs after the tiles standing for DRAM controllers (needed by DRAM transfers)."""
    repeat: int = Field(default=1, ge=1)
    """Rounds of the tasks."""

    @field_validator("memory_controllers")
    @classmethod
    def _controllers_for_dram(cls, controllers: int, info: ValidationInfo) -> int:
        dram = [index for index, task in enumerate(info.data.get("tasks", ())) if task.kind in _DRAM]
        if dram and controllers == 0:
            which = ", ".join(f"tasks[{index}]" for index in dram)
            raise ValueError(
                f"{which} move DRAM bytes, which needs at least one memory controller (an NPU after the tiles "
                "standing for a DRAM controller)"
            )
        return controllers


class TrafficMixWorkload:
    """Every tile issues all the tasks at once; each memory controller answers the DRAM transfers of its tiles."""

    name = "traffic_mix"
    Config = TrafficMixConfig

    def __init__(self, config: TrafficMixConfig) -> None:
        self.config = config

    def npus_required(self) -> int | None:
        tiles = self.config.tiles
        return None if tiles is None else tiles + self.config.memory_controllers

    def estimate(self, npus: int) -> WorkEstimate:
        """A graph per NPU: each round, a tile's tasks, or a memory controller's answers to the DRAM transfers of
        every tile it serves."""
        controllers = self.config.memory_controllers
        served = -(-npus // controllers) if controllers else 1
        nodes = self.config.repeat * len(self.config.tasks) * max(served, 1) * 2
        largest = max(task.size for task in self.config.tasks)
        return WorkEstimate(npus, nodes, nodes, largest, "workload.repeat and workload.tasks")

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        tiles = self._tiles(npus)
        groups = [self._group(index, task, tiles, npus) for index, task in enumerate(self.config.tasks)]
        graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(npus)]
        for npu in range(npus):
            previous: list[int] = []
            for round_index in range(self.config.repeat):
                previous = self._round(graphs[npu], npu, tiles, groups, round_index, previous)
        return graphs

    def _tiles(self, npus: int) -> int:
        """How many of the ``npus`` NPUs are tiles (the rest past the controllers stay idle)."""
        controllers = self.config.memory_controllers
        tiles = self.config.tiles if self.config.tiles is not None else npus - controllers
        if tiles < 2:
            raise WorkloadError(
                f"workload.memory_controllers: {controllers} controllers on {npus} NPUs leave {max(tiles, 0)} for "
                "tiles; a traffic mix needs at least 2 tiles"
            )
        return tiles

    def _group(self, index: int, task: TaskConfig, tiles: int, npus: int) -> list[int]:
        """The sorted tiles a collective task spans; empty for a DRAM transfer or for every NPU of the workload."""
        if task.kind in _DRAM:
            return []
        if task.group is None:
            return [] if tiles == npus else list(range(tiles))
        outside = [npu for npu in task.group if npu >= tiles]
        if outside:
            raise WorkloadError(
                f"workload.tasks[{index}].group: NPU {outside[0]} is not a tile; the tiles are NPUs 0..{tiles - 1}"
            )
        return sorted(task.group)

    def _round(
        self,
        graph: workload_pb2.ExecutionGraph,
        npu: int,
        tiles: int,
        groups: list[list[int]],
        round_index: int,
        previous: list[int],
    ) -> list[int]:
        """Add ``npu``'s nodes of one round, each after all of ``previous`` (the last round's); return their ids."""
        controllers = self.config.memory_controllers
        first = len(graph.nodes)
        for index, (task, group) in enumerate(zip(self.config.tasks, groups)):
            node = workload_pb2.Node(
                name=f"{task.kind} {index}" + (f" round {round_index}" if self.config.repeat > 1 else ""),
                ctrl_deps=previous,
                comm_bytes=task.size,
            )
            if task.kind not in _DRAM:
                if npu < tiles and (not group or npu in group):
                    node.type, node.comm_type = workload_pb2.COMM_COLL_NODE, COLLECTIVE_TYPES[task.kind]
                    node.group.extend(group)
                    _append(graph, node)
                continue
            node.tag = round_index * len(self.config.tasks) + index
            node.pg_name = "dram"
            reading = task.kind == "dram_read"
            if npu < tiles:  # the tile's end of its transfer
                node.type = workload_pb2.COMM_RECV_NODE if reading else workload_pb2.COMM_SEND_NODE
                node.peer = tiles + npu % controllers
                _append(graph, node)
            elif npu < tiles + controllers:  # the controller's end of each of its tiles' transfers
                node.type = workload_pb2.COMM_SEND_NODE if reading else workload_pb2.COMM_RECV_NODE
                for tile in range(npu - tiles, tiles, controllers):
                    node.peer = tile
                    _append(graph, node, f" tile {tile}")
        return list(range(first, len(graph.nodes)))


def _append(graph: workload_pb2.ExecutionGraph, node: workload_pb2.Node, suffix: str = "") -> None:
    """Add a copy of ``node`` to ``graph``, numbered by its position, its name extended by ``suffix``."""
    added = graph.nodes.add()
    added.CopyFrom(node)
    added.id = len(graph.nodes) - 1
    added.name += suffix
