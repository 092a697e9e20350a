"""A failed NPU's job takes its messages off the fabric: the other jobs have the links from the failure on.

Two broadcasts of S = 1 MiB on a ring of 4 NPUs (B = 50 GB/s, latency a = 500 ns, cut-through, no endpoint delay):
job a sends 0 -> 2 over links 0->1 and 1->2, job b sends 1 -> 3 over links 1->2 and 2->3, both at time 0. On link 1->2
b is first (it starts there at 0, a's head comes at a), so a waits for it:

- alone, a arrives after 2 a + ser(S);
- with b all along, a starts on 1->2 when b leaves it, at ser(S), and arrives at 2 ser(S) + a;
- b failing at t (a < t < ser(S)) cuts b's crossing at t: a starts on 1->2 at t and arrives at t + ser(S) + a.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from stratasim.config.study_file import load_study
from stratasim.report.report import Report
from stratasim.study.run import run_study
from tests.system_layer.helpers import ser

B, LATENCY, SIZE, AT = 50 * 10**9, 500_000, 1 << 20, 10_000_000
STUDY = {
    "name": "cancel",
    "workload": {
        "kind": "jobs",
        "placement": "explicit",
        "jobs": [
            {
                "name": name,
                "npus": 2,
                "place": place,
                "workload": {"kind": "collective", "collective": "broadcast", "size": "1MiB"},
            }
            for name, place in (("a", [0, 2]), ("b", [1, 3]))
        ],
    },
    "system": {"algorithm": "ring", "splits": 1, "endpoint_delay": "0ns"},
    "network": {
        "backend": "congestion_aware",
        "topology": [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}],
    },
}


def _study_file(tmp_path: Path, b_first: bool = False) -> Path:
    """The study written to a file; with ``b_first`` job b is job 0, so its messages are flow 0."""
    study = copy.deepcopy(STUDY)
    if b_first:
        study["workload"]["jobs"].reverse()
    path = tmp_path / "cancel.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    return path


def _run(tmp_path: Path, failures: str, spawn: bool = False, b_first: bool = False) -> Report:
    """The study run (``b_first``: job b is job 0, its messages flow 0, which networks do not follow)."""
    path = _study_file(tmp_path, b_first)
    return run_study(load_study(path, [f"system.failures={failures}", f"network.spawn={str(spawn).lower()}"]))


def _a_end_ps(report: Report) -> int:
    return max(npu.finish_ps for npu in report.result.per_npu if npu.npu in (0, 2))


@pytest.mark.parametrize(("spawn", "b_first"), [(False, False), (True, False), (False, True)])
def test_the_other_job_has_the_links_from_the_failure_on(tmp_path: Path, spawn: bool, b_first: bool) -> None:
    alone = _run(tmp_path, "[{npus: [3], at: 0ns}]", spawn, b_first)
    along = _run(tmp_path, "[]", spawn, b_first)
    failed = _run(tmp_path, f"[{{npus: [3], at: {AT}ps}}]", spawn, b_first)
    s = ser(SIZE, B)
    assert LATENCY < AT < s
    assert _a_end_ps(alone) == 2 * LATENCY + s
    assert _a_end_ps(along) == 2 * s + LATENCY  # what a failed b gave a before its messages were taken off
    assert _a_end_ps(failed) == AT + s + LATENCY


def test_no_byte_of_the_failed_job_crosses_a_link_after_the_failure(tmp_path: Path) -> None:
    """b's crossings of 1->2 and 2->3 were under way at t: cut there, they count the time b held the links up to t
    and none of b's bytes; 1->2 is then a's from t."""
    failed = _run(tmp_path, f"[{{npus: [3], at: {AT}ps}}]").result
    links = {link.link: link for link in failed.links}
    s = ser(SIZE, B)
    assert all(job == 0 for link in failed.links for job, _ in link.bytes_by_job)
    assert links["dim 0: 1->2"].busy_ps == AT + s and links["dim 0: 1->2"].bytes == SIZE
    assert links["dim 0: 1->2"].queue_ps == AT - LATENCY  # a's head waited from a to t
    cut = links["dim 0: 2->3"]  # b's only crossing there, from a (its head's arrival) to t, carried nothing whole
    assert (cut.busy_ps, cut.bytes, cut.messages, cut.bytes_by_job) == (AT - LATENCY, 0, 0, ())
    along = {link.link: link for link in _run(tmp_path, "[]").result.links}
    assert dict(along["dim 0: 2->3"].bytes_by_job) == {1: SIZE}


def test_on_the_flit_level_network_the_other_job_speeds_up_from_the_failure_too(tmp_path: Path) -> None:
    flit = "network.backend=flit_level"
    ends = {
        name: _a_end_ps(run_study(load_study(_study_file(tmp_path), [f"system.failures={failures}", flit])))
        for name, failures in (
            ("alone", "[{npus: [3], at: 0ns}]"),
            ("along", "[]"),
            ("failed", f"[{{npus: [3], at: {AT}ps}}]"),
        )
    }
    assert ends["alone"] < ends["failed"] < ends["along"]
