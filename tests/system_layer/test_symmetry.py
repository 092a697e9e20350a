"""Aggregating symmetric NPUs gives exactly the results of simulating every NPU, and only where it may."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, TraceSpan, simulate
from stratasim.system_layer.options import Preset
from stratasim.system_layer.symmetry.stand_ins import aggregation_blocker
from stratasim.v1 import network_pb2
from stratasim.workload_layer.training_loop import TrainingLoopWorkload
from tests.system_layer.helpers import FC, RING, SWITCH, collective_graph, topology

B, ALPHA = 50 * 10**9, 500_000


def both(
    graphs: list, topo: network_pb2.Topology, *, record_trace: bool = False, **options: object
) -> tuple[SimulationResult, SimulationResult]:
    """The same study simulated with aggregation and with every NPU."""
    on = simulate(graphs, AnalyticalNetwork(), topo, SystemOptions(**options), record_trace=record_trace)
    off = simulate(
        graphs, AnalyticalNetwork(), topo, SystemOptions(aggregate=False, **options), record_trace=record_trace
    )
    return on, off


def assert_identical(on: SimulationResult, off: SimulationResult) -> None:
    assert on.simulated_npus == 1 and off.simulated_npus == off.npus
    assert len(on.stand_ins) == on.npus and not off.stand_ins
    lived = on.stands_for()  # every NPU lived its stand-in's timeline: its spans and counters, copied to each

    def key(span: TraceSpan) -> tuple[int, int, int, str, str]:
        return span.npu, span.start_ps, span.end_ps, span.track, span.name

    spans = sorted((replace(s, npu=npu) for s in on.spans for npu in lived[s.npu]), key=key)
    counters = sorted(
        (replace(c, npu=npu) for c in on.counters for npu in lived[c.npu]), key=lambda c: (c.npu, c.time_ps)
    )
    assert spans == sorted(off.spans, key=key)
    same = dict(events_processed=0, simulated_npus=0, stand_ins=(), spans=())
    assert replace(on, counters=tuple(counters), **same) == replace(off, **same)


@pytest.mark.parametrize(
    ("dims", "collective", "options"),
    [
        ([(RING, 8, B, ALPHA)], "all_reduce", {}),
        ([(RING, 4, B, ALPHA), (SWITCH, 4, B // 2, 2 * ALPHA)], "all_reduce", {"splits": 4, "record_trace": True}),
        ([(FC, 4, B, ALPHA), (RING, 2, B, ALPHA), (RING, 3, B, ALPHA)], "reduce_scatter", {"splits": 3}),
        ([(RING, 4, B, ALPHA), (RING, 4, B, ALPHA)], "all_gather", {"active_chunks": 2, "splits": 4}),
        ([(SWITCH, 8, B, ALPHA)], "all_to_all", {"algorithm": {"*": ("direct",)}, "endpoint_delay": "10ns"}),
        (
            [(RING, 4, 8 * B, ALPHA), (RING, 4, B, ALPHA), (RING, 4, B, ALPHA)],
            "all_reduce",
            {"collective_optimization": "local_bw_aware", "splits": 2, "local_mem_bw": "1TB/s"},
        ),
        ([(RING, 8, B, ALPHA)], "all_to_all", {"preset": Preset.ASTRA_COMPAT, "splits": 4, "endpoint_delay": "10ns"}),
    ],
)
def test_aggregated_collectives_match_the_full_simulation(dims: list, collective: str, options: dict) -> None:
    topo = topology(*dims)
    npus = 1
    for dim in dims:
        npus *= dim[1]
    assert_identical(*both([collective_graph(collective, 1 << 20, repeat=2)] * npus, topo, **options))


def test_aggregated_training_loop_matches_the_full_simulation() -> None:
    layer = dict(
        name="l",
        repeat=3,
        forward="3us",
        input_grad="2us",
        weight_grad="2us",
        weight_grad_comm=dict(collective="all_reduce", size="4MiB"),
    )
    workload = TrainingLoopWorkload(TrainingLoopWorkload.Config(layers=[layer], passes=2))
    topo = topology((RING, 4, B, ALPHA), (SWITCH, 2, B, ALPHA))
    assert_identical(*both(workload.graphs(8), topo, splits=2))


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 5), min_size=1, max_size=3),
    kinds=st.lists(st.sampled_from([RING, FC, SWITCH]), min_size=3, max_size=3),
    collective=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]),
    algorithm=st.sampled_from(["ring", "direct"]),
    size=st.integers(1, 1 << 16),
    splits=st.integers(1, 3),
    active=st.integers(1, 2),
    delay=st.integers(0, 3000),
)
def test_aggregation_is_exact_for_random_symmetric_studies(
    sizes: list[int], kinds: list[int], collective: str, algorithm: str, size: int, splits: int, active: int, delay: int
) -> None:
    topo = topology(*[(kind, n, B, ALPHA) for kind, n in zip(kinds, sizes)])
    npus = 1
    for n in sizes:
        npus *= n
    on, off = both(
        [collective_graph(collective, size)] * npus,
        topo,
        algorithm={"*": (algorithm,)},
        splits=splits,
        active_chunks=active,
        endpoint_delay=f"{delay}ps",
    )
    assert_identical(on, off)


def test_aggregation_is_refused_where_npus_are_not_alike() -> None:
    info = network_pb2.NetworkInfo(npus=4, backend="analytical", stateless=True)
    same = [collective_graph("all_reduce", 1024)] * 4
    assert aggregation_blocker(same, info, SystemOptions()) is None
    assert "switched off" in str(aggregation_blocker(same, info, SystemOptions(aggregate=False)))
    assert "depend on traffic" in str(aggregation_blocker(same, network_pb2.NetworkInfo(npus=4), SystemOptions()))
    assert "every NPU" in str(aggregation_blocker(same[:2], info, SystemOptions()))
    different = same[:3] + [collective_graph("all_reduce", 2048)]
    assert "different graphs" in str(aggregation_blocker(different, info, SystemOptions()))
    sub = collective_graph("all_reduce", 1024)
    sub.nodes[0].group.extend([0, 1])
    assert "sub-group" in str(aggregation_blocker([sub] * 4, info, SystemOptions()))
