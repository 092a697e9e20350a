"""``run_study`` pauses Python's cyclic garbage collector while it builds and simulates (a speed measure, see
``stratasim.study.run._collector_paused``) and leaves it as it found it, whether the run succeeds or fails."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from stratasim.config import parse_study
from stratasim.kernel.errors import WorkloadError
from stratasim.study.run import run_study

STUDY = {
    "name": "pause",
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
    "system": {"algorithm": "ring"},
    "network": {
        "backend": "analytical",
        "topology": [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}],
    },
}


@pytest.fixture
def collector_state() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_it_was(enabled: bool, collector_state: None) -> None:
    gc.enable() if enabled else gc.disable()
    report = run_study(parse_study(STUDY, "<test>"))
    assert report.result.total_time_ps > 0
    assert gc.isenabled() is enabled


def test_the_collector_comes_back_after_a_failed_run(collector_state: None) -> None:
    gc.enable()
    bad = {
        **STUDY,
        "workload": {
            "kind": "transformer",
            "model": {"layers": 2, "hidden": 64, "heads": 8, "seq_len": 16, "vocab": 128},
            "parallelism": {"tp": 8, "global_batch": 8},
        },
    }
    with pytest.raises(WorkloadError, match="NPUs"):
        run_study(parse_study(bad, "<test>"))
    assert gc.isenabled()
