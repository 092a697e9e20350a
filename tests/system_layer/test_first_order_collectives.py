"""The closed forms of :mod:`stratasim.system_layer.collectives.first_order` against the engine on the analytical
network: one chunk, no endpoint delay unless stated, free reductions; exact to the picosecond."""

from __future__ import annotations

import pytest

from stratasim.system_layer.collectives.first_order import LineSpan, collective_ps, phase_ps, send_ps
from tests.system_layer.helpers import FC, RING, SWITCH, run_collective, topology

B = 50 * 10**9
ALPHA = 500_000
KIND_NAMES = {RING: "ring", SWITCH: "switch", FC: "fully_connected"}

CASES = [
    # (dimensions as (kind, size, bandwidth, latency), collective, bytes, algorithms per dimension)
    ([(RING, 8, B, ALPHA)], "all_reduce", 1 << 20, ["ring"]),
    ([(RING, 5, B, ALPHA)], "all_reduce", 1_000_003, ["ring"]),
    ([(SWITCH, 8, B, ALPHA)], "all_reduce", 1 << 20, ["ring"]),
    ([(SWITCH, 8, B, ALPHA)], "reduce_scatter", 3 << 20, ["direct"]),
    ([(FC, 16, B, ALPHA)], "all_to_all", 1 << 20, ["direct"]),
    ([(RING, 8, B, ALPHA)], "all_to_all", 8 << 20, ["ring"]),
    ([(RING, 8, B, ALPHA)], "all_reduce", 1 << 20, ["direct"]),
    ([(RING, 8, B, ALPHA)], "all_reduce", 1 << 20, ["halving_doubling"]),
    ([(SWITCH, 16, B, ALPHA)], "all_gather", 1 << 20, ["halving_doubling"]),
    ([(RING, 6, B, ALPHA)], "all_gather", 1 << 20, ["ring_bidirectional"]),
    ([(SWITCH, 8, B, ALPHA)], "all_reduce", 1 << 20, ["double_binary_tree"]),
    ([(RING, 4, B, ALPHA), (SWITCH, 8, 25 * 10**9, 2 * ALPHA)], "all_reduce", 1 << 20, ["ring", "ring"]),
    ([(RING, 4, B, ALPHA), (SWITCH, 8, 25 * 10**9, 2 * ALPHA)], "reduce_scatter", 1 << 20, ["ring", "direct"]),
    ([(FC, 4, B, ALPHA), (RING, 4, 10**10, ALPHA)], "all_gather", 5 << 20, ["direct", "ring"]),
    ([(SWITCH, 8, 300 * 10**9, ALPHA), (SWITCH, 4, 25 * 10**9, 4 * ALPHA)], "all_to_all", 1 << 22, ["ring"]),
]


def _spans(dims: list[tuple[int, int, int, int]]) -> list[LineSpan]:
    return [LineSpan(KIND_NAMES[kind], size, bw, lat) for kind, size, bw, lat in dims]  # type: ignore[arg-type]


@pytest.mark.parametrize(("dims", "collective", "size", "algorithms"), CASES)
def test_closed_form_is_the_engine_to_the_picosecond(
    dims: list[tuple[int, int, int, int]], collective: str, size: int, algorithms: list[str]
) -> None:
    engine = run_collective(topology(*dims), collective, size, algorithm={"*": tuple(algorithms)})
    assert collective_ps(collective, size, _spans(dims), algorithms) == engine.total_time_ps  # type: ignore[arg-type]


def test_local_bw_aware_all_reduce_shrinks_the_outer_phase() -> None:
    # Reduce-scatter on dimension 0, all-reduce of S / n0 on dimension 1, all-gather back: exact too.
    dims = [(RING, 4, B, ALPHA), (SWITCH, 8, 10**10, ALPHA)]
    engine = run_collective(
        topology(*dims), "all_reduce", 1 << 20, algorithm={"*": ("ring",)}, collective_optimization="local_bw_aware"
    )
    assert collective_ps("all_reduce", 1 << 20, _spans(dims), ["ring", "ring"], local_bw_aware=True) == (
        engine.total_time_ps
    )


def test_endpoint_delay_is_paid_once_per_step() -> None:
    dims = [(RING, 8, B, ALPHA)]
    engine = run_collective(topology(*dims), "all_reduce", 1 << 20, algorithm={"*": ("ring",)}, endpoint_delay="10ns")
    assert (
        collective_ps("all_reduce", 1 << 20, _spans(dims), ["ring"], endpoint_delay_ps=10_000) == engine.total_time_ps
    )


def test_splits_pipeline_through_the_phases_approximately() -> None:
    # Several chunks: the first chunk's phases plus (c - 1) slowest phases; within 5 % of the engine here.
    dims = [(RING, 4, B, ALPHA), (SWITCH, 8, 10**10, ALPHA)]
    engine = run_collective(topology(*dims), "all_reduce", 8 << 20, algorithm={"*": ("ring",)}, splits=4)
    estimate = collective_ps("all_reduce", 8 << 20, _spans(dims), ["ring", "ring"], splits=4)
    assert abs(estimate - engine.total_time_ps) <= 0.05 * engine.total_time_ps


def test_ring_phase_is_monotonic_in_bandwidth_and_size() -> None:
    slow, fast = LineSpan("switch", 8, 10**10, ALPHA), LineSpan("switch", 8, 10**11, ALPHA)
    assert phase_ps("all_reduce", "ring", fast, 1 << 20) < phase_ps("all_reduce", "ring", slow, 1 << 20)
    assert phase_ps("all_reduce", "ring", slow, 1 << 20) < phase_ps("all_reduce", "ring", slow, 1 << 21)


def test_a_line_of_one_costs_nothing_and_a_send_pays_each_dimension_crossed() -> None:
    one = LineSpan("ring", 1, B, ALPHA)
    assert collective_ps("all_reduce", 1 << 20, [one], ["ring"]) == 0
    inner, outer = LineSpan("switch", 8, B, ALPHA), LineSpan("ring", 8, 10**10, ALPHA)
    assert send_ps(1000, [(inner, 1), (outer, 3)]) == (2 * ALPHA + 20_000) + (3 * ALPHA + 100_000)


@pytest.mark.parametrize(
    ("dims", "collective", "algorithms"),
    [
        ([(RING, 8, B, ALPHA)], "all_reduce", ["ring"]),
        ([(SWITCH, 8, B, ALPHA)], "reduce_scatter", ["direct"]),
        ([(RING, 6, B, ALPHA)], "all_reduce", ["ring_bidirectional"]),
        ([(SWITCH, 8, B, ALPHA)], "all_reduce", ["halving_doubling"]),
        ([(RING, 4, B, ALPHA), (SWITCH, 4, 10**10, ALPHA)], "all_reduce", ["ring", "direct"]),
    ],
)
def test_reductions_from_local_memory_are_exact_too(
    dims: list[tuple[int, int, int, int]], collective: str, algorithms: list[str]
) -> None:
    # Each reducing step also pays ceil(3 r 1e12 / local_mem_bw) for the r bytes it reduces.
    size = 1 << 20
    engine = run_collective(
        topology(*dims), collective, size, algorithm={"*": tuple(algorithms)}, local_mem_bw="100GB/s"
    )
    estimate = collective_ps(collective, size, _spans(dims), algorithms, reduce_bandwidth=100 * 10**9)  # type: ignore[arg-type]
    assert estimate == engine.total_time_ps
