"""Phases worked out line by line with numpy give exactly the message-by-message results, and run only where
nothing else can interleave (:mod:`stratasim.system_layer.engine.line_batches`)."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.engine import simulation
from stratasim.system_layer.options import Preset
from stratasim.v1 import network_pb2, workload_pb2
from tests.system_layer.helpers import COLLECTIVES, FC, RING, SWITCH, collective_graph, topology

KINDS = (RING, FC, SWITCH)
ALGORITHMS = ("ring", "direct", "ring_bidirectional", "halving_doubling", "double_binary_tree")


class _Windowed:
    """The analytical network seen only through the windowed contract, so the engine sends message by message."""

    name = "analytical"

    def __init__(self) -> None:
        self._network = AnalyticalNetwork()
        self.configure = self._network.configure
        self.inject = self._network.inject
        self.advance = self._network.advance
        self.counters = self._network.counters
        self.close = self._network.close


def _run(
    graphs: list,
    topo: network_pb2.Topology,
    options: SystemOptions,
    *,
    batched: bool,
    compute: RooflineCompute | None = None,
) -> SimulationResult:
    """Simulate every NPU, with phases batched by line where allowed (``batched``) or message by message."""
    if batched:
        return simulate(graphs, AnalyticalNetwork(), topo, options, compute=compute, device="h100")
    with mock.patch.object(simulation, "batchable", return_value=False):
        return simulate(graphs, AnalyticalNetwork(), topo, options, compute=compute, device="h100")


def _same(batched: SimulationResult, messages: SimulationResult) -> None:
    assert replace(batched, events_processed=0) == replace(messages, events_processed=0)


def _lines(topo: network_pb2.Topology) -> list[int]:
    return [dim.size for dim in topo.dimensions]


@st.composite
def _studies(draw: st.DrawFn) -> tuple[list, network_pb2.Topology, SystemOptions]:
    dims = draw(
        st.lists(
            st.tuples(
                st.sampled_from(KINDS),
                st.sampled_from((2, 3, 4, 8)),
                st.integers(1, 64).map(lambda g: g * 10**9),
                st.integers(0, 900_000),
            ),
            min_size=1,
            max_size=3,
        )
    )
    topo = topology(*dims)
    collective = draw(st.sampled_from(("all_reduce", "reduce_scatter", "all_gather", "all_to_all")))
    algorithm = draw(st.sampled_from(ALGORITHMS))
    if algorithm == "double_binary_tree":
        collective = "all_reduce"
    if algorithm == "halving_doubling" and (collective == "all_to_all" or any(n & (n - 1) for n in _lines(topo))):
        algorithm = "ring"
    preset = draw(st.sampled_from((Preset.DEFAULT, Preset.ASTRA_COMPAT)))
    if algorithm == "double_binary_tree" and preset is Preset.ASTRA_COMPAT and any(n & (n - 1) for n in _lines(topo)):
        algorithm = "ring"  # ASTRA-sim's trees number a power of two NPUs only
    options = SystemOptions(
        algorithm={"*": (algorithm,)},
        aggregate=False,
        queues_per_dim=draw(st.sampled_from((1, 2))),
        endpoint_delay=draw(st.sampled_from(("0ns", "10000ns", "7ns"))),
        local_mem_bw=draw(st.sampled_from((None, f"{10**12}GB/s", f"{3 * 10**11 + 7}GB/s"))),
        scheduling=draw(st.sampled_from(("lifo", "fifo"))),
        collective_optimization="baseline"
        if algorithm == "double_binary_tree"
        else draw(st.sampled_from(("baseline", "local_bw_aware"))),
        preset=preset,
    )
    npus = 1
    for n in _lines(topo):
        npus *= n
    graph = _chain(collective, draw(st.integers(1, 1 << 24)), draw(st.lists(st.integers(0, 10**7), max_size=3)))
    return [graph] * npus, topo, options


def _chain(collective: str, size: int, computes: list[int]) -> workload_pb2.ExecutionGraph:
    """A collective, then for each of ``computes`` a compute node of that many ps and the collective again."""
    graph = collective_graph(collective, size)
    for duration in computes:
        last = graph.nodes[-1].id
        graph.nodes.add(id=last + 1, type=workload_pb2.COMP_NODE, duration_ps=duration, ctrl_deps=[last])
        graph.nodes.add(
            id=last + 2,
            type=workload_pb2.COMM_COLL_NODE,
            comm_type=COLLECTIVES[collective],
            comm_bytes=size,
            ctrl_deps=[last + 1],
        )
    return graph


@settings(max_examples=60, deadline=None)
@given(_studies())
def test_batched_lines_match_messages(study: tuple[list, network_pb2.Topology, SystemOptions]) -> None:
    graphs, topo, options = study
    _same(_run(graphs, topo, options, batched=True), _run(graphs, topo, options, batched=False))


def test_batched_lines_match_the_windowed_engine() -> None:
    """The windowed engine (a network in another process works this way) sends every message too."""
    topo = topology((RING, 8, 50 * 10**9, 500_000), (SWITCH, 4, 25 * 10**9, 1_000_000))
    options = SystemOptions(aggregate=False, endpoint_delay="10000ns", local_mem_bw=f"{10**12}GB/s")
    graphs = [collective_graph("all_reduce", 1 << 20, repeat=2)] * 32
    _same(simulate(graphs, AnalyticalNetwork(), topo, options), simulate(graphs, _Windowed(), topo, options))


@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling"])
def test_reductions_priced_by_the_compute_layer_are_counted_alike(algorithm: str) -> None:
    """Priced reductions are operators of the report, with their runs and energy: a batch counts them too."""
    topo = topology((RING, 4, 50 * 10**9, 500_000), (SWITCH, 2, 25 * 10**9, 1_000_000))
    options = SystemOptions(aggregate=False, reduction="compute", algorithm={"*": (algorithm,)})
    graphs = [collective_graph("all_reduce", 1 << 22, repeat=2)] * 8
    batched = _run(graphs, topo, options, batched=True, compute=RooflineCompute())
    messages = _run(graphs, topo, options, batched=False, compute=RooflineCompute())
    assert batched.operators and batched.total_time_ps > 0
    _same(batched, messages)


def _counting_batches() -> tuple[mock._patch, list[int]]:
    calls: list[int] = []
    original = simulation.LineBatches._run

    def run(self: object, schedule: object, lines: list) -> None:
        calls.append(len(lines))
        original(self, schedule, lines)  # type: ignore[arg-type]

    return mock.patch.object(simulation.LineBatches, "_run", run), calls


def test_a_ring_allreduce_runs_as_one_batch_per_phase() -> None:
    topo = topology((RING, 4, 50 * 10**9, 500_000), (RING, 2, 50 * 10**9, 500_000))
    patch, calls = _counting_batches()
    with patch:
        _same(
            _run([collective_graph("all_reduce", 1 << 20)] * 8, topo, SystemOptions(aggregate=False), batched=True),
            _run([collective_graph("all_reduce", 1 << 20)] * 8, topo, SystemOptions(aggregate=False), batched=False),
        )
    assert calls[:2] == [2, 4]  # two lines of 4 in dimension 0, then four lines of 2 in dimension 1


def _graph_with(*extra: workload_pb2.Node) -> workload_pb2.ExecutionGraph:
    graph = collective_graph("all_reduce", 1 << 20)
    graph.nodes.extend(extra)
    return graph


_PLAIN = collective_graph("all_reduce", 1 << 20)
_SUBGROUP = _graph_with(
    workload_pb2.Node(
        id=1,
        type=workload_pb2.COMM_COLL_NODE,
        comm_type=COLLECTIVES["all_reduce"],
        comm_bytes=8,
        group=[0, 1],
        ctrl_deps=[0],
    )
)


@pytest.mark.parametrize(
    ("graphs", "options"),
    [
        ([_PLAIN] * 4, SystemOptions(aggregate=False, splits=2)),  # a collective's chunks overlap
        (
            [_graph_with(workload_pb2.Node(id=1, type=workload_pb2.COMP_NODE, duration_ps=5))] * 4,  # two roots
            SystemOptions(aggregate=False),
        ),
        ([_SUBGROUP] * 2 + [_PLAIN] * 2, SystemOptions(aggregate=False)),  # two groups
    ],
)
def test_batches_only_where_nothing_can_interleave(graphs: list, options: SystemOptions) -> None:
    topo = topology((RING, 4, 50 * 10**9, 500_000))
    patch, calls = _counting_batches()
    with patch:
        _same(_run(graphs, topo, options, batched=True), _run(graphs, topo, options, batched=False))
    assert calls == []
