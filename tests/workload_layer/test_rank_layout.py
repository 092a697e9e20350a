"""``parallelism.order`` maps the TP/PP/DP groups onto the topology's dimensions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.grid import Grid
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.rank_layout import RankLayout
from tests.system_layer.helpers import RING, SWITCH, topology
from tests.workload_layer.transformer_helpers import GPT, all_graphs, build


def test_layout_numbers_npus_innermost_axis_first() -> None:
    layout = RankLayout(("pp", "tp", "dp"), {"tp": 2, "pp": 3, "dp": 2})
    assert [layout.stride(axis) for axis in ("pp", "tp", "dp")] == [1, 3, 6]
    assert layout.npu({"tp": 1, "pp": 2, "dp": 1}) == 2 + 3 + 6
    assert layout.group(11, "tp") == (8, 11) and layout.group(11, "pp") == (9, 10, 11)
    assert layout.group(11, "dp") == (5, 11) and layout.rank(11, "dp") == 1


def test_groups_follow_the_order() -> None:
    graphs = all_graphs(build(GPT, tp=2, pp=2, dp=2, order=["dp", "tp", "pp"]))
    tp_groups = {tuple(n.group) for g in graphs for n in g.nodes if n.pg_name == "tp"}
    dp_groups = {tuple(n.group) for g in graphs for n in g.nodes if n.pg_name == "dp"}
    peers = {(g.npu, n.peer) for g in graphs for n in g.nodes if n.type == workload_pb2.COMM_SEND_NODE}
    assert tp_groups == {(0, 2), (1, 3), (4, 6), (5, 7)}
    assert dp_groups == {(0, 1), (2, 3), (4, 5), (6, 7)}
    assert peers == {(npu, npu ^ 4) for npu in range(8)}  # stages are 4 ids apart


@pytest.mark.parametrize("order", [("tp", "pp", "dp"), ("dp", "tp", "pp"), ("pp", "dp", "tp")])
def test_a_consistent_relabelling_changes_no_time(order: tuple[str, ...]) -> None:
    """The same machine with its dimensions listed in the order of the axes gives the same iteration."""
    sizes = {"tp": 2, "pp": 2, "dp": 3}
    kinds = {
        "tp": (RING, 2, 300 * 10**9, 500_000),
        "pp": (SWITCH, 2, 50 * 10**9, 2_000_000),
        "dp": (RING, 3, 25 * 10**9, 3_000_000),
    }
    workload = build(GPT, **sizes, order=list(order), global_batch=12)
    topo = topology(*(kinds[axis] for axis in order))
    representatives = workload.representatives(Grid(tuple(sizes[axis] for axis in order)))
    assert representatives is not None
    result = simulate(
        all_graphs(workload),
        AnalyticalNetwork(),
        topo,
        SystemOptions(),
        compute=RooflineCompute(),
        device="h100",
        representatives=representatives,
    )
    reference = build(GPT, **sizes, global_batch=12)
    ref_topo = topology(*(kinds[axis] for axis in ("tp", "pp", "dp")))
    expected = simulate(
        all_graphs(reference), AnalyticalNetwork(), ref_topo, SystemOptions(), compute=RooflineCompute(), device="h100"
    )
    assert result.total_time_ps == expected.total_time_ps
    assert sorted(n.finish_ps for n in result.per_npu) == sorted(n.finish_ps for n in expected.per_npu)


def test_order_must_name_each_axis_once() -> None:
    with pytest.raises(ValidationError, match="must list tp, pp and dp once each"):
        build(GPT, tp=2, order=["tp", "tp", "dp"])
