"""Collectives slow the compute they overlap (system_layer/engine/contention.py), exactly as the model says.

Notation: D a compute node's duration alone, C how long a collective that starts with it is in flight (C < D),
s the share of the SMs (compute-bound) or memory bandwidth (memory-bound) the collectives leave. The node does
s*C of its work while the collective runs and the rest at full speed: it ends at C + (D - s*C) = D + (1 - s)*C.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.graph_blocks import unrolled
from stratasim.kernel.grid import Grid
from stratasim.kernel.operators import elementwise, gemm
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import Contention, SimulationResult, SystemOptions, simulate
from stratasim.system_layer.engine.contention import Progress
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.system_layer.helpers import RING, SWITCH, topology

TOPO = topology((RING, 4, 50 * 10**9, 1000))
SHARES = Contention(compute_share=0.75, memory_share=0.5)
GEMM = gemm(4096, 4096, 4096)  # compute-bound on the h100 roofline
COPY = elementwise([1 << 26])  # memory-bound


def _graph(op: compute_pb2.OperatorDesc, collective_bytes: int = 0) -> workload_pb2.ExecutionGraph:
    nodes = [workload_pb2.Node(id=1, type=workload_pb2.COMP_NODE, op=op)]
    if collective_bytes:
        nodes.append(
            workload_pb2.Node(
                id=2, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=collective_bytes
            )
        )
    return workload_pb2.ExecutionGraph(nodes=nodes)


def _run(graph: workload_pb2.ExecutionGraph, contention: Contention | None) -> SimulationResult:
    return simulate(
        [graph] * 4,
        AnalyticalNetwork(),
        TOPO,
        SystemOptions(),
        compute=RooflineCompute(),
        device="h100",
        contention=None if contention is None else {"h100": contention},
    )


def _collective_ps(size: int) -> int:
    graph = _graph(GEMM, size)
    del graph.nodes[0]  # the collective alone
    return simulate([graph] * 4, AnalyticalNetwork(), TOPO, SystemOptions()).total_time_ps


@pytest.mark.parametrize(
    ("op", "share", "size"), [(GEMM, SHARES.compute_share, 8 << 20), (COPY, SHARES.memory_share, 2 << 20)]
)
def test_a_node_overlapped_by_a_collective_ends_at_d_plus_the_share_lost_of_c(
    op: compute_pb2.OperatorDesc, share: float, size: int
) -> None:
    alone = _run(_graph(op), None).total_time_ps
    overlap = _collective_ps(size)
    assert 0 < overlap < alone
    result = _run(_graph(op, size), SHARES)
    expected = overlap + round(alone - share * overlap)  # D + (1 - s) * C
    assert result.total_time_ps == expected
    assert result.per_npu[0].compute_ps == expected  # the stream computes all along, only slower
    assert result.per_npu[0].comm_ps == overlap  # the collective itself is not slowed


def test_a_gemm_overlapped_for_half_its_slowed_time_takes_d_over_one_minus_f_over_two() -> None:
    # f = 1 - s of the SMs taken. Overlapped for the first half of its time T: s*T/2 + T/2 = D, T = D / (1 - f/2).
    # D = 1.75 us and f = 1/4: T = 2 us, the collective ends at 1 us having let 0.75 us of work through.
    progress = Progress(1_750_000, 0, 1 / SHARES.compute_share)
    assert progress.end(contended=True) == 2_333_333  # all of it slowed: D / s
    progress.advance(1_000_000, contended=True)
    assert progress.work == 1_000_000
    assert progress.end(contended=False) == 2_000_000 == round(1_750_000 / (1 - 0.25 / 2))


def test_without_a_collective_nothing_changes_to_the_ps() -> None:
    assert _run(_graph(GEMM), SHARES) == _run(_graph(GEMM), None)


def test_a_node_of_fixed_duration_is_not_slowed() -> None:
    # A trace's measured time already ran beside its collectives.
    graph = _graph(GEMM, 8 << 20)
    graph.nodes[0].ClearField("op")
    graph.nodes[0].duration_ps = 10**9
    assert _run(graph, SHARES).total_time_ps == _run(graph, None).total_time_ps == 10**9


def test_the_shares_come_from_the_footprint() -> None:
    footprint = compute_pb2.CommFootprint(
        sms=132, comm_sms=32, memory_bandwidth_bytes_per_s=3.35e12, comm_memory_bytes_per_s=0.9e12
    )
    shares = Contention.of(footprint)
    assert shares.compute_share == 100 / 132
    assert shares.memory_share == (3.35e12 - 0.9e12) / 3.35e12
    assert shares.factor(compute_pb2.COMPUTE) == 1 / (100 / 132)
    assert shares.factor(compute_pb2.NETWORK) == 1.0


MODEL = dict(layers=2, hidden=256, heads=4, seq_len=128, vocab=1000)


def _training(plan: dict, *, aggregate: bool, unroll: bool, shares: Contention | None = SHARES) -> SimulationResult:
    workload = TransformerWorkload(TransformerWorkload.Config.model_validate({"model": MODEL, "parallelism": plan}))
    graphs = list(workload.graphs(workload.npus_required()))
    if unroll:
        graphs = [unrolled(graph) for graph in graphs]
    topo = topology((SWITCH, plan.get("tp", 1), 200 * 10**9, 500_000), (SWITCH, plan["dp"], 25 * 10**9, 2_000_000))
    return simulate(
        graphs,
        AnalyticalNetwork(),
        topo,
        SystemOptions(aggregate=aggregate),
        compute=RooflineCompute(),
        device="h100",
        representatives=workload.representatives(Grid.of(topo)) if aggregate else None,
        contention=None if shares is None else {"h100": shares},
    )


@pytest.mark.parametrize(
    "plan",
    [
        dict(tp=2, dp=2, zero=3, global_batch=4),
        dict(tp=2, dp=2, zero=3, global_batch=8, sequence_parallel=True, recompute="selective"),
        dict(tp=1, dp=4, zero=3, global_batch=8, recompute="full"),
    ],
)
def test_stand_ins_and_blocks_run_whole_stay_exact(plan: dict) -> None:
    every = _training(plan, aggregate=False, unroll=True)
    assert replace(_training(plan, aggregate=False, unroll=False), events_processed=0) == replace(
        every, events_processed=0
    )
    for unroll in (False, True):
        stood_in = _training(plan, aggregate=True, unroll=unroll)
        assert stood_in.simulated_npus < every.simulated_npus
        assert (stood_in.total_time_ps, stood_in.per_npu, stood_in.milestones) == (
            every.total_time_ps,
            every.per_npu,
            every.milestones,
        )


def test_fsdp_gathers_overlapping_compute_slow_it() -> None:
    plan = dict(tp=2, dp=2, zero=3, global_batch=4)
    slowed = _training(plan, aggregate=True, unroll=False)
    assert slowed.total_time_ps > _training(plan, aggregate=True, unroll=False, shares=None).total_time_ps


def test_a_block_run_whole_is_slowed_as_its_nodes_are() -> None:
    # Each of 3 blocks: GEMM then GEMM, an all-reduce of C beside the first from the block's start: 2D + (1 - s)C.
    block = workload_pb2.GraphBlock(
        name="layer",
        nodes=[
            workload_pb2.Node(id=1, type=workload_pb2.COMP_NODE, op=GEMM),
            workload_pb2.Node(
                id=2, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=8 << 20
            ),
            workload_pb2.Node(id=3, type=workload_pb2.COMP_NODE, op=GEMM, data_deps=[1]),
        ],
    )
    nodes = [
        workload_pb2.Node(id=i, type=workload_pb2.BLOCK_NODE, block=0, data_deps=[i - 1] if i > 1 else [])
        for i in (1, 2, 3)
    ]
    blocked = workload_pb2.ExecutionGraph(nodes=nodes, blocks=[block])
    whole, plain = _run(blocked, SHARES), _run(unrolled(blocked), SHARES)
    assert whole.events_processed < plain.events_processed  # the blocks ran whole
    # Identical but for events and the operator rows' names (unrolled nodes are renamed).
    assert replace(whole, events_processed=0, operators=()) == replace(plain, events_processed=0, operators=())
    gemm_ps, overlap = _run(_graph(GEMM), None).total_time_ps, _collective_ps(8 << 20)
    assert whole.total_time_ps == 3 * (2 * gemm_ps + round((1 - SHARES.compute_share) * overlap))


def test_a_plan_without_collectives_keeps_its_compute_runs_fused() -> None:
    chain = workload_pb2.ExecutionGraph(
        nodes=[
            workload_pb2.Node(id=i, type=workload_pb2.COMP_NODE, op=GEMM, data_deps=[i - 1] if i > 1 else [])
            for i in (1, 2, 3)
        ]
    )
    assert _run(chain, SHARES) == _run(chain, None)  # the events too: one fused run either way
