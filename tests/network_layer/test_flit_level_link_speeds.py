"""Links of their own speed from the start on the flit-level network (``Topology.link_changes`` with no time and
no failure): a slow link slows exactly the messages crossing it (changes at a time: ``test_flit_level_link_changes``).

A message that does not cross the changed link takes exactly its nominal time. One that does is within one slot
per link of the zero-load formula of :mod:`stratasim.network_layer.flit_level.network` with the link's own flit time
``k_i`` and latency ``L_i``, summed over the segments (dimensions, or a fabric's one route) it travels:
``sum(L_i) + (h + 1) P + sum(k_i) - max(k_i) + F max(k_i) + w``, ``-h < w < sum(ceil(k_i) + 1)``. A lone message
of one hop over the changed link takes exactly what it takes when every link has that speed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction

import pytest

from stratasim.network_layer import topologies
from stratasim.network_layer.flit_level import FlitLevelNetwork
from stratasim.network_layer.flit_level.dimensions import DimensionFabric
from stratasim.network_layer.link_graph import LinkGraph
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import link, torus
from tests.network_layer.test_flit_level import ALPHA, DEFAULT, B, flits, transit
from tests.system_layer.helpers import RING, SWITCH, topology

SIZE = 4096
SLOW = pb.LinkChange(bandwidth_fraction=0.25, latency_ps=2 * ALPHA)  # a quarter of the bandwidth, twice the latency
CASES = {  # a topology, the link slowed, and the same topology with every link at the slowed speed
    "ring": (topology((RING, 8, B, ALPHA)), "dim 0: 1->2", topology((RING, 8, B / 4, 2 * ALPHA))),
    "switch": (topology((SWITCH, 8, B, ALPHA)), "dim 0: 3->switch", topology((SWITCH, 8, B / 4, 2 * ALPHA))),
    "torus 4x4": (torus(4, 4, links=(link(B, ALPHA),)), "npu 1->npu 2", torus(4, 4, links=(link(B / 4, 2 * ALPHA),))),
}


def _slowed(topo: pb.Topology, name: str, change: pb.LinkChange = SLOW) -> pb.Topology:
    result = pb.Topology()
    result.CopyFrom(topo)
    entry = result.link_changes.add()
    entry.CopyFrom(change)
    entry.link = name
    return result


Segments = Callable[[int, int], list[list[tuple[int, int]]]]


def _segments(topo: pb.Topology) -> tuple[LinkGraph, Segments, dict[tuple[int, int], str]]:
    """The topology's links, the links of each segment a message from one NPU to another travels, and their names."""
    if topo.WhichOneof("fabric"):
        fabric = topologies.build(topo)
        names = {(lk.src, lk.dst): f"{fabric.name(lk.src)}->{fabric.name(lk.dst)}" for lk in fabric.links()}
        return fabric, lambda s, d: [[(lk.src, lk.dst) for lk in fabric.route(s, d)]], names
    dims = DimensionFabric(topo)
    names = {(lk.src, lk.dst): dims.label(lk.src, lk.dst) for lk in dims.graph.links()}
    return dims.graph, lambda s, d: [list(zip(path, path[1:])) for path in dims.segments(s, d)], names


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_slow_link_slows_exactly_the_messages_crossing_it(name: str) -> None:
    topo, slowed_link, _ = CASES[name]
    graph, segments, names = _segments(topo)
    messages = [(s, d, SIZE) for s, d in itertools.permutations(range(graph.npus), 2)]
    nominal = transit(FlitLevelNetwork(), topo, messages)
    slowed = transit(FlitLevelNetwork(), _slowed(topo, slowed_link), messages)
    crossing = 0
    for (src, dst, _), before, took in zip(messages, nominal, slowed):
        hops = segments(src, dst)
        if slowed_link not in {names[hop] for hops_ in hops for hop in hops_}:
            assert took == before, (src, dst)
            continue
        crossing += 1
        formula = low = high = 0
        for segment in hops:
            speeds = [(B / 4, 2 * ALPHA) if names[hop] == slowed_link else (B, ALPHA) for hop in segment]
            k = [DEFAULT.flit_bytes * 10**12 / Fraction(bandwidth) for bandwidth, _ in speeds]
            formula += sum(latency for _, latency in speeds) + (len(segment) + 1) * DEFAULT.pipeline_ps
            formula += sum(k) - max(k) + flits(SIZE) * max(k)
            low, high = low - len(segment), high + sum(math.ceil(flit) + 1 for flit in k)
        assert low < took - formula < high and took > before, (src, dst)
    assert crossing > 0


@pytest.mark.parametrize("name", ["ring", "torus 4x4"])
def test_one_hop_over_the_slow_link_takes_what_a_uniformly_slow_network_gives(name: str) -> None:
    """NPU 1 to NPU 2 crosses the slowed link 1->2 alone: the other links' speeds do not enter its time."""
    topo, slowed_link, uniform = CASES[name]
    message = [(1, 2, SIZE)]
    took = transit(FlitLevelNetwork(), _slowed(topo, slowed_link), message)
    assert took == transit(FlitLevelNetwork(), uniform, message) > transit(FlitLevelNetwork(), topo, message)
