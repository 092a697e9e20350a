"""One NPU's compute, communication and exposed time by node name, from what its executor and scheduler charged.

The executor charges compute time to the node computing, exposed time to the node the idle walk charges, and the
scheduler the time with collectives in flight to the node that issued the oldest collective then in flight; a block
run whole charges its nodes as they ran when it was recorded (:class:`~stratasim.system_layer.engine.block_run.BlockRun`).
Charges are kept by where they fall, a position in the NPU's plan or a block node's position and one inside its
block; here they are summed by the node's full name, so a report can group them (by layer and pass, say) and find
the NPU's totals again to the picosecond. All of it happens only when the simulation asks for node times
(``SchedulerContext.node_times``); otherwise the executors and schedulers keep no per-node figure.
"""

from __future__ import annotations

from collections import defaultdict

from stratasim.system_layer.engine.executor import NpuExecutor
from stratasim.system_layer.result import NodeTime
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler

__all__ = ["node_times"]

_Where = tuple[int, ...]


class _Sums:
    """The charges of one NPU summed by node name: compute, and communication and exposed time by label."""

    def __init__(self) -> None:
        self.compute: defaultdict[str, int] = defaultdict(int)
        self.comm: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.exposed: defaultdict[tuple[str, str], int] = defaultdict(int)

    def rows(self) -> tuple[NodeTime, ...]:
        names = sorted({*self.compute, *(name for name, _ in self.comm), *(name for name, _ in self.exposed)})
        comm: defaultdict[str, list[tuple[str, int]]] = defaultdict(list)
        exposed: defaultdict[str, list[tuple[str, int]]] = defaultdict(list)
        for (name, label), ps in sorted(self.comm.items()):
            comm[name].append((label, ps))
        for (name, label), ps in sorted(self.exposed.items()):
            exposed[name].append((label, ps))
        compute, none = self.compute, ()
        return tuple(
            NodeTime(name, compute.get(name, 0), tuple(comm.get(name, none)), tuple(exposed.get(name, none)))
            for name in names
        )


def node_times(executor: NpuExecutor, scheduler: NpuScheduler) -> tuple[NodeTime, ...]:
    """``executor``'s NPU's time by node name (see :class:`~stratasim.system_layer.result.NodeTime`)."""
    sums = _Sums()
    for index, ps in enumerate(executor.compute_at):
        if ps:
            _add_compute(sums, executor, index, ps)
    for index, ps in scheduler.comm_at.items():
        sums.comm[_name(executor, (index,)), executor.label(index)] += ps
    for (where, label), ps in executor.exposed_at.items():
        sums.exposed[_name(executor, where), label] += ps
    for index in executor.blocks_done:
        _add_block(sums, executor, index)
    return sums.rows()


def _add_block(sums: _Sums, executor: NpuExecutor, index: int) -> None:
    """Charge what block node ``index``, run whole, charged inside its block to the block's nodes (named as
    :func:`_name` names them, the block node's name worked out once)."""
    plan = executor.plan
    run, block_node = executor.runs[index], plan.nodes[index]
    block = plan.blocks[block_node.block]
    prefix = f"{block_node.name} " if block_node.name else ""
    compute, comm, exposed = sums.compute, sums.comm, sums.exposed
    for inner, ps in run.compute_at:
        compute[prefix + block.name(inner)] += ps
    for inner, ps in run.comm_at:
        comm[prefix + block.name(inner), block.nodes[inner].pg_name or "collective"] += ps
    for where, label, ps in run.exposed_at:
        exposed[prefix + block.name(where[0]), label] += ps


def _add_compute(sums: _Sums, executor: NpuExecutor, index: int, ps: int) -> None:
    """Charge ``ps`` of compute to node ``index``, or over the members of the run it stands for by their durations
    (exactly theirs unless the run was slowed or varied: then in proportion, the last member taking what rounding
    leaves)."""
    members = executor.plan.fused.get(index)
    if members is None:
        sums.compute[_name(executor, (index,))] += ps
        return
    planned = sum(duration for _, duration in members)
    left = ps
    for name, duration in members[:-1]:
        share = duration if planned == ps else ps * duration // planned if planned else 0
        sums.compute[name] += share
        left -= share
    sums.compute[members[-1][0]] += left


def _name(executor: NpuExecutor, where: _Where) -> str:
    """The full name of the node at ``where``: a position in the plan ("" for -1, no node), or a block node's and a
    position in its block (the block node's name, then the node's own, as
    :func:`~stratasim.system_layer.engine.blocks.inline_blocks` names them)."""
    plan = executor.plan
    if where[0] < 0:
        return ""
    if len(where) == 1:
        return plan.name(where[0])
    block_node = plan.nodes[where[0]]
    own = plan.blocks[block_node.block].name(where[1])
    return f"{block_node.name} {own}" if block_node.name else own
