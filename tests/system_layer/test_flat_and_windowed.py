"""The flattened algorithms (``one_ring``, ``one_direct``, ``one_halving_doubling``) and windowed direct
(``direct:N``) against hand-derived schedules, exact to the ps.

Notation as in test_algorithms: S the buffer per NPU, B the bandwidth, alpha the latency of one hop and
ser(x) = ceil(x * 1e12 / B) ps. The analytical network charges a message, in each dimension where its source and
destination differ, hops x alpha + ser(size) (hops: the shorter way round a ring, 1 on a fully connected line).
A flattened algorithm runs once over the group's NPUs in NPU order; with 4 x 2 NPUs, NPU i's ring neighbour is
i + 1, so 3 -> 4 and 7 -> 0 change both coordinates. One chunk and no endpoint delay.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from stratasim.cli import main
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import Grid
from stratasim.system_layer.collectives.algorithms import plan_phase
from stratasim.system_layer.options import SystemOptions
from tests.system_layer.helpers import FC, RING, SWITCH, run_collective, ser, topology

B = 50 * 10**9
ALPHA = 500_000
S = 1 << 20


def time_of(topo: object, collective: str, algorithm: str, size: int = S) -> int:
    return run_collective(topo, collective, size, algorithm={"*": (algorithm,)}).total_time_ps  # type: ignore[arg-type]


RING_4X2 = topology((RING, 4, B, ALPHA), (RING, 2, B, ALPHA))


# --- one_ring -------------------------------------------------------------------------------------------------


def test_one_ring_all_reduce_on_4x2_pays_its_slow_links_where_the_lockstep_path_meets_them() -> None:
    # 2(n-1) = 14 steps of S/8 round the flat ring 0..7. A neighbour message costs c1 = alpha + ser(S/8), the two
    # crossing ones (3->4, 7->0) c2 = 2 c1. Each NPU waits for its predecessor, so the chunk ends after the
    # costliest chain of 14 consecutive edges backwards round the ring: 4 crossings and 10 neighbours, 18 c1.
    c1 = ALPHA + ser(S // 8, B)
    assert time_of(RING_4X2, "all_reduce", "one_ring") == 18 * c1


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_one_ring_on_one_dimension_is_the_ring(collective: str) -> None:
    # One dimension flattened is itself: (n-1)(alpha + ser(S/n)).
    topo = topology((RING, 8, B, ALPHA))
    assert time_of(topo, collective, "one_ring") == time_of(topo, collective, "ring") == 7 * (ALPHA + ser(S // 8, B))


def test_one_ring_runs_one_flat_phase() -> None:
    result = run_collective(RING_4X2, "all_reduce", S, algorithm={"*": ("one_ring",)})
    assert result.collectives[0].phase_dims == (-1,)


# --- one_direct -----------------------------------------------------------------------------------------------


def test_one_direct_all_reduce_waits_for_its_farthest_peer() -> None:
    # Two rounds of S/8 to all 7 peers at once; the farthest peer is 2 hops away in dim 0 and 1 in dim 1:
    # 2 (3 alpha + 2 ser(S/8)).
    assert time_of(RING_4X2, "all_reduce", "one_direct") == 2 * (3 * ALPHA + 2 * ser(S // 8, B))


# --- one_halving_doubling -------------------------------------------------------------------------------------


def test_one_halving_doubling_all_reduce_exchanges_across_the_flat_group() -> None:
    # Partners at position XOR 4 (dim 1, 1 hop), XOR 2 (dim 0, 2 hops), XOR 1 (dim 0, 1 hop), S/2, S/4, S/8,
    # then back: 2 ((alpha + ser(S/2)) + (2 alpha + ser(S/4)) + (alpha + ser(S/8))).
    expected = 2 * (4 * ALPHA + ser(S // 2, B) + ser(S // 4, B) + ser(S // 8, B))
    assert time_of(RING_4X2, "all_reduce", "one_halving_doubling") == expected


def test_one_halving_doubling_needs_a_power_of_two_npus_in_all() -> None:
    with pytest.raises(WorkloadError, match="one_halving_doubling needs a power of two.*flat group has lines of 6"):
        time_of(topology((FC, 3, B, ALPHA), (FC, 2, B, ALPHA)), "all_reduce", "one_halving_doubling")


# --- direct:N -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "h"), [(FC, ALPHA), (SWITCH, 2 * ALPHA)])
@pytest.mark.parametrize(("window", "rounds"), [(1, 7), (2, 4), (3, 3), (6, 2), (7, 1), (8, 1)])
def test_windowed_direct_all_reduce_runs_ceil_of_peers_over_window_rounds(
    kind: int, h: int, window: int, rounds: int
) -> None:
    # Every message costs c = h + ser(S/8). An NPU sends to +1..+N at once; each arrival lets the next send go,
    # and all N of a batch arrive together: ceil(7/N) batches per half, 2 ceil(7/N) c for the all-reduce.
    topo = topology((kind, 8, B, ALPHA))
    assert time_of(topo, "all_reduce", f"direct:{window}") == 2 * rounds * (h + ser(S // 8, B))


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather", "all_to_all"])
def test_windowed_direct_other_collectives_are_one_windowed_round(collective: str) -> None:
    topo = topology((FC, 8, B, ALPHA))
    assert time_of(topo, collective, "direct:3") == 3 * (ALPHA + ser(S // 8, B))


def test_windowed_direct_sends_to_peers_in_order_and_waits_per_arrival() -> None:
    steps = plan_phase("reduce_scatter", "direct:2", 0, 5, 5000).steps_for(3)
    assert [(s.offsets, s.need, s.reduces) for s in steps] == [
        ((1,), 0, False),
        ((2,), 1, True),
        ((3,), 1, True),
        ((4,), 1, True),
        ((), 1, True),
    ]


def test_one_direct_window_on_4x2() -> None:
    # one_direct:7 is one_direct; one_direct:4 sends to +1..+4, then +5..+7 as the first arrivals come in.
    assert time_of(RING_4X2, "all_reduce", "one_direct:7") == time_of(RING_4X2, "all_reduce", "one_direct")
    assert time_of(RING_4X2, "all_reduce", "one_direct:4") > time_of(RING_4X2, "all_reduce", "one_direct")


# --- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["direct:0", "direct:-2", "one_direct:0"])
def test_a_window_below_one_is_refused(name: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=r"window N of (one_)?direct:N must be a whole number ≥ 1"):
        SystemOptions(algorithm=name)


@pytest.mark.parametrize(
    ("algorithm", "said"),
    [
        ("direct:9", "direct:9 for every collective: a window of 9 peers is more than dimension 0 holds (8 NPUs)"),
        (["ring", "direct:3"], "direct:3 for every collective: a window of 3 peers is more than dimension 1 holds"),
        ({"all_to_all": "one_direct:17"}, "one_direct:17 for all_to_all: a window of 17 peers is more than the whole"),
    ],
)
def test_a_window_wider_than_its_dimension_is_a_grid_problem(algorithm: object, said: str) -> None:
    problems = SystemOptions(algorithm=algorithm).grid_problems(Grid((8, 2)))
    assert [key for key, _ in problems] == ["algorithm"]
    assert said in problems[0][1]


def test_a_flattened_algorithm_cannot_be_mixed_with_per_dimension_ones() -> None:
    with pytest.raises(pydantic.ValidationError, match="one_ring runs over all dimensions at once.*give it alone"):
        SystemOptions(algorithm=["ring", "one_ring"])
    with pytest.raises(pydantic.ValidationError, match="all_reduce: one_direct runs over all dimensions at once"):
        SystemOptions(algorithm={"all_reduce": ["one_direct", "one_direct"]})


def test_a_flattened_algorithm_named_for_a_collective_it_cannot_run_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="all_to_all: one_halving_doubling supports all_reduce"):
        SystemOptions(algorithm={"all_to_all": "one_halving_doubling"})


def test_a_window_named_for_a_rooted_collective_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="broadcast: direct:2 supports all_reduce, reduce_scatter"):
        SystemOptions(algorithm={"broadcast": "direct:2"})


def test_a_window_on_an_algorithm_other_than_direct_is_unknown() -> None:
    with pytest.raises(pydantic.ValidationError, match="unknown algorithm 'ring:3'.*direct:N and one_direct:N"):
        SystemOptions(algorithm="ring:3")


STUDY = """name: t
workload: {kind: collective, collective: COLL, size: 1MiB}
system: {algorithm: ALGORITHM}
network:
  topology:
    - {kind: ring, size: 8, bandwidth: 50GB/s, latency: 500ns}
    - {kind: switch, size: 2, bandwidth: 25GB/s, latency: 1us}
"""


@pytest.mark.parametrize(
    ("collective", "algorithm", "said"),
    [
        ("all_reduce", "direct:0", "system.algorithm: direct:0: the window N of direct:N must be a whole number ≥ 1"),
        ("all_reduce", "[ring, direct:4]", "system.algorithm: direct:4 for every collective: a window of 4 peers"),
        ("all_reduce", "[one_ring, ring]", "system.algorithm: one_ring runs over all dimensions at once"),
        (
            "all_to_all",
            "{all_to_all: one_halving_doubling}",
            "system.algorithm: all_to_all: one_halving_doubling supports all_reduce, reduce_scatter, all_gather only",
        ),
    ],
)
def test_bad_algorithms_are_one_clear_error_from_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], collective: str, algorithm: str, said: str
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.replace("COLL", collective).replace("ALGORITHM", algorithm), encoding="utf-8")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert said in err and str(path) in err and "Traceback" not in err


def test_a_flattened_algorithm_for_every_collective_is_refused_at_the_node_it_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Named for every collective, it may serve the all-reduces of a workload: the node it cannot run is refused.
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.replace("COLL", "all_to_all").replace("ALGORITHM", "one_halving_doubling"), encoding="utf-8")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        err == "error: node 0 (all_to_all 0): one_halving_doubling supports all_reduce, reduce_scatter, all_gather "
        "only, not all_to_all\n"
    )
