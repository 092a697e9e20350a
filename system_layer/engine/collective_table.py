"""Matching the collectives NPUs issue into shared collectives, and numbering them all once the run is over.

The k-th collective an NPU issues on a group is the k-th every other member issues on it, as NCCL requires;
collectives are numbered in the order they started (ties: the lowest NPU issuing first, then its issue order),
those run node by node and those inside blocks run whole alike (:mod:`stratasim.system_layer.collective_log`).
"""

from __future__ import annotations

import numpy as np

from stratasim.kernel.collective_types import COLLECTIVE_NAMES
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import Grid
from stratasim.system_layer.collective_log import CollectiveLog
from stratasim.system_layer.collectives.groups import phases_of
from stratasim.system_layer.engine.block_run import BlockRun
from stratasim.system_layer.engine.collective_stats import collective_stats
from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.scheduler.chunk_layout import Layout, layout
from stratasim.system_layer.scheduler.chunks import Collective
from stratasim.v1 import workload_pb2

__all__ = ["CollectiveTable", "Group", "Named"]


class Group(tuple[int, ...]):
    """A communicator group's sorted members that hashes in constant time: the tuple's hash, worked out once.

    Python recomputes a tuple's hash on every look-up, and on every-NPU runs each of thousands of NPUs looks its
    group up (a 16384-member group per NPU costs seconds); interned once per distinct group
    (:meth:`CollectiveTable.group`), every look-up then finds the very object and compares nothing further.
    It equals, and hashes as, the plain tuple of the same members."""

    _hash: int

    def __new__(cls, members: list[int]) -> Group:
        group = super().__new__(cls, members)
        group._hash = tuple.__hash__(group)
        return group

    def __hash__(self) -> int:
        return self._hash


def _root(node: workload_pb2.Node, group: tuple[int, ...], npu: int) -> int:
    """The root of a broadcast or reduce: the node's, else the group's lowest NPU; it must be in the group."""
    if not node.HasField("root"):
        return group[0]
    if node.root not in group:
        raise WorkloadError(f"NPU {npu} node {node.id}: root NPU {node.root} is not in the collective's group")
    return node.root


class CollectiveTable:
    """Matches the collectives issued by different NPUs into shared :class:`Collective` instances."""

    def __init__(self, grid: Grid, options: SystemOptions, npus: int) -> None:
        self._grid = grid
        self._options = options
        self._everyone = Group(list(range(npus)))
        self._open: dict[tuple[tuple[int, ...], int], Collective] = {}
        self._interned: dict[tuple[int, ...], Group] = {self._everyone: self._everyone}
        self._plan_groups: dict[GraphPlan, list[Group | None]] = {}
        self._layouts: dict[tuple[str, int, tuple[int, ...]], Layout] = {}
        self.all: list[Collective] = []
        # Collectives run inside blocks run whole (:mod:`stratasim.system_layer.engine.macros`): their statistics
        # from the block's first run, with the start time, NPU and issue number of this run.
        self.replayed: list[tuple[int, int, int, BlockRun]] = []  # start, NPU, issue number of its first, the run
        self._named: dict[tuple[int, int], Named] = {}  # replayed collectives a trace names, by NPU and issue number

    @property
    def grid(self) -> Grid:
        """The topology's grid the collectives are laid out on."""
        return self._grid

    def groups_of(self, plan: GraphPlan) -> list[Group | None]:
        """Per node of ``plan``, its group once :meth:`group` has been asked for it (None before), shared by every
        NPU running ``plan`` so that a group is sorted once per plan, not once per NPU."""
        known = self._plan_groups.get(plan)
        if known is None:
            known = self._plan_groups[plan] = [None] * len(plan.nodes)
        return known

    def group(self, node: workload_pb2.Node) -> Group:
        """``node``'s group, its members sorted (empty when the node names none), interned: one object per
        distinct group, hashing in constant time (:class:`Group`)."""
        members = Group(sorted(node.group))
        return self._interned.setdefault(members, members)

    def _layout(self, kind: str, size: int, group: tuple[int, ...]) -> Layout:
        """The layout every ``kind`` collective of ``size`` bytes over ``group`` shares, worked out once."""
        key = (kind, size, group)
        known = self._layouts.get(key)
        if known is None:
            known = self._layouts[key] = layout(
                kind, size, group, phases_of(group, self._grid), self._options, self._grid.links
            )
        return known

    def preflight(self, nodes: list[workload_pb2.Node], foreign_names: bool = False) -> None:
        """Plan every distinct collective once before simulating, so a study whose algorithms cannot run on
        its groups (say, halving-doubling on lines of 6) fails before it starts, naming the node (by its id alone
        when the names came from a trace: ``foreign_names``)."""
        seen: set[tuple[int, tuple[int, ...]]] = set()
        for node in nodes:
            group = tuple(sorted(node.group)) if node.group else self._everyone
            if (node.comm_type, group) in seen:
                continue
            seen.add((node.comm_type, group))
            kind = COLLECTIVE_NAMES.get(node.comm_type)
            if kind is None:
                name = workload_pb2.CollectiveType.Name(node.comm_type)
                raise WorkloadError(f"node {node.id}: collective {name} is not supported yet")
            try:
                root = _root(node, group, -1)
                Collective(
                    -1,
                    kind,
                    max(node.comm_bytes, 1),
                    group,
                    self._layout(kind, max(node.comm_bytes, 1), group),
                    self._options,
                    root,
                )
            except WorkloadError as exc:
                named = node.name if node.name and not foreign_names else kind
                raise WorkloadError(f"node {node.id} ({named}): {exc}") from None

    def join(
        self, npu: int, node: workload_pb2.Node, members: tuple[int, ...], index: int, issued: int, now: int
    ) -> Collective:
        """The collective ``node`` (whose group is ``members``, as :meth:`group` gives it) is the ``index``-th
        issued on its group, creating it on first sight; ``npu`` issues it at ``now`` after ``issued`` collectives
        of its own (which number collectives in a fixed order: see :meth:`ordered`)."""
        group = members if members else self._everyone
        kind = COLLECTIVE_NAMES.get(node.comm_type)
        if kind is None:
            name = workload_pb2.CollectiveType.Name(node.comm_type)
            raise WorkloadError(f"NPU {npu} node {node.id}: collective {name} is not supported yet")
        key = (group, index)
        collective = self._open.get(key)
        root = _root(node, group, npu)
        if collective is None:
            shape = self._layout(kind, node.comm_bytes, group)
            collective = Collective(
                len(self.all), kind, node.comm_bytes, group, shape, self._options, root, node.pg_name
            )
            collective.first_issue = (npu, issued)
            self._open[key] = collective
            self.all.append(collective)
        elif collective.root != root:
            raise WorkloadError(
                f"NPU {npu} node {node.id}: collective #{index} on its group has root {root} here "
                f"but {collective.root} on another NPU"
            )
        elif (collective.kind, collective.bytes) != (kind, node.comm_bytes):
            raise WorkloadError(
                f"NPU {npu} node {node.id}: collective #{index} on its group is {kind} of {node.comm_bytes} B here "
                f"but {collective.kind} of {collective.bytes} B on another NPU"
            )
        elif collective.start_ps == now and (npu, issued) < collective.first_issue:
            collective.first_issue = (npu, issued)  # of the NPUs issuing it first, the lowest numbers it
        return collective

    def named(self, npu: int, issued: int, kind: str) -> Named:
        """A name for the ``issued``-th collective ``npu`` issued, run in a block run whole, for a trace's spans:
        its number is set when the collectives are numbered."""
        name = self._named[(npu, issued)] = Named(kind)
        return name

    def ordered(self) -> CollectiveLog:
        """Every collective's statistics, numbered in the order they started (each collective's ``number`` set
        to it, and that of each one a trace names); collectives starting together in the order of the lowest NPU
        issuing them first, then of that NPU's issues (the same order however many collectives ran inside blocks
        run whole)."""
        direct = [(collective_stats(c, 0), *c.first_issue) for c in self.all]
        runs = _replays_by_run(self.replayed)
        replays = [(run.collectives, columns[:, 0], columns[:, 1], columns[:, 2]) for run, columns in runs]
        log = CollectiveLog(direct, replays)
        numbers = log.numbers()
        for place, collective in enumerate(self.all):
            collective.number = int(numbers[place])
        if self._named:
            for replay, (_, columns) in enumerate(runs):
                for number, (_, npu, first) in enumerate(columns.tolist()):
                    for which in range(len(replays[replay][0])):
                        name = self._named.get((npu, first + which))
                        if name is not None:
                            name.number = int(numbers[log.place(replay, number, which)])
        return log


def _replays_by_run(replayed: list[tuple[int, int, int, BlockRun]]) -> list[tuple[BlockRun, np.ndarray]]:
    """The runs of blocks that ran collectives, in the order each first finished, each with the (start, NPU, first
    issue number) rows of its finishes in order: grouped with numpy, as a whole model finishes some 100,000."""
    runs = [entry[3] for entry in replayed]
    keys = np.fromiter(map(id, runs), dtype=np.uint64, count=len(runs))
    _, first, group = np.unique(keys, return_index=True, return_inverse=True)
    rows = np.array([entry[:3] for entry in replayed], dtype=np.int64).reshape(-1, 3)
    ranked = np.argsort(first, kind="stable")  # groups by their first finish
    rank_of = np.empty_like(ranked)
    rank_of[ranked] = np.arange(len(ranked))
    order = np.argsort(rank_of[group], kind="stable")  # finishes by group rank, each group's in finishing order
    bounds = np.cumsum(np.bincount(rank_of[group], minlength=len(ranked)))
    grouped = []
    for rank, unique in enumerate(ranked.tolist()):
        run = runs[first[unique]]
        if run.collectives:
            start = int(bounds[rank - 1]) if rank else 0
            grouped.append((run, rows[order[start : int(bounds[rank])]]))
    return grouped


class Named:
    """A collective run in a block run whole, as the trace names it: its kind and its number once known."""

    __slots__ = ("kind", "number")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.number = -1
