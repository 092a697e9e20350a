"""Simulating NPUs that are equivalent by symmetry once for all (as PALM's virtual tile aggregation does).

When every NPU runs the same graph, every collective spans all NPUs, the topology's dimensions are
translation-symmetric (rings, fully connected, switches all are), the algorithms treat every position alike
and message delays do not depend on other traffic, then every NPU lives the same timeline. The engine then
simulates NPU 0 alone: a message it sends to a peer is also, by symmetry, the message it receives from its
mirror peer at the same time, so it is delivered back to NPU 0 — after the network priced the real route.
Results are identical to simulating every NPU (the tests check this), at a fraction of the cost.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.v1 import network_pb2, workload_pb2
from system_layer.options import SystemOptions

__all__ = ["SYMMETRIC_ALGORITHMS", "aggregation_blocker"]

# Algorithms whose every position sends and waits alike, with peers at the same distances.
SYMMETRIC_ALGORITHMS = frozenset({"ring", "ring_bidirectional", "direct", "halving_doubling"})


def aggregation_blocker(
    graphs: Sequence[workload_pb2.ExecutionGraph], info: network_pb2.NetworkInfo, options: SystemOptions
) -> str | None:
    """Why the NPUs cannot be simulated as one representative, or None when they can."""
    if not options.aggregate:
        return "aggregation is switched off"
    if not info.stateless:
        return f"the {info.backend or 'network'} backend's delays depend on traffic"
    if len(graphs) != info.npus:
        return "the workload does not use every NPU of the topology"
    if options.logical_dims is not None:
        return "collectives run on a logical topology whose symmetries the physical one may not share"
    first = graphs[0]
    signature = first.SerializeToString(deterministic=True)
    seen = {id(first)}
    for graph in graphs:
        if id(graph) not in seen:
            seen.add(id(graph))
            if graph.SerializeToString(deterministic=True) != signature:
                return "NPUs run different graphs"
    for node in first.nodes:
        if node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
            return f"node {node.id} is a point-to-point transfer"
        if node.type != workload_pb2.COMM_COLL_NODE:
            continue
        if node.group and len(set(node.group)) != len(graphs):
            return f"collective node {node.id} runs on a sub-group"
        if node.comm_type in (workload_pb2.BROADCAST, workload_pb2.REDUCE):
            return f"collective node {node.id} has a root, which sets NPUs apart"
    unusual = sorted({name for names in options.algorithms.values() for name in names} - SYMMETRIC_ALGORITHMS)
    if unusual:
        return f"algorithm {unusual[0]} treats positions differently"
    return None
