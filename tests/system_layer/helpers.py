"""Small builders shared by the system-layer tests."""

from __future__ import annotations

from stratasim.kernel.collective_types import COLLECTIVE_TYPES
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import network_pb2, workload_pb2

RING = network_pb2.Dimension.RING
FC = network_pb2.Dimension.FULLY_CONNECTED
SWITCH = network_pb2.Dimension.SWITCH

COLLECTIVES = COLLECTIVE_TYPES


def topology(*dims: tuple[int, int, float, int]) -> network_pb2.Topology:
    """Dimensions as (kind, size, bandwidth bytes/s, latency ps), innermost first."""
    return network_pb2.Topology(
        dimensions=[
            network_pb2.Dimension(kind=kind, size=size, bandwidth_bytes_per_s=bw, latency_ps=lat)
            for kind, size, bw, lat in dims
        ]
    )


def collective_graph(collective: str, size: int, repeat: int = 1) -> workload_pb2.ExecutionGraph:
    graph = workload_pb2.ExecutionGraph()
    for i in range(repeat):
        graph.nodes.add(
            id=i,
            type=workload_pb2.COMM_COLL_NODE,
            comm_type=COLLECTIVES[collective],
            comm_bytes=size,
            ctrl_deps=[i - 1] if i else [],
        )
    return graph


def run_collective(
    topo: network_pb2.Topology,
    collective: str,
    size: int,
    npus: int | None = None,
    *,
    record_trace: bool = False,
    **options: object,
) -> SimulationResult:
    count = npus
    if count is None:
        count = 1
        for dim in topo.dimensions:
            count *= dim.size
    return simulate(
        [collective_graph(collective, size)] * count,
        AnalyticalNetwork(),
        topo,
        SystemOptions(**options),
        record_trace=record_trace,
    )


def ser(size: int, bandwidth: int) -> int:
    """Serialisation time in ps of ``size`` bytes at ``bandwidth`` bytes/s, rounded up."""
    return -(-size * 10**12 // bandwidth)
