"""The ``astra_compat`` preset reproduces what ASTRA-sim 2.x printed for its own inputs, to the nanosecond.

The expected figures are the ones recorded in ``tests/data/astra-sim-inputs/README.md`` (congestion-
unaware analytical backend, microbenchmark traces of one collective of ``comm_size`` bytes). Each study
here is what the ASTRA-sim importer writes for the named network and system files.
"""

from __future__ import annotations

from typing import Any

import pytest

from stratasim.config.study_file import parse_study
from stratasim.study.run import run_study

KINDS = {"Ring": "ring", "Switch": "switch", "FullyConnected": "fully_connected"}
RING_4CHUNKS = dict(splits=4, active_chunks=1, endpoint_delay="10ns", local_mem_bw="1600GB/s")


def astra_study(
    dims: list[tuple[str, int, float, float]], collective: str, size: int, algorithm: Any = "ring", **system: Any
) -> dict[str, Any]:
    """A study with ASTRA-sim's semantics: dims as (topology, npus_count, bandwidth GB/s, latency ns)."""
    return {
        "name": "astra",
        "workload": {"kind": "collective", "collective": collective, "size": f"{size}B"},
        "system": {
            "preset": "astra_compat",
            "collective_optimization": "local_bw_aware",
            "scheduling": "lifo",
            "algorithm": algorithm,
            **system,
        },
        "network": {
            "topology": [
                {"kind": KINDS[kind], "size": n, "bandwidth": f"{bw}GiB/s", "latency": f"{lat}ns"}
                for kind, n, bw, lat in dims
            ]
        },
    }


def simulated_ns(study: dict[str, Any]) -> int:
    report = run_study(parse_study(study, "<astra>"))
    assert report.total_time_ps % 1000 == 0, "ASTRA-sim semantics keep whole nanoseconds"
    return report.total_time_ps // 1000


MB = 1 << 20


@pytest.mark.parametrize(
    ("npus", "collective", "cycles"),
    [
        (8, "all_reduce", 64440),
        (8, "all_gather", 151016),
        (8, "reduce_scatter", 33080),
        (8, "all_to_all", 125480),
        (4, "all_reduce", 43000),
        (4, "all_gather", 64744),
        (4, "reduce_scatter", 22240),
        (4, "all_to_all", 41560),
        (16, "all_reduce", 99640),
        (16, "all_gather", 323560),
        (16, "reduce_scatter", 50740),
        (16, "all_to_all", 391240),
    ],
)
def test_microbenchmarks_on_rings(npus: int, collective: str, cycles: int) -> None:
    study = astra_study([("Ring", npus, 50.0, 500.0)], collective, MB, **RING_4CHUNKS)
    assert simulated_ns(study) == cycles


def test_the_worked_example_with_expensive_reductions() -> None:
    # regression_rt_template: as Ring_4chunks but local-mem-bw 50 GB/s.
    study = astra_study([("Ring", 8, 50.0, 500.0)], "all_reduce", MB, **{**RING_4CHUNKS, "local_mem_bw": "50GB/s"})
    assert simulated_ns(study) == 117780


def test_ring_on_a_switch() -> None:
    assert simulated_ns(astra_study([("Switch", 8, 50.0, 500.0)], "all_reduce", MB, **RING_4CHUNKS)) == 92440


@pytest.mark.parametrize(
    ("dims", "cycles"),
    [
        ([("Ring", 4, 50.0, 500.0), ("Ring", 4, 50.0, 500.0)], 43040),
        ([("Ring", 8, 200.0, 100.0), ("Switch", 4, 50.0, 1000.0)], 56216),
    ],
)
def test_multi_dimensional_all_reduce_in_the_local_bandwidth_aware_order(
    dims: list[tuple[str, int, float, float]], cycles: int
) -> None:
    assert simulated_ns(astra_study(dims, "all_reduce", MB, **RING_4CHUNKS)) == cycles


@pytest.mark.parametrize(("size", "cycles"), [(MB, 104596), (64 * MB, 5434390)])
def test_tpu_v3_2d_torus(size: int, cycles: int) -> None:
    study = astra_study(
        [("Ring", 4, 80.0, 1000.0), ("Ring", 8, 80.0, 1000.0)],
        "all_reduce",
        size,
        splits=1,
        active_chunks=1,
        endpoint_delay="1ns",
        local_mem_bw="50GB/s",
    )
    assert simulated_ns(study) == cycles


@pytest.mark.parametrize(("size", "cycles"), [(MB, 54954), (64 * MB, 239734)])
def test_hgx_h100_32_gpus(size: int, cycles: int) -> None:
    study = astra_study(
        [("Switch", 8, 400.0, 936.25), ("Ring", 4, 50.0, 1000.0)],
        "all_reduce",
        size,
        splits=4,
        active_chunks=2,
        endpoint_delay="1ns",
        local_mem_bw="3350GB/s",
    )
    assert simulated_ns(study) == cycles


@pytest.mark.parametrize(
    ("dims", "system", "cycles"),
    [
        # The reference README's congestion-aware runs: a ring through a switch pays both links in full
        # (store-and-forward), and two active chunks of the HGX-H100 study contend for the same links.
        ([("Switch", 8, 50.0, 500.0)], RING_4CHUNKS, 126600),
        (
            [("Switch", 8, 400.0, 936.25)],
            dict(splits=4, active_chunks=2, endpoint_delay="10ns", local_mem_bw="3350GB/s"),
            57426,
        ),
        ([("Ring", 8, 50.0, 500.0)], RING_4CHUNKS, 64440),
    ],
)
def test_congestion_aware_backend(dims: list[tuple[str, int, float, float]], system: dict, cycles: int) -> None:
    study = astra_study(dims, "all_reduce", MB, **system)
    study["network"]["backend"] = "congestion_aware"
    assert simulated_ns(study) == cycles
