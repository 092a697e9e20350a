"""Broadcast and reduce from a root: closed forms per algorithm, multi-dimensional phases, bad roots.

S is the buffer, alpha the per-hop latency, ser(x) the serialisation of x bytes; one chunk.
"""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from tests.system_layer.helpers import FC, RING, SWITCH, ser, topology

B, ALPHA, S = 50 * 10**9, 500_000, 1 << 20
TYPES = {"broadcast": workload_pb2.BROADCAST, "reduce": workload_pb2.REDUCE}


def rooted(collective: str, root: int | None = None, group: list[int] | None = None) -> workload_pb2.ExecutionGraph:
    return workload_pb2.ExecutionGraph(
        nodes=[
            workload_pb2.Node(
                id=1,
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=TYPES[collective],
                comm_bytes=S,
                root=root,
                group=group or [],
            )
        ]
    )


def run(collective: str, dims: list, npus: int, root: int | None = None, **options: object):
    graphs = [rooted(collective, root)] * npus
    return simulate(graphs, AnalyticalNetwork(), topology(*dims), SystemOptions(**options))


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize("root", [0, 3, 7])
def test_ring_is_a_chain_of_n_minus_1_hops(collective: str, root: int) -> None:
    # Broadcast: root -> root+1 -> ... ; reduce: root+1 -> ... -> root. Each hop carries the whole buffer.
    result = run(collective, [(RING, 8, B, ALPHA)], 8, root)
    assert result.total_time_ps == 7 * (ALPHA + ser(S, B))


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize(("kind", "hops"), [(FC, 1), (SWITCH, 2)])
def test_direct_is_one_round(collective: str, kind: int, hops: int) -> None:
    result = run(collective, [(kind, 8, B, ALPHA)], 8, 5, algorithm={"*": ("direct",)})
    assert result.total_time_ps == hops * ALPHA + ser(S, B)


def test_a_reduce_pays_the_root_s_reductions() -> None:
    bandwidth = 10**11  # 100 GB/s of local memory: reducing S costs ceil(3 S / bandwidth)
    result = run("reduce", [(FC, 4, B, ALPHA)], 4, algorithm={"*": ("direct",)}, local_mem_bw=f"{bandwidth}B/s")
    assert result.total_time_ps == ALPHA + ser(S, B) + -(-3 * 3 * S * 10**12 // bandwidth)


def test_two_dimensional_broadcast_runs_the_root_s_outer_line_then_every_inner_line() -> None:
    # Root 5 = (1, 1) on a 4x3 grid of rings: first along dim 1 within column 1, then along every dim-0 ring.
    a1, b1 = 2_000_000, 10 * 10**9
    result = run("broadcast", [(RING, 4, B, ALPHA), (RING, 3, b1, a1)], 12, 5)
    assert result.total_time_ps == 2 * (a1 + ser(S, b1)) + 3 * (ALPHA + ser(S, B))
    assert result.collectives[0].phase_dims == (1, 0)
    # NPU 5 itself sends to 9 in dim 1 and to 6 in dim 0; NPU 8 = (0, 2) only receives.
    assert dict(result.per_npu[5].bytes_sent_per_dim) == {0: S, 1: S}
    assert dict(result.per_npu[8].bytes_sent_per_dim) == {}


def test_two_dimensional_reduce_mirrors_the_broadcast() -> None:
    a1, b1 = 2_000_000, 10 * 10**9
    result = run("reduce", [(RING, 4, B, ALPHA), (RING, 3, b1, a1)], 12, 5)
    assert result.total_time_ps == 3 * (ALPHA + ser(S, B)) + 2 * (a1 + ser(S, b1))
    assert result.collectives[0].phase_dims == (0, 1)


def test_rooted_collectives_are_not_aggregated() -> None:
    assert run("broadcast", [(RING, 4, B, ALPHA)], 4, 1).simulated_npus == 4


def test_a_root_outside_the_group_is_named() -> None:
    graph = rooted("broadcast", root=6, group=[0, 1, 2, 3])
    with pytest.raises(WorkloadError, match="root NPU 6 is not in the collective's group"):
        simulate([graph] * 4, AnalyticalNetwork(), topology((RING, 8, B, ALPHA)), SystemOptions())


@pytest.mark.parametrize("algorithm", ["halving_doubling", "double_binary_tree", "ring_bidirectional"])
def test_algorithms_without_a_rooted_plan_are_refused(algorithm: str) -> None:
    with pytest.raises(WorkloadError, match=f"{algorithm} supports .* only, not broadcast"):
        run("broadcast", [(RING, 4, B, ALPHA)], 4, algorithm={"*": (algorithm,)})
