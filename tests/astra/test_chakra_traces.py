"""ASTRA-sim's own Chakra traces, replayed with the ASTRA-sim preset on the imported configs, give the
numbers ASTRA-sim printed (``tests/data/astra-sim-inputs/README.md``): microbenchmarks, and the
end-to-end ResNet-50 and DLRM workloads converted from ASTRA-sim's text format (total, compute, exposed). The
end-to-end and custom-collective figures are those ``stratasim validate`` checks (``stratasim/validate/cases.yaml``,
suite ``astra_sim``): one source for both."""

from __future__ import annotations

from typing import Any

import pytest

from stratasim.config.study_file import parse_study
from stratasim.importers.astra import import_astra
from stratasim.report.report import Report
from stratasim.study.run import run_study
from stratasim.validate.cases import case
from tests.data import ASTRA_INPUTS


def published(name: str) -> tuple[int, ...]:
    """The cycles, compute and exposed communication (ns) ASTRA-sim printed for the trace case ``name``."""
    found = case("astra_sim", f"{name} trace")
    return tuple(int(check.expected) for check in found.checks)


def replay(prefix: str) -> Report:
    network, system = ASTRA_INPUTS / "network/Ring_8npus.yml", ASTRA_INPUTS / "system/Ring_4chunks.json"
    study: dict[str, Any] = import_astra(network, system)
    study["workload"] = {"kind": "chakra", "path": str(ASTRA_INPUTS / "workload" / prefix)}
    return run_study(parse_study(study, "replay"))


@pytest.mark.parametrize(
    ("collective", "cycles"),
    [("all_reduce", 64440), ("all_gather", 151016), ("reduce_scatter", 33080), ("all_to_all", 125480)],
)
def test_microbenchmark_traces(collective: str, cycles: int) -> None:
    report = replay(f"microbenchmarks/{collective}_8npus_1MB/{collective}")
    assert report.total_time_ps == cycles * 1000


@pytest.mark.parametrize(
    ("workload", "total", "compute", "exposed"),
    [(workload, *published(workload)) for workload in ("Resnet50_DataParallel", "DLRM_HybridParallel")],
)
def test_end_to_end_traces(workload: str, total: int, compute: int, exposed: int) -> None:
    report = replay(f"e2e_text_converted/{workload}_8npus/{workload}")
    assert report.total_time_ps == total * 1000
    assert (report.compute_time_ns, report.exposed_comm_ns) == (compute, exposed)


def test_a_custom_collective_of_sends_and_receives() -> None:
    # ASTRA-sim ran these send/receive traces as its all-reduce (custom_collective.json) and printed 90174
    # cycles with its congestion-aware backend; neighbour-only ring traffic meets no contention, so the
    # congestion-unaware model must agree. ASTRA-sim charges no endpoint delay to plain sends.
    report = replay("custom_collective_ring_allreduce_8npus_1MB/custom_allreduce")
    (cycles,) = published("custom ring all_reduce of sends and receives")
    assert report.total_time_ps == cycles * 1000
