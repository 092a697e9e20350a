"""The enhanced (local-bandwidth-aware) all-reduce order of the ASTRA-sim paper against the baseline."""

from __future__ import annotations

from tests.system_layer.helpers import RING, run_collective, ser, topology

B, ALPHA = 50 * 10**9, 500_000


def test_enhanced_order_closed_form_on_two_dimensions() -> None:
    # RS(dim 0) of S, AR(dim 1) of S/n0, AG(dim 0) back to S:
    # (n0-1)(a0 + ser(S/n0)) + 2(n1-1)(a1 + ser(S/(n0 n1))) + (n0-1)(a0 + ser(S/n0)).
    n0, n1, size = 4, 8, 1 << 20
    b1, a1 = 10 * 10**9, 2_000_000
    topo = topology((RING, n0, B, ALPHA), (RING, n1, b1, a1))
    result = run_collective(topo, "all_reduce", size, collective_optimization="local_bw_aware")
    rs_or_ag = (n0 - 1) * (ALPHA + ser(size // n0, B))
    expected = 2 * rs_or_ag + 2 * (n1 - 1) * (a1 + ser(size // (n0 * n1), b1))
    assert result.total_time_ps == expected
    stats = result.collectives[0]
    assert stats.phase_dims == (0, 1, 0)
    assert stats.phase_collectives == ("reduce_scatter", "all_reduce", "all_gather")


def test_enhanced_order_cuts_traffic_on_the_outer_dimensions() -> None:
    # 4x4x4, all-reduce of S: the baseline sends 2(n-1)S/n = 1.5 S along every dimension; the enhanced order
    # sends the same along dim 0, but a quarter of it along dim 1 (data already reduced 4x) and 1/16 along dim 2.
    size = 1 << 22
    topo = topology((RING, 4, 8 * B, ALPHA), (RING, 4, B, ALPHA), (RING, 4, B, ALPHA))
    baseline = run_collective(topo, "all_reduce", size)
    enhanced = run_collective(topo, "all_reduce", size, collective_optimization="local_bw_aware")
    per_dim = 3 * size // 2
    assert dict(baseline.per_npu[0].bytes_sent_per_dim) == {0: per_dim, 1: per_dim, 2: per_dim}
    assert dict(enhanced.per_npu[0].bytes_sent_per_dim) == {0: per_dim, 1: per_dim // 4, 2: per_dim // 16}
    assert enhanced.total_time_ps < baseline.total_time_ps
