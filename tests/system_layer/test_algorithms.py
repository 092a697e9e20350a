"""The bidirectional ring, halving-doubling and double binary tree against their closed forms, exact to the ps.

Notation as in test_closed_form: n NPUs on a line, S the buffer per NPU, B the bandwidth, ser(x) =
ceil(x * 1e12 / B) ps, and h the latency of a message between two peers: hops x alpha, where a fully
connected line is one hop, a switch two, and a ring the shorter way round (min(d, n - d) for peers d apart).
One chunk and no endpoint delay.
"""

from __future__ import annotations

import pydantic
import pytest

from stratasim.kernel.errors import WorkloadError
from stratasim.system_layer import ALGORITHMS
from stratasim.system_layer.collectives.algorithms import _PLANNERS, _binary_tree, plan_phase
from stratasim.system_layer.collectives.nccl import NCCL
from tests.system_layer.helpers import FC, RING, SWITCH, run_collective, ser, topology

B = 50 * 10**9  # 50 GB/s
ALPHA = 500_000  # 500 ns
S = 1 << 20
# (kind, latency of a message between neighbours): one hop on a ring or fully connected line, two via a switch.
NEIGHBOURS = [(RING, ALPHA), (FC, ALPHA), (SWITCH, 2 * ALPHA)]


def time_of(kind: int, n: int, collective: str, algorithm: str, size: int = S) -> int:
    result = run_collective(topology((kind, n, B, ALPHA)), collective, size, algorithm={"*": (algorithm,)})
    return result.total_time_ps


# --- ring_bidirectional: the ring's steps, each sending ceil(S/2n) both ways at once --------------------------


@pytest.mark.parametrize(("kind", "h"), NEIGHBOURS)
@pytest.mark.parametrize("n", [2, 3, 8])
def test_bidirectional_ring_all_reduce_halves_the_ring_messages(kind: int, h: int, n: int) -> None:
    # 2(n-1)(h + ser(S/2n))
    assert time_of(kind, n, "all_reduce", "ring_bidirectional") == 2 * (n - 1) * (h + ser(-(-S // (2 * n)), B))


@pytest.mark.parametrize(("kind", "h"), NEIGHBOURS)
@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_bidirectional_ring_reduce_scatter_and_all_gather(kind: int, h: int, collective: str) -> None:
    # (n-1)(h + ser(S/2n))
    n = 8
    assert time_of(kind, n, collective, "ring_bidirectional") == (n - 1) * (h + ser(S // (2 * n), B))


@pytest.mark.parametrize(("kind", "h"), NEIGHBOURS)
def test_bidirectional_ring_all_to_all_relays_half_each_way(kind: int, h: int) -> None:
    # Step k = 1..n-1 forwards the n-k shares still travelling, half of each each way: sum of h + ser(k S/2n).
    n = 8
    expected = sum(h + ser(k * S // (2 * n), B) for k in range(1, n))
    assert time_of(kind, n, "all_to_all", "ring_bidirectional") == expected


def test_bidirectional_ring_shares_one_plan_across_positions() -> None:
    plan = plan_phase("all_reduce", "ring_bidirectional", 0, 4096, S)
    assert plan.steps_for(0) is plan.steps_for(4095)
    assert plan.steps_for(7)[0].offsets == (1, -1)


# --- halving_doubling: step k = 1..log2 n exchanges S/2^k with the partner n/2^k away ---------------------------


def hd_halves(kind: int, n: int) -> list[int]:
    """h + ser(S/2^k) for k = 1..log2 n, h for the partner n/2^k positions away."""
    costs = []
    for k in range(1, n.bit_length()):
        distance = n >> k
        hops = min(distance, n - distance) if kind == RING else 2 if kind == SWITCH else 1
        costs.append(hops * ALPHA + ser(S >> k, B))
    return costs


@pytest.mark.parametrize("kind", [RING, FC, SWITCH])
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_halving_doubling_all_reduce(kind: int, n: int) -> None:
    # Halving then doubling over the same exchanges: sum over k of 2(h_k + ser(S/2^k)).
    # E.g. FC, n = 8: 2(alpha + ser(S/2)) + 2(alpha + ser(S/4)) + 2(alpha + ser(S/8)).
    assert time_of(kind, n, "all_reduce", "halving_doubling") == 2 * sum(hd_halves(kind, n))


@pytest.mark.parametrize("kind", [RING, FC, SWITCH])
@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_halving_doubling_reduce_scatter_and_all_gather_are_one_half(kind: int, collective: str) -> None:
    # sum over k of h_k + ser(S/2^k): the all-gather doubles its messages, S/n up to S/2, the same exchanges.
    n = 8
    assert time_of(kind, n, collective, "halving_doubling") == sum(hd_halves(kind, n))


def test_halving_doubling_partners_are_position_xor_distance() -> None:
    plan = plan_phase("all_reduce", "halving_doubling", 0, 8, 8000)
    partners = [(5 + step.offsets[0]) % 8 for step in plan.steps_for(5)]
    assert partners == [1, 7, 4, 4, 7, 1]  # 5 XOR 4, 5 XOR 2, 5 XOR 1, then back up
    assert [step.bytes for step in plan.steps_for(5)] == [4000, 2000, 1000, 1000, 2000, 4000]
    assert [step.reduces for step in plan.steps_for(5)] == [True] * 3 + [False] * 3


# --- double_binary_tree: up each tree then down, whole half-buffers per edge ----------------------------------


@pytest.mark.parametrize(("kind", "h"), [(FC, ALPHA), (SWITCH, 2 * ALPHA)])
@pytest.mark.parametrize(("n", "height"), [(2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (12, 4), (16, 4)])
def test_double_binary_tree_on_equal_edges_is_twice_the_height(kind: int, h: int, n: int, height: int) -> None:
    # Every edge costs e = h + ser(S/2); reduce up and broadcast down both trees at once: 2 * height * e.
    # An inner node's two children send to it (and it to them) at once, which costs nothing extra here.
    assert time_of(kind, n, "all_reduce", "double_binary_tree") == 2 * height * (h + ser(S // 2, B))


@pytest.mark.parametrize(("n", "path_hops"), [(4, [2, 1]), (8, [4, 2, 1])])
def test_double_binary_tree_on_a_ring_follows_its_longest_path(n: int, path_hops: list[int]) -> None:
    # Tree 0 for n = 8 is 0 - 4 - {2, 6} - {1, 3, 5, 7}: its deepest path has edges 4, 2 and 1 positions long
    # (as many hops on a ring of 8); tree 1 is the same shifted. Up then down: 2 * sum(hops alpha + ser(S/2)).
    expected = 2 * sum(hops * ALPHA + ser(S // 2, B) for hops in path_hops)
    assert time_of(RING, n, "all_reduce", "double_binary_tree") == expected


def test_double_binary_tree_is_nccls_tree_and_its_shift() -> None:
    tree = _binary_tree(13)
    assert tree.parent == (-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8)
    assert tree.children[0] == (8,) and tree.children[12] == (10,)
    plan = plan_phase("all_reduce", "double_binary_tree", 0, 13, 2000)
    # Position 1 is a leaf of tree 0 (parent 2) and the root of tree 1 (whose child is position 9, role 8).
    assert {(step.tag, step.offsets) for step in plan.steps_for(1) if step.offsets} == {(0, (1,)), (3, (8,))}


def test_mixed_algorithms_per_dimension_add_up() -> None:
    # Halving-doubling on dim 0 then a double binary tree on dim 1, each a full all-reduce of S.
    topo = topology((FC, 4, B, ALPHA), (FC, 4, B, ALPHA))
    result = run_collective(topo, "all_reduce", S, algorithm={"*": ("halving_doubling", "double_binary_tree")})
    assert result.total_time_ps == 2 * sum(hd_halves(FC, 4)) + 2 * 2 * (ALPHA + ser(S // 2, B))


# --- bad input -------------------------------------------------------------------------------------------------


def test_halving_doubling_needs_a_power_of_two() -> None:
    with pytest.raises(WorkloadError, match=r"halving_doubling needs a power of two NPUs per line.* 6 NPUs"):
        time_of(FC, 6, "all_reduce", "halving_doubling")
    with pytest.raises(WorkloadError, match="flat group has lines of 12 NPUs"):
        plan_phase("reduce_scatter", "halving_doubling", -1, 12, S)


def test_halving_doubling_has_no_all_to_all() -> None:
    with pytest.raises(WorkloadError, match="halving_doubling supports all_reduce, reduce_scatter, all_gather only"):
        time_of(FC, 8, "all_to_all", "halving_doubling")


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather", "all_to_all"])
def test_double_binary_tree_is_all_reduce_only(collective: str) -> None:
    with pytest.raises(WorkloadError, match="double_binary_tree supports all_reduce only"):
        time_of(FC, 8, collective, "double_binary_tree")


def test_an_unknown_algorithm_fails() -> None:
    # The options refuse it before anything runs; the planner refuses it too, for any other caller.
    with pytest.raises(pydantic.ValidationError, match="unknown algorithm 'tree'; available: ring, direct"):
        time_of(FC, 8, "all_reduce", "tree")
    with pytest.raises(WorkloadError, match="algorithm 'tree' is not supported; expected one of ring, direct"):
        plan_phase("all_reduce", "tree", 0, 8, S)


def test_the_study_names_match_the_registry() -> None:
    # ``nccl`` is no planner of its own: it picks one of them (or in-network reduction) per size.
    assert (*_PLANNERS, NCCL) == ALGORITHMS
