"""Routes on every fabric against hand-computed cases, and routes found on demand at 16k NPUs."""

from __future__ import annotations

import itertools
import time

import networkx as nx
import pytest

from stratasim.network_layer.topologies import from_networkx
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import (
    build,
    dgx1,
    dragonfly,
    fat_tree,
    graph,
    hierarchical_alltoall,
    link,
    named_path,
    nvswitch,
    path,
    torus,
)


def test_a_torus_corrects_dimension_0_first_and_goes_the_shorter_way_round() -> None:
    links = build(torus(4, 4))  # NPU (x, y) = x + 4 y
    assert path(links, 0, 5) == [0, 1, 5]  # (0,0) -> (1,0) -> (1,1)
    assert path(links, 0, 3) == [0, 3]  # the wrap-around link
    assert path(links, 5, 15) == [5, 6, 7, 11, 15]  # two steps each way are a tie: positive direction
    assert path(links, 15, 0) == [15, 12, 0]
    assert all(len(links.out_links(npu)) == 4 for npu in range(16))


def test_a_3d_torus_and_a_dimension_of_two() -> None:
    links = build(torus(2, 3, 4))
    assert len(links.route(0, 23)) == 1 + 1 + 1  # (0,0,0) -> (1,2,3): one step per dimension, two by wrapping
    assert len(links.out_links(0)) == 1 + 2 + 2  # along the dimension of 2 the two neighbours are one


def test_a_mesh_never_wraps() -> None:
    links = build(torus(4, 4, mesh=True))
    assert path(links, 0, 3) == [0, 1, 2, 3]
    assert path(links, 15, 0) == [15, 14, 13, 12, 8, 4, 0]
    assert sorted(links.out_links(0)) == [1, 4] and len(links.out_links(5)) == 4


def test_fat_tree_routes_take_2_4_or_6_links() -> None:
    links = build(fat_tree(4))  # 16 NPUs; 2 per edge switch, 4 per pod
    assert links.npus == 16 and links.nodes == 16 + 8 + 8 + 4
    lengths = sorted(len(links.route(0, dst)) for dst in range(1, 16))
    assert lengths == [2] + [4] * 2 + [6] * 12
    assert named_path(links, 0, 5) == [
        "npu 0",
        "edge 0.0",
        "aggregation 0.1",
        "core 2",
        "aggregation 1.1",
        "edge 1.0",
        "npu 5",
    ]  # up through aggregation 5 % 2 = 1 and its core (5 // 2) % 2 = 0, i.e. core 1 * 2 + 0


def test_the_way_up_a_fat_tree_is_chosen_by_the_destination() -> None:
    links = build(fat_tree(4))
    for dst in (4, 5, 6, 7):  # pod 1, from every NPU of pod 0
        cores = {named_path(links, src, dst)[3] for src in range(4)}
        assert cores == {f"core {(dst % 2) * 2 + (dst // 2) % 2}"}


def test_dragonfly_routes_are_minimal() -> None:
    links = build(dragonfly(groups=9, routers=4, hosts=2, globals_=2))  # balanced: 9 = 4 * 2 + 1
    assert links.npus == 72
    group = {router: (router - 72) // 4 for router in range(72, 72 + 36)}
    global_cables = {
        frozenset((group[hop.src], group[hop.dst]))
        for hop in links.links()
        if hop.src in group and hop.dst in group and group[hop.src] != group[hop.dst]
    }
    assert len(global_cables) == 9 * 8 // 2  # every two groups share a global link
    for src, dst in itertools.permutations(range(72), 2):
        between_routers = [hop for hop in links.route(src, dst) if hop.src in group and hop.dst in group]
        assert len(between_routers) <= 3
        crossings = sum(group[hop.src] != group[hop.dst] for hop in between_routers)
        assert crossings == (src // 8 != dst // 8)  # one global link between groups (8 NPUs each), else none
    # NPU 0 at router 0.0; NPU 71 at router 8.3. Group 0 reaches group 8 through its port 7, router 0.3,
    # arriving at group 8's port 0, router 8.0.
    assert named_path(links, 0, 71) == ["npu 0", "router 0.0", "router 0.3", "router 8.0", "router 8.3", "npu 71"]
    assert named_path(links, 0, 1) == ["npu 0", "router 0.0", "npu 1"]


def test_dgx1_hybrid_cube_mesh() -> None:
    links = build(dgx1())
    nvlinks = {(a, b): int(hop.bandwidth / 25e9) for a in range(8) for b, hop in links.out_links(a).items()}
    assert {b for a, b in nvlinks if a == 0} == {1, 2, 3, 4}
    assert {b for a, b in nvlinks if a == 6} == {2, 4, 5, 7}
    assert [nvlinks[0, b] for b in (1, 2, 3, 4)] == [1, 1, 2, 2]
    assert all(sum(n for (a, _), n in nvlinks.items() if a == gpu) == 6 for gpu in range(8))  # six NVLinks each
    assert path(links, 0, 6) == [0, 2, 6]  # no NVLink: through GPU 2 or 4, the lower id on a tie
    assert path(links, 0, 7) == [0, 3, 7]
    p100 = build(dgx1(pb.Dgx1Fabric.P100))
    assert all(len(p100.out_links(gpu)) == 4 for gpu in range(8))
    assert all(hop.bandwidth == 25e9 for hop in p100.links())


def test_nvswitch_messages_cross_one_plane() -> None:
    links = build(nvswitch(gpus=8, planes=6, boards=2, trunk=link(200e9, 700_000)))  # DGX-2
    assert links.npus == 16 and len(links.out_links(0)) == 6
    assert named_path(links, 0, 1) == ["gpu 0", "nvswitch 0.1", "gpu 1"]  # plane (0 + 1) % 6
    assert named_path(links, 0, 9) == ["gpu 0", "nvswitch 0.3", "nvswitch 1.3", "gpu 9"]


def test_hierarchical_alltoall_rings_then_switches() -> None:
    links = build(hierarchical_alltoall(local=4, packages=3, switches=2))
    assert path(links, 0, 2) == [0, 1, 2]
    assert path(links, 0, 3) == [0, 3]
    assert named_path(links, 1, 6) == ["npu 1", "switch 1", "npu 6"]  # packages 0 and 1: switch (0 + 1) % 2
    assert named_path(links, 1, 10) == ["npu 1", "switch 0", "npu 10"]


def test_graph_routes_take_least_latency_then_fewest_links_then_lowest_ids() -> None:
    a, b, c, d = 0, 1, 2, 3
    square = [(a, b, link(latency=1)), (b, d, link(latency=1)), (a, c, link(latency=1)), (c, d, link(latency=1))]
    assert path(build(graph(["a", "b", "c", "d"], 4, square)), a, d) == [a, b, d]  # a tie: b before c
    slow = build(graph(["a", "b", "c", "d"], 4, [*square, (a, d, link(latency=3))]))
    assert path(slow, a, d) == [a, b, d]  # 2 ps beat 3
    direct = build(graph(["a", "b", "c", "d"], 4, [*square, (a, d, link(latency=2))]))
    assert path(direct, a, d) == [a, d]  # equal latency: fewer links


def test_a_networkx_graph_becomes_a_topology() -> None:
    g = nx.Graph()
    g.add_nodes_from(["c0", "c1", "c2"])
    g.add_node("sw", switch=True)
    g.add_edge("c0", "sw", bandwidth="50GB/s", latency="500ns")
    g.add_edge("c1", "sw", bandwidth=50e9, latency=500_000)
    g.add_edge("c2", "c1", bandwidth="25GB/s", distance=2)
    topology = from_networkx(g, latency_per_distance_ps=5_000)
    assert [dim.size for dim in topology.dimensions] == [3]
    links = build(topology)
    assert named_path(links, 0, 2) == ["c0", "sw", "c1", "c2"]
    assert links.route(1, 2)[0].latency_ps == 10_000 and links.route(1, 2)[0].bandwidth == 25e9


@pytest.mark.parametrize(("topology", "far"), [(fat_tree(40), 15_999), (torus(128, 128), 64 + 128 * 64)])
def test_16k_npus_build_and_route_on_demand(topology: pb.Topology, far: int) -> None:
    started = time.perf_counter()
    links = build(topology)
    pairs = [(0, far), (far, 0), (1, 2), (12_345, 678)]
    routes = [links.route(src, dst) for src, dst in pairs]
    assert time.perf_counter() - started < 10
    assert links.npus >= 16_000
    assert links.routes_cached == len(pairs)  # no table of all pairs
    assert len(routes[0]) == (6 if topology.HasField("fat_tree") else 128)
