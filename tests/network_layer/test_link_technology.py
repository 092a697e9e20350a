"""DFModel's network bill: links and switch ports counted per dimension, priced and powered per GB/s."""

from __future__ import annotations

import pytest

from stratasim.network_layer.link_technology import LINK_TECHNOLOGIES, link_technology, network_bill
from stratasim.v1 import network_pb2

RING, SWITCH, FC = network_pb2.Dimension.RING, network_pb2.Dimension.SWITCH, network_pb2.Dimension.FULLY_CONNECTED
PCIE4 = link_technology("pcie4")


def _topology(*dims: tuple[int, int, float]) -> network_pb2.Topology:
    return network_pb2.Topology(
        dimensions=[network_pb2.Dimension(kind=k, size=n, bandwidth_bytes_per_s=bw * 1e9) for k, n, bw in dims]
    )


def _counts(topology: network_pb2.Topology) -> list[tuple[int, int]]:
    bill = network_bill(topology, [PCIE4] * len(topology.dimensions))
    return [(dim.links, dim.switch_ports) for dim in bill.dimensions]


def test_dfmodels_readme_torus_is_priced_as_dfmodel_prices_it() -> None:
    # An 8 x 128 2D torus of 50 GB/s links (DFModel's README example). Per ring dimension: N = 1024 links and
    # 2 N / n switch ports; price 50 x (1024 x $2 + ports x $24), power 50 x 0.052 x (1024 + ports).
    bill = network_bill(_topology((RING, 8, 50), (RING, 128, 50)), [PCIE4, PCIE4])
    assert [(dim.links, dim.switch_ports) for dim in bill.dimensions] == [(1024, 256), (1024, 16)]
    assert bill.price_usd == pytest.approx(50 * (2048 * 2 + 272 * 24))  # 531,200: $518.75 a chip
    assert bill.power_w == pytest.approx(50 * 0.052 * (2048 + 272))  # 6,032 W


def test_dfmodels_other_topologies_are_counted_as_dfmodel_counts_them() -> None:
    # dragonfly (fc x fc): n0 (n0 - 1) n1 local links; n1 (n1 - 1) global links and n1^2 router ports
    assert _counts(_topology((FC, 4, 1), (FC, 8, 1))) == [(4 * 3 * 8, 0), (8 * 7, 64)]
    # DGX-2 (switch x switch): N links and ports inside the boxes, one per box between them
    assert _counts(_topology((SWITCH, 16, 1), (SWITCH, 4, 1))) == [(64, 64), (4, 4)]
    # DGX-1 (ring x switch): N ring links and 2 N / n ports; one link and port per box between them
    assert _counts(_topology((RING, 8, 1), (SWITCH, 4, 1))) == [(32, 8), (4, 4)]
    # a 3D torus: N links per ring dimension, 2 N / n ports
    assert _counts(_topology((RING, 4, 1), (RING, 4, 1), (RING, 2, 1))) == [(32, 16), (32, 16), (32, 32)]


def test_small_systems_need_no_network_or_no_switch() -> None:
    assert _counts(_topology((RING, 1, 50))) == [(0, 0)]  # one chip: no network
    assert _counts(_topology((RING, 4, 50))) == [(4, 0)]  # up to four chips: no switch (DFModel)
    assert _counts(_topology((RING, 8, 50))) == [(8, 2)]


def test_dfmodels_two_link_technologies() -> None:
    assert {name: tech.bandwidth for name, tech in LINK_TECHNOLOGIES.items()} == {"pcie4": 25e9, "nvlink4": 900e9}
    with pytest.raises(ValueError, match="unknown link technology 'nvlink5'; known: pcie4, nvlink4"):
        link_technology("nvlink5")


def test_a_fabric_or_a_wrong_number_of_technologies_is_refused() -> None:
    with pytest.raises(ValueError, match="one per dimension"):
        network_bill(_topology((RING, 8, 50), (RING, 4, 50)), [PCIE4])
    fabric = network_pb2.Topology(torus=network_pb2.TorusFabric(shape=[4, 4]))
    with pytest.raises(ValueError, match="fabric"):
        network_bill(fabric, [])
