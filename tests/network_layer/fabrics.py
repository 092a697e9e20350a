"""Small fabrics for the network-layer tests, one builder per family."""

from __future__ import annotations

from stratasim.network_layer import topologies
from stratasim.network_layer.link_graph import LinkGraph
from stratasim.v1 import network_pb2 as pb

B, ALPHA = 50 * 10**9, 500_000


def link(bandwidth: float = B, latency: int = ALPHA) -> pb.LinkSpec:
    return pb.LinkSpec(bandwidth_bytes_per_s=bandwidth, latency_ps=latency)


def torus(*shape: int, mesh: bool = False, links: tuple[pb.LinkSpec, ...] = (link(),)) -> pb.Topology:
    return topologies.topology_of("torus", pb.TorusFabric(shape=shape, link=links, mesh=mesh))


def fat_tree(k: int, speed: pb.LinkSpec | None = None) -> pb.Topology:
    return topologies.topology_of("fat_tree", pb.FatTreeFabric(k=k, link=speed or link()))


def dragonfly(
    groups: int, routers: int, hosts: int, globals_: int, speeds: tuple[pb.LinkSpec, ...] = ()
) -> pb.Topology:
    """``speeds``: host, local and global links (default: all alike)."""
    host, local, far = speeds or (link(),) * 3
    return topologies.topology_of(
        "dragonfly",
        pb.DragonflyFabric(
            groups=groups,
            routers_per_group=routers,
            hosts_per_router=hosts,
            global_links_per_router=globals_,
            host_link=host,
            local_link=local,
            global_link=far,
        ),
    )


def dgx1(generation: int = pb.Dgx1Fabric.V100) -> pb.Topology:
    return topologies.topology_of("dgx1", pb.Dgx1Fabric(generation=generation, nvlink=link(25e9, 700_000)))


def nvswitch(gpus: int, planes: int, boards: int = 1, trunk: pb.LinkSpec | None = None) -> pb.Topology:
    spec = pb.NvSwitchFabric(gpus_per_board=gpus, planes=planes, boards=boards, gpu_link=link(25e9, 700_000))
    if trunk is not None:
        spec.trunk_link.CopyFrom(trunk)
    return topologies.topology_of("nvswitch", spec)


def hierarchical_alltoall(local: int, packages: int, switches: int) -> pb.Topology:
    return topologies.topology_of(
        "hierarchical_alltoall",
        pb.HierarchicalAlltoallFabric(
            local_size=local,
            packages=packages,
            switches=switches,
            local_link=link(500e9, 100_000),
            global_link=link(25e9, 1_000_000),
        ),
    )


def graph(names: list[str], npus: int, cables: list[tuple[int, int, pb.LinkSpec]]) -> pb.Topology:
    """A graph of named nodes; each cable ``(a, b, speed)`` is a link each way."""
    fabric = pb.GraphFabric(node=names, npus=npus)
    for a, b, speed in cables:
        fabric.link.add(src=a, dst=b, spec=speed)
        fabric.link.add(src=b, dst=a, spec=speed)
    return topologies.topology_of("graph", fabric)


def build(topology: pb.Topology) -> LinkGraph:
    return topologies.build(topology)


def path(links: LinkGraph, src: int, dst: int) -> list[int]:
    """The nodes a message from ``src`` to ``dst`` visits, both included."""
    return [src] + [hop.dst for hop in links.route(src, dst)]


def named_path(links: LinkGraph, src: int, dst: int) -> list[str]:
    return [links.name(node) for node in path(links, src, dst)]
