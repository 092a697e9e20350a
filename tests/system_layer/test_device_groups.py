"""NPU groups on different devices (``compute.groups``): a data-parallel group runs at the pace of its slowest
member, each distinct operator is priced once per device, and the symmetry shortcut stays exact."""

from __future__ import annotations

import copy
from typing import Any

import stratasim
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.config import load_study
from stratasim.config.study_file import parse_study
from stratasim.kernel import operators
from stratasim.study.budget import estimate_study
from stratasim.study.run import prepare_workload
from stratasim.system_layer.operators import OperatorPricer
from stratasim.v1 import compute_pb2
from tests.examples.test_studies import EXAMPLES

GEMM = (8192, 8192, 8192)
SIZE = 256 * 2**20
BANDWIDTH = 100 * 10**9  # bytes/s
LATENCY_PS = 10**6
DP_LOOP: dict[str, Any] = {
    "name": "dp4",
    "workload": {
        "kind": "training_loop",
        "passes": 1,
        "dtype": "bf16",
        "layers": [
            {
                "name": "block",
                "forward": {"gemm": list(GEMM)},
                "weight_grad_comm": {"collective": "all_reduce", "size": "256MiB"},
            }
        ],
    },
    "system": {"algorithm": "ring"},
    "network": {
        "backend": "analytical",
        "topology": [{"kind": "ring", "size": 4, "bandwidth": "100GB/s", "latency": "1us"}],
    },
    "compute": {"backend": "roofline", "device": "h100"},
}
PIPELINE: dict[str, Any] = {
    "name": "pp2",
    "workload": {
        "kind": "transformer",
        "model": {"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 512, "vocab": 32000},
        "parallelism": {"tp": 4, "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 4, "schedule": "1f1b"},
    },
    "network": {
        "backend": "analytical",
        "topology": [
            {"kind": "ring", "size": 4, "bandwidth": "100GB/s", "latency": "1us"},
            {"kind": "switch", "size": 2, "bandwidth": "25GB/s", "latency": "2us"},
        ],
    },
    "compute": {"backend": "roofline", "device": "h100"},
}


def _with(study: dict[str, Any], groups: list[dict[str, Any]], **system: object) -> dict[str, Any]:
    data = copy.deepcopy(study)
    data["compute"]["groups"] = groups
    data.setdefault("system", {}).update(system)
    return data


def _gemm_ps(device: str) -> int:
    """The GEMM's time on ``device``, asked of the roofline backend directly."""
    (cost,) = OperatorPricer(RooflineCompute(), device).costs([operators.gemm(*GEMM)])
    return cost.duration_ps


def test_a_data_parallel_group_runs_at_the_pace_of_its_slowest_member() -> None:
    """Three H100s and one A100 compute one GEMM, then all-reduce 256 MiB on a ring of 4: the ring cannot start
    before the A100 joins, so the iteration is the A100's GEMM plus the ring all-reduce, 2(n-1) steps of S/n
    bytes each taking latency + (S/n)/bandwidth."""
    slow, fast = _gemm_ps("a100"), _gemm_ps("h100")
    assert slow > fast
    all_reduce_ps = 2 * (4 - 1) * (LATENCY_PS + SIZE // 4 * 10**12 // BANDWIDTH)
    mixed = stratasim.run(_with(DP_LOOP, [{"npus": "3", "device": "a100"}]))
    assert mixed.total_time_ps == slow + all_reduce_ps
    assert stratasim.run(DP_LOOP).total_time_ps == fast + all_reduce_ps
    assert [npu.compute_ps for npu in mixed.per_npu] == [fast, fast, fast, slow]
    assert mixed.devices == {"h100": 3, "a100": 1}


def test_each_operator_is_priced_once_per_device() -> None:
    """The GEMM appears once per device in the operator table, run by the NPUs of that device."""
    mixed = stratasim.run(_with(DP_LOOP, [{"npus": [0, "2-3"], "device": "a100"}]))
    assert mixed.engine is not None
    rows = {(row.device, row.count, row.duration_ps) for row in mixed.engine.operators}
    assert rows == {("h100", 1, _gemm_ps("h100")), ("a100", 3, _gemm_ps("a100"))}
    assert mixed.per_npu[1].compute_energy_pj != mixed.per_npu[0].compute_energy_pj


def test_the_symmetry_shortcut_stays_exact_per_group() -> None:
    """A pipeline stage per pod keeps its stand-ins (one simulated NPU per stage); groups across the symmetry
    classes switch the shortcut off and say so; either way the time is what simulating every NPU gives."""
    aligned = _with(PIPELINE, [{"npus": "4-7", "device": "a100"}])
    shortcut, every = stratasim.run(aligned), stratasim.run(aligned, system__aggregate=False)
    assert shortcut.simulated_npus == 2 and every.simulated_npus == 8
    assert shortcut.total_time_ps == every.total_time_ps
    assert not any("symmetry" in warning for warning in shortcut.warnings)
    across = _with(PIPELINE, [{"npus": "2-5", "device": "a100"}])
    off, every = stratasim.run(across), stratasim.run(across, system__aggregate=False)
    assert off.simulated_npus == 8 and off.total_time_ps == every.total_time_ps
    assert "symmetry shortcut off: NPU groups run different devices, so every NPU is simulated" in off.warnings


def test_one_device_runs_as_before() -> None:
    """A group naming compute.device changes nothing; the report has no devices mapping without groups."""
    plain = stratasim.run(DP_LOOP)
    same = stratasim.run(_with(DP_LOOP, [{"npus": "0-3", "device": "h100"}]))
    assert plain.result == same.result and plain.devices is None


def test_cost_sums_each_devices_hourly_rate() -> None:
    """cost_usd_per_iteration = iteration time x (4 x the H100's USD per hour + 4 x the A100's) / 3600 s."""
    mixed = stratasim.run(_with(PIPELINE, [{"npus": "4-7", "device": "a100"}]))
    facts = RooflineCompute().describe(compute_pb2.DescribeRequest(devices=["h100", "a100"])).devices
    hourly = 4 * facts[0].usd_per_hour + 4 * facts[1].usd_per_hour
    assert mixed.training is not None and hourly > 0
    expected = mixed.total_time_ps / 1e12 * hourly / 3600
    assert abs(mixed.training["cost_usd_per_iteration"] - expected) <= 1e-12 * expected


def test_memory_is_checked_against_each_npus_own_device() -> None:
    """The second stage's NPUs run a device holding 64 MiB: they, not the H100s, are over capacity."""
    small = {"preset": "a100", "name": "a100-64mib", "memory_capacity": "64MiB"}
    report = stratasim.run(_with(PIPELINE, [{"npus": "4-7", "device": small}], over_capacity="warn"))
    (over,) = [warning for warning in report.warnings if warning.startswith("over capacity")]
    assert over.startswith("over capacity: NPU 4 needs") and "but holds 64 MiB (4 NPUs over capacity)" in over


def test_the_budget_counts_every_npu_when_groups_break_the_symmetry() -> None:
    """The run's estimate simulates what the engine will: all 16 NPUs of the mixed pods, 2 for a stage a pod."""
    mixed = load_study(EXAMPLES / "clusters" / "mixed_h100_a100.yaml")
    same = load_study(EXAMPLES / "clusters" / "mixed_h100_a100.yaml", ["compute.groups=[]"])
    aligned = parse_study(_with(PIPELINE, [{"npus": "4-7", "device": "a100"}]), "pp2.yaml")
    simulated = [estimate_study(study, *prepare_workload(study)).simulated for study in (mixed, same, aligned)]
    assert simulated == [16, 1, 2]
