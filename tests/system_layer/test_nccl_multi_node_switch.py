"""``system.nccl.multi_node`` on switches that reduce: NVLS-tree, NVLS + SHARP and CollNet reduce at the node's
NVSwitch and at the switch between nodes (``Step.at_switch`` with the switch's dimension and the members), checked
by hand on 2 nodes x 2 GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from stratasim.system_layer.collectives.groups import phases_of
from stratasim.system_layer.collectives.nccl_multi_node import multi_node_of, plan_multi_node
from tests.cli.test_bad_input import assert_one_clear_message
from tests.helpers import stratasim_process

STUDY = {
    "name": "two_by_two",
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MB"},
    "system": {"algorithm": "nccl", "nccl": {"multi_node": True, "algorithm": "nvls_tree"}},
    "network": {
        "backend": "analytical",
        "topology": [
            {"kind": "switch", "size": 2, "bandwidth": "100GB/s", "latency": "1us", "in_network_reduction": True},
            {"kind": "switch", "size": 2, "bandwidth": "10GB/s", "latency": "2us"},
        ],
    },
}


def _study(tmp_path: Path) -> Path:
    path = tmp_path / "two_by_two.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    return path


def _plan(path: Path, *overrides: str):  # noqa: ANN202
    study = load_study(path, list(overrides))
    grid = study.grid
    multi = multi_node_of("all_reduce", phases_of((0, 1, 2, 3), grid), grid.links, study.system.nccl)
    assert multi is not None
    return plan_multi_node("all_reduce", multi, 10**6, study.system.nccl)


@pytest.mark.parametrize("backend", ["analytical", "congestion_aware"])
def test_nvls_tree_on_two_nodes_of_two_gpus_takes_the_hand_checked_time(tmp_path: Path, backend: str) -> None:
    # 1 MB, one piece; NVLS at 0.85: the piece 1176471 B up, the share 588236 B down (and back the other way).
    # Each wait then takes NCCL's latency spread over the 4 waits less the hops it pays: 13.7 us.
    # Reduce-scatter at the NVSwitch: 1 + 11.76471 (the piece up; the share down overlaps it, cut-through) + 1 us;
    # the tree of the 2 nodes on each half of the 500000 B share: up then down, each 2 x 2 + 250000 B at 10 GB/s;
    # all-gather at the NVSwitch: 1 + 11.76471 (the whole piece down) + 1 us.
    nvls = 2 * 1_000_000 + 11_764_710
    tree = 2 * (2 * 2_000_000 + 25_000_000)
    expected = 2 * nvls + tree + 4 * 13_700_000
    study = load_study(_study(tmp_path), [f"network.backend={backend}"])
    assert run_study(study).total_time_ps == expected


def test_the_node_reductions_name_the_nvswitch_and_the_nodes_gpus(tmp_path: Path) -> None:
    steps = _plan(_study(tmp_path)).steps_for(3)  # node 1, local 1
    contributions = [step for step in steps if step.at_switch]
    assert [(s.switch_dim, s.group, s.need) for s in contributions] == [(0, (1, 2), 0)] * 2
    assert [(s.bytes, s.result_bytes) for s in contributions] == [(1176471, 588236), (588236, 1176471)]


@pytest.mark.parametrize("algorithm", ["nvls", "collnet_direct", "collnet_chain"])
def test_across_nodes_the_switch_between_them_reduces_each_rail(tmp_path: Path, algorithm: str) -> None:
    plan = _plan(_study(tmp_path), "network.topology.1.in_network_reduction=true", f"system.nccl.algorithm={algorithm}")
    assert plan.algorithm.startswith(f"nccl:{algorithm}/") and plan.at_switch
    sharp = {(s.switch_dim, s.group) for p in range(4) for s in plan.steps_for(p) if s.at_switch and s.switch_dim}
    assert sharp == {(1, (2, 2))}  # local g of node 0 with local g of node 1


@pytest.mark.parametrize("algorithm", ["nvls", "collnet_direct", "collnet_chain"])
def test_a_reduction_across_nodes_on_a_switch_that_does_not_reduce_is_one_message(
    tmp_path: Path, algorithm: str
) -> None:
    done = stratasim_process("run", str(_study(tmp_path)), "--set", f"system.nccl.algorithm={algorithm}")
    assert_one_clear_message(done.returncode, done.stderr, "system.nccl.algorithm", "in_network_reduction: true")


@pytest.mark.parametrize("backend", ["analytical", "congestion_aware"])
def test_the_slowest_gpu_of_a_node_delays_its_nodes_share(tmp_path: Path, backend: str) -> None:
    # 10 us of weight-gradient compute, then the all-reduce; GPU 1 computes twice as long. GPU 0's contribution
    # waits at node 0's NVSwitch for GPU 1's, so both finish 10 us later; node 1 does not: its half of the double
    # tree reaches node 0 first, and the half rooted at node 0 goes down to it from node 0's late share as early as
    # ever (node 0 waited for node 1's up message anyway).
    study = {
        **STUDY,
        "workload": {
            "kind": "training_loop",
            "layers": [
                {"name": "l", "weight_grad": "10us", "weight_grad_comm": {"collective": "all_reduce", "size": "1MB"}}
            ],
        },
    }
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(study))
    finish = [
        [npu.finish_ps for npu in run_study(load_study(path, [f"network.backend={backend}", *slow])).per_npu]
        for slow in ([], ["system.slowdown=[{npus: [1], factor: 2}]"])
    ]
    assert finish[0] == [10_000_000 + 140_329_420] * 4  # the hand-checked all-reduce after the compute
    assert [b - a for a, b in zip(*finish)] == [10_000_000, 10_000_000, 0, 0]
