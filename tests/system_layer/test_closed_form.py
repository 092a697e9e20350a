"""Collective times on the analytical network against their closed forms, exact to the picosecond.

Notation: N NPUs on a line, S the collective's buffer per NPU, m = S/N, alpha the latency of one hop, B the
bandwidth, ser(x) = ceil(x * 1e12 / B) ps. One chunk and no endpoint delay unless stated.
"""

from __future__ import annotations

import pytest

from tests.system_layer.helpers import FC, RING, SWITCH, run_collective, ser, topology

B = 50 * 10**9  # 50 GB/s
ALPHA = 500_000  # 500 ns


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_ring_all_reduce_is_2_n_minus_1_steps(n: int) -> None:
    size = 1 << 20
    result = run_collective(topology((RING, n, B, ALPHA)), "all_reduce", size)
    m = -(-size // n)
    assert result.total_time_ps == 2 * (n - 1) * (ALPHA + ser(m, B))


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_ring_reduce_scatter_and_all_gather_are_n_minus_1_steps(collective: str) -> None:
    n, size = 8, 8 << 20
    result = run_collective(topology((RING, n, B, ALPHA)), collective, size)
    assert result.total_time_ps == (n - 1) * (ALPHA + ser(size // n, B))


def test_ring_all_to_all_relays_shrinking_messages() -> None:
    # Step k (k = 1..N-1) forwards the N-k shares still travelling: sum over k of alpha + ser(k*m).
    n, size = 8, 8 << 20
    m = size // n
    result = run_collective(topology((RING, n, B, ALPHA)), "all_to_all", size)
    assert result.total_time_ps == sum(ALPHA + ser(k * m, B) for k in range(1, n))


@pytest.mark.parametrize(("kind", "hop_latency"), [(FC, ALPHA), (SWITCH, 2 * ALPHA)])
def test_direct_all_reduce_is_two_rounds(kind: int, hop_latency: int) -> None:
    # Reduce-scatter round then all-gather round, each sending m to every peer at once:
    # 2 * (hops * alpha + ser(m)), with 1 hop through a fully connected fabric and 2 through a switch.
    n, size = 8, 1 << 20
    result = run_collective(topology((kind, n, B, ALPHA)), "all_reduce", size, algorithm={"*": ("direct",)})
    assert result.total_time_ps == 2 * (hop_latency + ser(size // n, B))


@pytest.mark.parametrize(("kind", "hop_latency"), [(FC, ALPHA), (SWITCH, 2 * ALPHA)])
def test_direct_all_to_all_is_one_round(kind: int, hop_latency: int) -> None:
    n, size = 16, 1 << 20
    result = run_collective(topology((kind, n, B, ALPHA)), "all_to_all", size, algorithm={"*": ("direct",)})
    assert result.total_time_ps == hop_latency + ser(size // n, B)


def test_ring_on_a_switch_pays_two_latencies_per_step() -> None:
    n, size = 4, 1 << 20
    result = run_collective(topology((SWITCH, n, B, ALPHA)), "all_reduce", size)
    assert result.total_time_ps == 2 * (n - 1) * (2 * ALPHA + ser(size // n, B))


def test_two_dimensional_all_reduce_runs_a_full_all_reduce_per_dimension() -> None:
    # Baseline order: AR(dim 0) of S then AR(dim 1) of S; phase d costs 2(n_d - 1)(alpha_d + ser_d(S/n_d)).
    n0, n1, size = 4, 8, 1 << 20
    b1, a1 = 25 * 10**9, 1_000_000
    result = run_collective(topology((RING, n0, B, ALPHA), (SWITCH, n1, b1, a1)), "all_reduce", size)
    phase0 = 2 * (n0 - 1) * (ALPHA + ser(size // n0, B))
    phase1 = 2 * (n1 - 1) * (2 * a1 + ser(size // n1, b1))
    assert result.total_time_ps == phase0 + phase1
    assert result.collectives[0].network_delay_ps_per_phase == (phase0, phase1)


def test_two_dimensional_reduce_scatter_shrinks_data_per_phase() -> None:
    # RS(dim 0) of S, then RS(dim 1) of S/n0: messages S/n0 then S/(n0*n1).
    n0, n1, size = 4, 4, 1 << 20
    result = run_collective(topology((RING, n0, B, ALPHA), (RING, n1, B, ALPHA)), "reduce_scatter", size)
    expected = (n0 - 1) * (ALPHA + ser(size // n0, B)) + (n1 - 1) * (ALPHA + ser(size // (n0 * n1), B))
    assert result.total_time_ps == expected


def test_two_dimensional_all_gather_grows_data_per_phase() -> None:
    # AG(dim 0) up to S/n1, then AG(dim 1) up to S: messages S/(n0*n1) then S/n1.
    n0, n1, size = 4, 2, 1 << 20
    result = run_collective(topology((RING, n0, B, ALPHA), (FC, n1, B, ALPHA)), "all_gather", size)
    expected = (n0 - 1) * (ALPHA + ser(size // (n0 * n1), B)) + (n1 - 1) * (ALPHA + ser(size // n1, B))
    assert result.total_time_ps == expected


def test_endpoint_delay_is_paid_once_per_received_step() -> None:
    n, size, delay = 8, 1 << 20, 10_000
    result = run_collective(topology((RING, n, B, ALPHA)), "all_reduce", size, endpoint_delay=f"{delay}ps")
    assert result.total_time_ps == 2 * (n - 1) * (ALPHA + ser(size // n, B) + delay)


def test_per_dimension_algorithms() -> None:
    # Ring on dim 0 and direct on dim 1.
    n0, n1, size = 4, 4, 1 << 20
    topo = topology((RING, n0, B, ALPHA), (FC, n1, B, ALPHA))
    result = run_collective(topo, "all_reduce", size, algorithm={"*": ("ring", "direct")})
    assert result.total_time_ps == 2 * (n0 - 1) * (ALPHA + ser(size // n0, B)) + 2 * (ALPHA + ser(size // n1, B))
