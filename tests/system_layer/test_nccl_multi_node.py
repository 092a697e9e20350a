"""``system.nccl.multi_node``: an all-reduce over two 8 x H100 nodes as ONE NCCL communicator (its tuning model on
16 ranks over 2 nodes, then its rings, tree or NVLS-tree as steps), checked by hand against tuning.cc 2.30.7.

Hand check (us, GB/s; 16 channels of 370.8/16 inside the node, 8 NICs of 50 = 400 between nodes; with 2 nodes the
bandwidth is the node's, tuning.cc 312):
- 8 B: tree/LL latency 6.8 + 2 (7 x 0.6 + 1 x 5.0) = 25.2, bandwidth min(0.92 x 370.8 / 3.8, 39.0) x 0.5 = 19.5;
  ring/LL 6.6 + 28 x 1.0 + 2 x 2.7 = 40.0: tree wins;
- 1 GiB without NVLS: ring/Simple latency (8.4 + 28 x 3.4 + 2 x 14) x 1.4 (the plateau) = 184.24, bandwidth
  370.8 x 16/30 = 197.76; tree/Simple 8.4 + 2 (7 x 4.0 + 14) = 92.4, bandwidth 0.92 x 370.8 x 0.5: ring wins;
- 1 GiB with NVLS (the NVSwitch reduces): NVLS-tree latency 25 + 2 x 20.9 = 66.8, bandwidth min(46.35 x 0.85 x 7/8
  x 2, 2 x 50, 57.7) x 8 x 16/30 = 246.19: it beats the ring's 5613.8 us.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from stratasim.system_layer.collectives.groups import phases_of
from stratasim.system_layer.collectives.nccl_multi_node import (
    MultiNode,
    multi_node_choice,
    multi_node_of,
    plan_multi_node,
)
from stratasim.system_layer.collectives.nccl_tuning import Communicator, choose
from stratasim.system_layer.nccl_options import NcclOptions

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "examples" / "nccl" / "allreduce_2x8xh100.yaml"
TWO_NODES = Communicator(ranks=16, nodes=2, intra_gbps=370.8, inter_gbps=400.0, nvswitch=True)
GiB = 1 << 30


def _multi(**overrides: str) -> MultiNode:
    study = load_study(STUDY, [f"{key}={value}" for key, value in overrides.items()])
    node, network = study.grid.links
    return MultiNode(8, 2, node, network)


def test_a_tiny_all_reduce_runs_tree_ll_at_the_hand_checked_time() -> None:
    choice = choose(TWO_NODES, "all_reduce", 8)
    assert (choice.algorithm, choice.protocol) == ("tree", "ll")
    assert choice.time_us == pytest.approx(6.8 + 2 * (7 * 0.6 + 5.0) + 8 / (1000 * 19.5))


def test_a_large_all_reduce_without_nvls_runs_the_ring_at_the_hand_checked_time() -> None:
    choice = choose(TWO_NODES, "all_reduce", GiB)
    assert (choice.algorithm, choice.protocol) == ("ring", "simple")
    assert choice.time_us == pytest.approx((8.4 + 28 * 3.4 + 2 * 14.0) * 1.4 + GiB / (1000 * 370.8 * 16 / 30))


def test_nvls_tree_is_picked_across_hopper_nodes_whose_nvswitch_reduces() -> None:
    settings = NcclOptions.model_validate({"multi_node": True})
    choice = multi_node_choice("all_reduce", _multi(), GiB, settings)
    assert (choice.algorithm, choice.protocol) == ("nvls_tree", "simple")
    assert choice.time_us == pytest.approx(66.8 + GiB / (1000 * 57.7 * 8 * 16 / 30))
    plain = _multi(**{"network.topology.0.in_network_reduction": "false"})
    assert multi_node_choice("all_reduce", plain, GiB, settings).algorithm == "ring"


def test_every_ring_edge_carries_2_n_minus_1_over_n_of_its_rings_data() -> None:
    settings = NcclOptions.model_validate({"multi_node": True, "algorithm": "ring", "protocol": "simple"})
    size, n, per_node = 16 * 8 * 1024, 16, 8
    plan = plan_multi_node("all_reduce", _multi(), size, settings)
    assert plan.algorithm.startswith("nccl:ring/simple/")  # fewer channels at this size: NCCL cuts them
    ring_data = size // per_node  # one ring per NIC
    for position in range(n):
        sent: Counter[int] = Counter()
        for step in plan.steps_for(position):
            for offset in step.offsets:
                sent[(position + offset) % n] += step.bytes
        node, local = divmod(position, per_node)
        inside = node * per_node + (local + 1) % per_node
        across = ((node + 1) % 2) * per_node + (local + 1) % per_node
        assert sent == {inside: 2 * (n - 1) * ring_data * (per_node - 1) // n, across: 2 * (n - 1) * ring_data // n}


def test_a_large_ring_all_reduce_approaches_the_nic_limited_bus_bandwidth() -> None:
    """Each GPU's NIC carries 2(n-1)/n S / 8: the bus bandwidth's ceiling is 8 x 50 = 400 GB/s (below NVLink's
    370.8 x 8/7); the analytical network also charges a crossing message the NVLink hop it takes to the next rail,
    so the step takes S/128 (1/50 + 1/370.8): 352.5 GB/s, less the latencies."""
    study = load_study(STUDY, ["system.nccl.algorithm=ring", f"workload.size={GiB}B"])
    busbw = GiB / (run_study(study).total_time_ps / 1e12) / 1e9 * 2 * 15 / 16
    ceiling = 8 / (1 / 50 + 1 / 370.8)
    assert 0.97 * ceiling < busbw < ceiling < min(400.0, 370.8 * 8 / 7)


def test_a_tiny_all_reduce_takes_what_nccls_model_estimates() -> None:
    study = load_study(STUDY, ["workload.size=8B"])
    assert run_study(study).total_time_ps == pytest.approx(choose(TWO_NODES, "all_reduce", 8).time_us * 1e6, rel=0.05)


def test_off_the_collective_runs_per_dimension_as_before() -> None:
    off = load_study(STUDY, ["system.nccl.multi_node=false"])
    plain = load_study(STUDY, ["system.nccl={}"])
    assert run_study(off).total_time_ps == run_study(plain).total_time_ps
    assert run_study(off).total_time_ps != run_study(load_study(STUDY)).total_time_ps


def test_only_groups_spanning_the_node_and_the_nodes_are_one_communicator() -> None:
    study = load_study(STUDY)
    grid, settings = study.grid, study.system.nccl
    whole = multi_node_of("all_reduce", phases_of(tuple(range(16)), grid), grid.links, settings)
    assert whole is not None and (whole.per_node, whole.nodes) == (8, 2)
    assert multi_node_of("all_reduce", phases_of(tuple(range(8)), grid), grid.links, settings) is None  # one node
    assert multi_node_of("all_reduce", phases_of((0, 8), grid), grid.links, settings) is None  # a rail
    assert multi_node_of("broadcast", phases_of(tuple(range(16)), grid), grid.links, settings) is None


def test_a_large_all_reduce_on_reducing_nvswitches_runs_pipelined_nvls_tree_faster_than_the_ring() -> None:
    nvls_tree = run_study(load_study(STUDY, [f"workload.size={GiB}B"])).total_time_ps
    ring = run_study(load_study(STUDY, [f"workload.size={GiB}B", "system.nccl.algorithm=ring"])).total_time_ps
    assert nvls_tree < ring
    # NVLS in the node bounds it: each GPU's link carries S (1 + 1/8) at 0.85 x 370.8 GB/s, less what the
    # analytical network lets two pieces' sends share
    assert GiB / (0.85 * 370.8e9) < nvls_tree / 1e12 < GiB * 1.125 / (0.85 * 370.8e9) * 1.1
