"""Each topology family's ``size``, beside its ``build``: at least the NPUs, links and switches it builds (what a
server's limits and a run's budget count before anything is built; a graph counts every node as an NPU)."""

from __future__ import annotations

import pytest

from stratasim.network_layer import topologies
from stratasim.v1 import network_pb2 as pb
from tests.network_layer import fabrics

CASES = {
    "torus": fabrics.torus(4, 3),
    "torus-two-wide": fabrics.torus(2, 2),
    "mesh": fabrics.torus(3, 3, mesh=True),
    "fat-tree": fabrics.fat_tree(4),
    "dragonfly": fabrics.dragonfly(3, 2, 2, 1),
    "dgx1": fabrics.dgx1(),
    "nvswitch": fabrics.nvswitch(4, 2),
    "nvswitch-boards": fabrics.nvswitch(4, 2, boards=3, trunk=fabrics.link()),
    "hierarchical-alltoall": fabrics.hierarchical_alltoall(3, 2, 2),
    "graph": fabrics.graph(["a", "b", "switch"], 2, [(0, 2, fabrics.link()), (1, 2, fabrics.link())]),
}


@pytest.mark.parametrize("topology", CASES.values(), ids=CASES.keys())
def test_a_family_counts_what_it_builds_at_most(topology: pb.Topology) -> None:
    npus, links = topologies.size(topology)
    built = topologies.build(topology)
    assert npus >= built.npus
    assert links >= sum(1 for _ in built.links()) + built.nodes - built.npus


def test_a_list_of_dimensions_is_counted_from_its_kinds() -> None:
    # ring: 2 links per NPU; fully connected: n - 1 per NPU; switch: 2 per NPU and one switch per line.
    ring, full, switch = pb.Dimension.RING, pb.Dimension.FULLY_CONNECTED, pb.Dimension.SWITCH
    dims = [pb.Dimension(kind=ring, size=4), pb.Dimension(kind=full, size=3), pb.Dimension(kind=switch, size=2)]
    assert topologies.size(pb.Topology(dimensions=dims)) == (24, 2 * 24 + 24 * 2 + 2 * 24 + 24 // 2)
