"""HPL as a dataflow graph: the iterations coarsened into at most ``groups`` runs, carrying HPL's operation count
``2/3 N^3 + 3/2 N^2`` exactly, the panel broadcast priced as an all-gather."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.workload_layer.dataflow.generators.hpl import hpl_5m, hpl_flops, hpl_graph
from stratasim.workload_layer.dataflow.graph import GraphError
from stratasim.workload_layer.dataflow.layouts import conversion


def test_hpl_counts_as_hpl_does() -> None:
    assert hpl_flops(1000) == (2 * 1000**3) // 3 + 3 * 1000**2 // 2
    assert hpl_flops(5) == int(2 / 3 * 125 + 3 / 2 * 25)


@given(st.integers(2, 40), st.integers(1, 64), st.integers(1, 40))
def test_the_graph_carries_hpls_count_exactly(blocks: int, nb: int, groups: int) -> None:
    graph = hpl_graph(blocks * nb, nb, groups)
    assert sum(k.flops for k in graph.kernels) == hpl_flops(blocks * nb)
    assert len(graph.kernels) == 2 * min(groups, blocks - 1) + 1
    assert [k.name for k in graph.order()][-1] == "solve"


def test_updates_are_nb_cubed_tiles_of_the_trailing_matrix() -> None:
    """Four blocks, one run per iteration: 3^2, 2^2 and 1^2 trailing blocks, each a ``2 NB^3`` GEMM."""
    graph = hpl_graph(40, 10, groups=3)
    assert [max(1, graph.kernel(f"update {i}").operator.gemm.batch) for i in (1, 2, 3)] == [9, 4, 1]
    assert graph.kernel("update 1").flops == 9 * 2 * 10**3
    assert graph.kernel("panel 1").flops == 3 * 2 * 10**3


def test_a_5m_matrix_stays_a_small_graph() -> None:
    graph = hpl_5m()
    assert len(graph.kernels) == 63 and len(graph.tensors) == 31 + 2 * 30 + 1
    assert sum(k.flops for k in graph.kernels) == hpl_flops(5_000_000)


def test_the_panel_broadcast_is_a_layout_change() -> None:
    """A rows-split panel meeting an update that takes it whole: the all-gather standing for HPL's broadcast."""
    graph = hpl_graph(64, 8, 4)
    panel, update = graph.kernel("panel 2"), graph.kernel("update 2")
    (broadcast,) = [t for t in graph.inputs_of("update 2") if t.source == "panel 2"]
    assert conversion(panel.scheme("m").output, update.scheme("columns").inputs[broadcast.slot]) == "all_gather"
    assert broadcast.bytes == sum(k + 1 for k in range(5, 3, -1)) * 8 * 8 * 8


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"n": 1, "nb": 1}, "hpl_graph: argument 'n': must be an integer of at least 2, not 1"),
        ({"n": 100, "nb": 0}, "argument 'nb': must be an integer of at least 1, not 0"),
        ({"n": 100, "nb": 30}, r"argument 'nb': must divide n \(100\) into at least two blocks, not 30"),
        ({"n": 100, "nb": 100}, "argument 'nb': must divide n"),
        ({"n": 100, "nb": 10, "groups": 0}, "argument 'groups': must be an integer of at least 1"),
        ({"n": 100.0, "nb": 10}, "argument 'n': must be an integer"),
    ],
)
def test_bad_arguments_are_named(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        hpl_graph(**arguments)
