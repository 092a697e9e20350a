from __future__ import annotations

import pytest

from stratasim.kernel import registry
from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.kernel.grid import Grid, validate_topology
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.v1 import network_pb2


def test_backends_load_by_name_from_entry_points() -> None:
    assert registry.load("network", "analytical") is AnalyticalNetwork
    assert "roofline" in registry.available("compute")
    assert {"collective", "training_loop"} <= set(registry.available("workload"))


def test_extra_factories_take_precedence() -> None:
    assert registry.load("network", "analytical", extra={"analytical": dict}) is dict


@pytest.mark.parametrize(
    ("layer", "name", "fragment"), [("network", "garnet", "available: analytical"), ("storage", "x", "unknown layer")]
)
def test_unknown_backends_and_layers_are_named(layer: str, name: str, fragment: str) -> None:
    with pytest.raises(BackendError, match=fragment):
        registry.load(layer, name)


def test_grid_coordinates_vary_fastest_in_dimension_zero() -> None:
    grid = Grid((4, 2, 3))
    assert grid.npus == 24
    assert [grid.stride(d) for d in range(3)] == [1, 4, 8]
    assert [grid.coordinate(13, d) for d in range(3)] == [1, 1, 1]
    assert grid.line(13, 0) == (12, 13, 14, 15)
    assert grid.line(13, 2) == (5, 13, 21)


@pytest.mark.parametrize(
    ("dim", "fragment"),
    [
        (dict(kind=0, size=4, bandwidth_bytes_per_s=1e9), "kind: unspecified"),
        (dict(kind=1, size=0, bandwidth_bytes_per_s=1e9), "size: must be at least 1"),
        (dict(kind=1, size=4, bandwidth_bytes_per_s=0), "bandwidth: must be positive"),
        (dict(kind=1, size=4, bandwidth_bytes_per_s=float("inf")), "bandwidth: must be positive"),
        (dict(kind=1, size=4, bandwidth_bytes_per_s=1e9, latency_ps=-1), "latency: must not be negative"),
    ],
)
def test_impossible_topologies_are_rejected_with_the_dimension_named(dim: dict, fragment: str) -> None:
    topology = network_pb2.Topology(
        dimensions=[network_pb2.Dimension(kind=1, size=2, bandwidth_bytes_per_s=1e9), network_pb2.Dimension(**dim)]
    )
    with pytest.raises(TopologyError, match=rf"dimensions\[1\]\.{fragment}"):
        validate_topology(topology)


def test_empty_topology_is_rejected() -> None:
    with pytest.raises(TopologyError, match="no dimensions"):
        validate_topology(network_pb2.Topology())
