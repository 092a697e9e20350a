"""A job's execution graphs, built for its own ranks 0..n-1, moved onto the NPUs it was placed on.

Every NPU id a graph holds is a rank of the job: a point-to-point ``peer``, a collective's ``group`` and ``root``,
in the graph's own nodes and in its ``blocks``. Each becomes the NPU that rank runs on; an empty group, which means
every NPU of the workload, becomes the job's NPUs written out, since the study's other NPUs are not the job's.

A milestone node (an inference workload's ``first token``...) is renamed after its job, ``<job>/<milestone>``
(:func:`milestone_key`), since the engine reports milestones by node name over all NPUs: two inference jobs' would
otherwise be one. :func:`job_milestones` gives a job its own back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import workload_pb2

__all__ = ["job_milestones", "milestone_key", "remap_graphs"]

_COLLECTIVE = workload_pb2.COMM_COLL_NODE
_POINT_TO_POINT = (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE)


def milestone_key(job: str, milestone: str) -> str:
    """The name the milestone node ``milestone`` of job ``job`` carries in a study of several jobs."""
    return f"{job}/{milestone}"


def job_milestones(milestones: Mapping[str, int], job: str) -> dict[str, int]:
    """Job ``job``'s own milestones among a study's ``milestones``, by their names in its workload."""
    prefix = milestone_key(job, "")
    return {name.removeprefix(prefix): time for name, time in milestones.items() if name.startswith(prefix)}


def remap_graphs(
    graphs: Sequence[workload_pb2.ExecutionGraph], members: Sequence[int], job: int, start_ps: int, *, name: str
) -> list[workload_pb2.ExecutionGraph]:
    """``graphs`` (one per rank) on the NPUs ``members`` (rank i on ``members[i]``), tagged with the ``job``'s index
    and starting at ``start_ps``, their milestones renamed after the job's ``name``. Ranks sharing a graph object
    share its moved copy, as the engine expects of NPUs that run the same graph."""
    if len(graphs) != len(members):
        raise WorkloadError(f"the job's workload built {len(graphs)} graphs for its {len(members)} NPUs")
    moved: dict[int, workload_pb2.ExecutionGraph] = {}
    result = []
    for rank, graph in enumerate(graphs):
        copy = moved.get(id(graph))
        if copy is None:
            copy = moved[id(graph)] = _moved(graph, members, job, start_ps, members[rank], name)
        result.append(copy)
    return result


def _moved(
    graph: workload_pb2.ExecutionGraph, members: Sequence[int], job: int, start_ps: int, npu: int, name: str
) -> workload_pb2.ExecutionGraph:
    copy = workload_pb2.ExecutionGraph()
    copy.CopyFrom(graph)
    copy.npu, copy.job, copy.start_ps = npu, job, start_ps
    _move_nodes(copy.nodes, members, name)
    for block in copy.blocks:
        _move_nodes(block.nodes, members, name)
    return copy


def _move_nodes(nodes: Iterable[workload_pb2.Node], members: Sequence[int], job: str) -> None:
    """Rewrite each node's NPU ids from the job's ranks to the NPUs they run on, and its name if it is a milestone
    (:func:`milestone_key`), in place."""
    ranks = len(members)
    for node in nodes:
        kind = node.type
        if kind == _COLLECTIVE:
            group = [_npu(rank, members, ranks, node) for rank in node.group] if node.group else members
            del node.group[:]
            node.group.extend(group)
            if node.HasField("root"):
                node.root = _npu(node.root, members, ranks, node)
        elif kind in _POINT_TO_POINT:
            node.peer = _npu(node.peer, members, ranks, node)
        if node.milestone:
            node.name = milestone_key(job, node.name)


def _npu(rank: int, members: Sequence[int], ranks: int, node: workload_pb2.Node) -> int:
    if rank >= ranks:
        raise WorkloadError(f"node {node.id}: names NPU {rank}, but the job has {ranks} NPUs (0-{ranks - 1})")
    return members[rank]
