"""ASTRA-sim's own rules under ``preset: astra_compat`` where they differ from ours, against hand-derived times.

ASTRA-sim's analytical network (ASTRA-SIM-SEMANTICS.md): bandwidth in GiB/s, times in whole ns. A hop of m bytes
on the congestion-aware backend arrives after floor(L + m / beta) and a path of h hops costs h of them
(store-and-forward); the congestion-unaware backend charges floor(hops L + m / beta) for the whole path. One chunk,
no endpoint delay and free reductions, so the network times are the whole story.
"""

from __future__ import annotations

import pytest

from stratasim.kernel.errors import WorkloadError
from stratasim.system_layer.collectives import astra_compat
from stratasim.system_layer.collectives.algorithms import plan_phase
from stratasim.system_layer.collectives.astra_tree import _tree
from tests.astra.test_astra_compat import astra_study, simulated_ns

MB = 1 << 20
FREE = dict(splits=1, active_chunks=1, endpoint_delay="0ns", local_mem_bw="1000000000TB/s")


def hop_ns(size: int, gib_per_s: int, latency_ns: int, hops: int = 1) -> int:
    """floor(hops L + m / beta) in ns, beta = gib_per_s * 2^30 / 1e9 bytes per ns."""
    return (hops * latency_ns * gib_per_s * 2**30 + size * 10**9) // (gib_per_s * 2**30)


# --- halving-doubling: the largest message goes to the nearest partner (HalvingDoubling.cc) --------------------


def partners(collective: str, position: int) -> list[tuple[int, int]]:
    plan = astra_compat.adapt(plan_phase(collective, "halving_doubling", 0, 8, 8000))
    return [((position + step.offsets[0]) % 8, step.bytes) for step in plan.steps_for(position)]


def test_halving_starts_with_the_nearest_partner_and_the_doubling_ends_there() -> None:
    # rank_offset 1, 2, 4 with data/2, /4, /8 (5 XOR 1, 5 XOR 2, 5 XOR 4), then back out.
    assert partners("all_reduce", 5) == [(4, 4000), (7, 2000), (1, 1000), (1, 1000), (7, 2000), (4, 4000)]
    assert partners("reduce_scatter", 5) == [(4, 4000), (7, 2000), (1, 1000)]


def test_all_gather_starts_far_with_the_smallest_message() -> None:
    # rank_offset n/2 with the input, then n/4, ... 1 with the buffer grown to half the output.
    assert partners("all_gather", 5) == [(1, 1000), (7, 2000), (4, 4000)]


def ring4_hd(collective: str, backend: str) -> int:
    study = astra_study([("Ring", 4, 50.0, 500.0)], collective, MB, algorithm="halving_doubling", **FREE)
    study["network"]["backend"] = backend
    return simulated_ns(study)


def test_on_a_congestion_aware_ring_the_nearest_partner_takes_the_half() -> None:
    # Reduce-scatter of S = 1 MiB on a ring of 4: S/2 one hop away, then S/4 two hops away.
    assert ring4_hd("reduce_scatter", "congestion_aware") == hop_ns(MB // 2, 50, 500) + 2 * hop_ns(MB // 4, 50, 500)
    # All-gather of a 1 MiB input: the input two hops away, then 2 MiB one hop away.
    assert ring4_hd("all_gather", "congestion_aware") == 2 * hop_ns(MB, 50, 500) + hop_ns(2 * MB, 50, 500)


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather", "all_reduce"])
def test_on_a_congestion_unaware_ring_the_pairing_costs_the_same(collective: str) -> None:
    # Each step costs floor(hops L + m/beta) on its own: the same distances and sizes in any pairing add up alike.
    # Reduce-scatter: S/2 and S/4 at 1 and 2 hops either way round.
    expected = {
        "reduce_scatter": hop_ns(MB // 2, 50, 500) + hop_ns(MB // 4, 50, 500, hops=2),
        "all_gather": hop_ns(MB, 50, 500, hops=2) + hop_ns(2 * MB, 50, 500),
    }
    expected["all_reduce"] = 2 * expected["reduce_scatter"]
    assert ring4_hd(collective, "analytical") == expected[collective]


# --- a multi-dimensional all-gather starts on the outermost dimension (Sys::generate_collective) ---------------


def test_all_gather_walks_the_dimensions_outermost_first() -> None:
    # Ring 4 (200 GiB/s, 100 ns) inside a switch of 2 (50 GiB/s, 1000 ns), 1 MiB per NPU: first the switch
    # exchanges the input, floor(2 x 1000 + S/beta_1); then the ring gathers 2 MiB messages in 3 steps.
    study = astra_study([("Ring", 4, 200.0, 100.0), ("Switch", 2, 50.0, 1000.0)], "all_gather", MB, **FREE)
    assert simulated_ns(study) == hop_ns(MB, 50, 1000, hops=2) + 3 * hop_ns(2 * MB, 200, 100) == 51126


# --- double binary tree: the whole chunk over every edge of one tree (DoubleBinaryTreeAllReduce.cc) ------------


@pytest.mark.parametrize(
    ("kind", "n", "hops"),
    [("FullyConnected", 8, [1, 1, 1]), ("FullyConnected", 4, [1, 1]), ("Switch", 8, [2, 2, 2]), ("Ring", 8, [1, 2, 4])],
)
def test_double_binary_tree_sends_the_whole_chunk_up_and_down_one_tree(kind: str, n: int, hops: list[int]) -> None:
    # k = log2 n levels, chunk D = 1 MiB, epsilon = 10 ns, R = 3 floor(D / 1600 GB/s). Up a leaf-to-root path
    # of edges e_i = floor(hops_i L + D/beta) and back down it; 2k arrivals each pay epsilon and the phase one more;
    # every inner node reduces on the way up and again on the way down, the root once: (2k - 1) R.
    # RootMax's tree on a ring of 8: 0 -> 1 -> 3 -> 7, edges 1, 2 and 4 positions long.
    k = len(hops)
    study = astra_study(
        [(kind, n, 50.0, 500.0)],
        "all_reduce",
        MB,
        algorithm="double_binary_tree",
        splits=1,
        active_chunks=1,
        endpoint_delay="10ns",
        local_mem_bw="1600GB/s",
    )
    reduction = 3 * (MB * 10**9 // (1600 * 10**9))
    expected = 2 * sum(hop_ns(MB, 50, 500, h) for h in hops) + (2 * k + 1) * 10 + (2 * k - 1) * reduction
    assert simulated_ns(study) == expected


def test_chunks_take_root_max_and_root_min_in_turn() -> None:
    # In-order numbering: RootMax's root is the last position, RootMin's the first, leaves every other one.
    assert _tree(8, False) == ((1, 3, 1, 7, 5, 3, 5, -1), ((), (0, 2), (), (1, 5), (), (4, 6), (), (3,)))
    assert _tree(8, True) == ((-1, 2, 4, 2, 0, 6, 4, 6), ((4,), (), (1, 3), (), (2, 6), (), (5, 7), ()))
    plan = plan_phase("all_reduce", "double_binary_tree", 0, 8, 8000)
    first, second = astra_compat.adapt(plan, 0), astra_compat.adapt(plan, 1)
    assert [s.offsets for s in first.steps_for(7)] == [(), (-4,)] and len(second.steps_for(7)) == 1
    assert all(step.bytes == 8000 for p in range(8) for step in first.steps_for(p))


def test_double_binary_tree_needs_a_power_of_two_under_astra_compat() -> None:
    with pytest.raises(WorkloadError, match="astra_compat needs a power of two NPUs per line, not 6"):
        astra_compat.adapt(plan_phase("all_reduce", "double_binary_tree", 0, 6, 8000))


# --- chunk order: dimension 0 serves its new chunks before those coming back (Sys::insert_stream) -------------


def test_dimension_0_serves_new_chunks_before_returning_ones() -> None:
    # Enhanced all-reduce (RS dim 0, AR dim 1, AG dim 0) of 3 chunks of D = 1 MiB on a slow switch of 2 (50 GiB/s,
    # 1000 ns) inside a fast one (400 GiB/s, 100 ns). Each dim-0 phase is one exchange of D/2, a = floor(2000 +
    # D/2/beta_0); the dim-1 all-reduce is b = 2 floor(200 + D/4/beta_1) < a. ASTRA-sim queues all three chunks
    # on dim 0 at once and a chunk back from dim 1 waits behind them: RS, RS, RS, AG, AG, AG back to back, 6a.
    # (Letting returning chunks go first would run the last chunk's AR after everything else: 6a + b.)
    a = hop_ns(MB // 2, 50, 1000, hops=2)
    study = astra_study(
        [("Switch", 2, 50.0, 1000.0), ("Switch", 2, 400.0, 100.0)], "all_reduce", 3 * MB, **{**FREE, "splits": 3}
    )
    assert simulated_ns(study) == 6 * a == 70590
