"""Bad input to a study of several jobs ends ``stratasim check`` or ``run`` with one clear message naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import RunCli

ALL_REDUCE = {"kind": "collective", "collective": "all_reduce", "size": "16MiB"}
TRANSFORMER = {
    "kind": "transformer",
    "model": {"layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000},
    "parallelism": {"tp": 2, "dp": 2, "global_batch": 4},
}


def _job(name: str, npus: int, **keys: object) -> dict[str, object]:
    return {"name": name, "npus": npus, "workload": ALL_REDUCE, **keys}


SERVING = {
    "kind": "serving",
    "model": {"layers": 2, "hidden": 256, "heads": 4, "seq_len": 1024, "vocab": 1000},
    "pools": [{"replicas": 2, "parallelism": {"tp": 2}}],
    "requests": {
        "count": 4,
        "arrival": {"process": "fixed", "rate": "10/s"},
        "prompt": {"distribution": "fixed", "value": 64},
        "output": {"distribution": "fixed", "value": 4},
    },
}
COMPUTE = {"backend": "roofline", "device": "h100"}


def _study(tmp_path: Path, jobs: list[dict[str, object]], compute: object = None, **keys: object) -> str:
    data = {
        "workload": {"kind": "jobs", **keys, "jobs": jobs},
        "network": {
            "backend": "congestion_aware",
            "topology": [{"kind": "ring", "size": 16, "bandwidth": "50GB/s", "latency": "500ns"}],
        },
        **({"compute": compute} if compute else {}),
    }
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


CASES = {
    "overlapping places": (
        [_job("a", 4, place="0-3"), _job("b", 4, place=[3, 4, 5, 6])],
        {"placement": "explicit"},
        ("workload.jobs[1].place", "both job 'a' and job 'b' are placed on NPU 3"),
    ),
    "more NPUs than the topology": (
        [_job("a", 12), _job("b", 8)],
        {},
        ("workload.jobs[1].npus", "job 'b' asks for 8 NPUs but 4 of the topology's 16 are free", "20 in all"),
    ),
    "a place of the wrong length": (
        [_job("a", 4, place="0-2")],
        {"placement": "explicit"},
        ("workload.jobs[0]", "place: names 3 NPUs but the job has npus: 4"),
    ),
    "an NPU outside the topology": (
        [_job("a", 2, place=[3, 16])],
        {"placement": "explicit"},
        ("workload.jobs[0].place", "NPU 16 is outside the topology, whose 16 NPUs are 0-15"),
    ),
    "duplicate names": (
        [_job("a", 2), _job("a", 2)],
        {},
        ("workload.jobs[1].name", "job 'a' is also the name of jobs[0]"),
    ),
    "place without explicit placement": (
        [_job("a", 2, place=[0, 1])],
        {"placement": "random"},
        ("workload.jobs[0].place", "placement is 'random': place needs placement: explicit"),
    ),
    "explicit placement without place": (
        [_job("a", 2)],
        {"placement": "explicit"},
        ("workload.jobs[0].place", "required with placement: explicit"),
    ),
    "a plan for other NPUs than the job's": (
        [{"name": "t", "npus": 8, "workload": TRANSFORMER}],
        {},
        ("workload.jobs[0].npus", "job 't' has 8 NPUs but its transformer workload runs on 4", "multiply"),
    ),
    "a negative start": ([_job("a", 2, start="-5ms")], {}, ("workload.jobs[0].start", "cannot be negative")),
    "an empty job list": ([], {}, ("workload.jobs", "expected at least one job")),
    "a nested jobs workload": (
        [{"name": "n", "npus": 2, "workload": {"kind": "jobs"}}],
        {},
        ("workload.jobs[0].workload.kind", "'jobs' workload cannot be a job (jobs do not nest)", "serving"),
    ),
    "a serving job on fewer NPUs than its pools": (
        [_job("a", 2), {"name": "s", "npus": 2, "workload": SERVING}],
        {"compute": COMPUTE},
        (
            "workload.jobs[1].npus",
            "job 's' has 2 NPUs but its serving workload runs on 4 (its pools' replicas x tp x pp, summed over the "
            "pools)",
        ),
    ),
    "a serving job without a compute section": (
        [{"name": "s", "npus": 4, "workload": SERVING}],
        {},
        ("workload.jobs[0].workload: kind serving prices its iterations on a compute device",),
    ),
    "a serving job with compute.groups": (
        [_job("a", 4), {"name": "s", "npus": 4, "workload": SERVING}],
        {"compute": {**COMPUTE, "groups": [{"npus": "0-3", "device": "a100"}]}},
        ("compute.groups: a serving job gives each pool its own device (workload.jobs[1].workload.pools[i].device)",),
    ),
    "shared on a job that does not serve": (
        [_job("a", 2, shared=False)],
        {},
        ("workload.jobs[0]", "shared: applies to a serving job (kind serving), not a collective job"),
    ),
    "an NPU placed twice": (
        [_job("a", 2, place=[5, 5])],
        {"placement": "explicit"},
        ("workload.jobs[0]", "place: names NPU 5 twice"),
    ),
    "a bad range": (
        [_job("a", 2, place="3-1")],
        {"placement": "explicit"},
        ("workload.jobs[0].place", "range '3-1' runs backwards"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["check", "run"])
def test_bad_jobs_input(run_cli: RunCli, tmp_path: Path, command: str, case: str) -> None:
    jobs, keys, fragments = CASES[case]
    code, out, err = run_cli(command, _study(tmp_path, jobs, **keys))
    assert code == 2, out
    assert err.startswith("error: ") and err.count("error: ") == 1 and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_study_with_a_serving_job_refuses_slowdowns(run_cli: RunCli, tmp_path: Path, command: str) -> None:
    """A serving job's loop prices its iterations without the engine, so nothing would apply the factors to it."""
    study = _study(tmp_path, [_job("a", 4), {"name": "s", "npus": 4, "workload": SERVING}], compute=COMPUTE)
    code, _, err = run_cli(command, study, "--set", "system.slowdown=[{npus: [1], factor: 2}]")
    assert code == 2
    assert err.startswith("error: system.slowdown, system.variability and --samples apply to studies the engine runs")


def test_a_serving_job_s_pool_on_an_unknown_device(run_cli: RunCli, tmp_path: Path) -> None:
    """Named by the pool's key under the job when the run opens its device (``check`` does not, as for a serving
    study)."""
    pools = [{"replicas": 2, "parallelism": {"tp": 2}, "device": "h999"}]
    study = _study(tmp_path, [{"name": "s", "npus": 4, "workload": {**SERVING, "pools": pools}}], compute=COMPUTE)
    code, _, err = run_cli("run", study)
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err
    assert "workload.jobs[0].workload.pools[0].device" in err
