"""Properties every collective algorithm keeps, for random line sizes, buffer sizes and latencies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.collectives.algorithms import _PLANNERS, ROOTED, _binary_tree, base_name, plan_phase
from stratasim.v1 import workload_pb2
from tests.system_layer.helpers import COLLECTIVES, FC, RING, run_collective, topology

B = 50 * 10**9
# Collectives without a root (broadcast and reduce set their root apart; tests/system_layer/test_rooted.py).
SUPPORTED = [
    (name, collective)
    for name, entry in _PLANNERS.items()
    for collective in entry.collectives
    if collective not in ROOTED
]
FAST = settings(max_examples=50, deadline=None)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, int, int]:
    """(algorithm, collective, n, S) with S a multiple of 2n, so that no share is rounded."""
    algorithm, collective = draw(st.sampled_from(SUPPORTED))
    n = 1 << draw(st.integers(1, 4)) if _PLANNERS[algorithm].power_of_two else draw(st.integers(2, 16))
    return algorithm, collective, n, 2 * n * draw(st.integers(1, 4096))


def run(
    algorithm: str, collective: str, n: int, size: int, kind: int = RING, latency: int = 500_000, aggregate: bool = True
) -> SimulationResult:
    topo = topology((kind, n, B, latency))
    return run_collective(topo, collective, size, algorithm={"*": (algorithm,)}, aggregate=aggregate)


@FAST
@given(cases(), st.sampled_from([RING, FC]))
def test_every_npu_finishes_together_on_a_symmetric_line(case: tuple[str, str, int, int], kind: int) -> None:
    # Simulated NPU by NPU (not aggregated by symmetry, which would make this hold by construction), and the
    # same as the aggregated run that trusts it.
    algorithm, collective, n, size = case
    result = run(algorithm, collective, n, size, kind, aggregate=False)
    assert result.events_processed > 0 and result.total_time_ps > 0
    finishes = {npu.finish_ps for npu in result.per_npu}
    if algorithm == "double_binary_tree":  # its NPUs play different parts: it need only end, everywhere
        assert min(finishes) > 0
    else:
        assert finishes == {result.total_time_ps}
    assert run(algorithm, collective, n, size, kind).per_npu == result.per_npu


@FAST
@given(cases(), st.integers(0, 4096), st.integers(0, 10**6), st.integers(0, 10**6))
def test_time_grows_with_size_and_latency(case: tuple[str, str, int, int], more: int, lat: int, extra: int) -> None:
    algorithm, collective, n, size = case
    base = run(algorithm, collective, n, size, latency=lat).total_time_ps
    assert run(algorithm, collective, n, size + 2 * n * more, latency=lat).total_time_ps >= base
    assert run(algorithm, collective, n, size, latency=lat + extra).total_time_ps >= base


def sent_bytes(algorithm: str, collective: str, n: int, size: int) -> list[int]:
    plan = plan_phase(collective, algorithm, 0, n, size)
    return [sum(step.bytes * len(step.offsets) for step in plan.steps_for(p)) for p in range(n)]


def known_bytes(algorithm: str, collective: str, n: int, size: int) -> int:
    """What one NPU sends: the textbook totals for S divisible by 2n."""
    if collective == "all_reduce":
        return 2 * (n - 1) * size // n
    if collective == "all_to_all" and base_name(algorithm) != "direct":
        return (n - 1) * size // 2  # relayed: the k-th share from the end travels k hops
    return (n - 1) * size // n


@settings(max_examples=200, deadline=None)
@given(cases())
def test_each_npu_sends_the_known_total(case: tuple[str, str, int, int]) -> None:
    algorithm, collective, n, size = case
    sent = sent_bytes(algorithm, collective, n, size)
    expected = known_bytes(algorithm, collective, n, size)
    if algorithm == "double_binary_tree":  # every edge of both trees carries S/2 up and S/2 down
        assert sum(sent) == n * expected == 2 * (n - 1) * size
    else:
        assert sent == [expected] * n


def grouped(collective: str, size: int, groups: list[list[int]]) -> list[workload_pb2.ExecutionGraph]:
    graph_of = [
        workload_pb2.ExecutionGraph(
            nodes=[
                workload_pb2.Node(
                    id=1,
                    type=workload_pb2.COMM_COLL_NODE,
                    comm_type=COLLECTIVES[collective],
                    comm_bytes=size,
                    group=group,
                )
            ]
        )
        for group in groups
    ]
    npus = sum(len(group) for group in groups)
    return [next(graph_of[g] for g, group in enumerate(groups) if npu in group) for npu in range(npus)]


@FAST
@given(cases(), st.booleans())
def test_disjoint_sub_groups_of_a_ring_take_the_same_time(case: tuple[str, str, int, int], interleaved: bool) -> None:
    # Two groups of n on a ring of 2n that map onto each other by turning the ring: evens and odds, or halves.
    algorithm, collective, n, size = case
    if interleaved:
        groups, shift = [list(range(0, 2 * n, 2)), list(range(1, 2 * n, 2))], 1
    else:
        groups, shift = [list(range(n)), list(range(n, 2 * n))], n
    options = SystemOptions(algorithm={"*": (algorithm,)})
    topo = topology((RING, 2 * n, B, 500_000))
    result = simulate(grouped(collective, size, groups), AnalyticalNetwork(), topo, options)
    first, second = result.collectives
    assert first.end_ps == second.end_ps > 0
    finish = [npu.finish_ps for npu in result.per_npu]
    assert [finish[npu] for npu in groups[0]] == [finish[npu + shift] for npu in groups[0]]


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 300))
def test_the_two_binary_trees_complement_each_other(n: int) -> None:
    # Binary, rooted at 0, of height ceil(log2 n); tree 1 is tree 0 shifted by one: no position is a leaf in both.
    tree = _binary_tree(n)
    assert tree.parent[0] == -1 and all(0 <= tree.parent[p] < n for p in range(1, n))
    assert max(len(c) for c in tree.children) <= 2
    assert max(tree.depth) == tree.height[0] == (n - 1).bit_length()
    leaves = {p for p in range(n) if not tree.children[p]}
    assert not leaves & {(leaf + 1) % n for leaf in leaves}
