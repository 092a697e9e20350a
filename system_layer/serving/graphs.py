"""The one-node execution graphs serving's pricers simulate: a collective among a group, one end of a message."""

from __future__ import annotations

from collections.abc import Iterable

from stratasim.v1 import workload_pb2

__all__ = ["add_collective", "add_message"]


def add_collective(
    graph: workload_pb2.ExecutionGraph, name: str, kind: int, size: int, group: Iterable[int], pg_name: str
) -> None:
    """Add to ``graph`` a collective of ``kind`` moving ``size`` bytes among ``group``."""
    graph.nodes.add(
        id=len(graph.nodes),
        name=name,
        type=workload_pb2.COMM_COLL_NODE,
        comm_type=kind,
        comm_bytes=size,
        group=group,
        pg_name=pg_name,
    )


def add_message(
    graph: workload_pb2.ExecutionGraph, name: str, kind: int, peer: int, tag: int, size: int, pg_name: str
) -> None:
    """Add to ``graph`` one end (a send or a receive, by ``kind``) of a ``size``-byte message with ``peer``."""
    graph.nodes.add(id=len(graph.nodes), name=name, type=kind, peer=peer, tag=tag, comm_bytes=size, pg_name=pg_name)
