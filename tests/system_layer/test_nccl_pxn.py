"""``system.nccl.pxn`` and NCCL's multi-node all-to-all, on two nodes of two GPUs: the bytes each NVLink and each
rail carries, counted exactly from the plans and routed as the network routes them (dimension 0 first); PAT (its
steps for any number of nodes) at scale, as NCCL's tuning model picks it (tuning.cc 2.30.7)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from stratasim.system_layer.collectives.nccl import plan_nccl_phase
from stratasim.system_layer.collectives.nccl_multi_node import MultiNode, plan_multi_node
from stratasim.system_layer.collectives.nccl_pat import pat_shares
from stratasim.system_layer.collectives.nccl_tuning import Communicator, choose
from stratasim.system_layer.nccl_options import NcclOptions

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "examples" / "nccl" / "allreduce_2x8xh100.yaml"
TWO_BY_TWO = ["network.topology.0.size=2", "workload.size=4MiB"]
PER_NODE = NODES = 2
S = 4 << 20


def _link_bytes(collective: str, pxn: bool, algorithm: str = "auto") -> Counter[tuple[str, int, int]]:
    """Bytes per directed link, ``("nvlink", src, dst)`` or ``("rail", src node's GPU, dst node's GPU)``, of the
    plan on 2 x 2 GPUs, every message routed NVLink first as the network routes it; a message that needs both is
    counted on both (PXN's own route)."""
    study = load_study(STUDY, TWO_BY_TWO)
    node, network = study.grid.links
    settings = NcclOptions.model_validate({"multi_node": True, "pxn": pxn, "algorithm": algorithm})
    plan = plan_multi_node(collective, MultiNode(PER_NODE, NODES, node, network), S, settings)
    loads: Counter[tuple[str, int, int]] = Counter()
    n = PER_NODE * NODES
    for src in range(n):
        for step in plan.steps_for(src):
            for offset in step.offsets:
                dst = (src + offset) % n
                hop = src // PER_NODE * PER_NODE + dst % PER_NODE  # the GPU of the sender's node on dst's rail
                if hop != src:
                    loads["nvlink", src, hop] += step.bytes
                if hop != dst:
                    loads["rail", hop, dst] += step.bytes
    return loads


@pytest.mark.parametrize("pxn", [True, False])
def test_an_all_to_all_loads_every_nvlink_and_every_rail_with_half_the_buffer(pxn: bool) -> None:
    # each GPU's S/4 for each of 3 others: its node's peer gets its own share and its rail-mate's; each rail carries
    # its node's two shares for the GPU on it
    loads = _link_bytes("all_to_all", pxn)
    nvlinks = {("nvlink", a, b): S // 2 for a, b in ((0, 1), (1, 0), (2, 3), (3, 2))}
    rails = {("rail", a, b): S // 2 for a, b in ((0, 2), (2, 0), (1, 3), (3, 1))}
    assert loads == {**nvlinks, **rails}


def test_with_pxn_the_nvlink_hop_comes_first_without_it_the_rail() -> None:
    study = load_study(STUDY, TWO_BY_TWO)
    multi = MultiNode(PER_NODE, NODES, *study.grid.links)
    for pxn, first in ((True, (1,)), (False, (2,))):  # the node's peer / the rail-mate on the next node
        settings = NcclOptions.model_validate({"multi_node": True, "pxn": pxn})
        steps = plan_multi_node("all_to_all", multi, S, settings).steps_for(0)
        second = (3 - first[0],)  # 4 MiB in two pieces of 2 MiB, each forwarded as it comes in
        assert [step.offsets for step in steps if step.offsets] == [first, second, first, second]
        assert plan_multi_node("all_to_all", multi, S, settings).algorithm == "nccl:direct/simple/16"


def test_without_pxn_a_ring_crosses_on_the_senders_own_rail_and_loads_every_link_alike() -> None:
    with_pxn = _link_bytes("all_reduce", True, "ring")
    without = _link_bytes("all_reduce", False, "ring")
    assert with_pxn == without
    study = load_study(STUDY, TWO_BY_TWO)
    settings = NcclOptions.model_validate({"multi_node": True, "pxn": False, "algorithm": "ring"})
    steps = plan_multi_node("all_reduce", MultiNode(PER_NODE, NODES, *study.grid.links), S, settings).steps_for(0)
    assert {offset for step in steps for offset in step.offsets} == {1, PER_NODE}  # its node's next GPU, its rail


@pytest.mark.parametrize("collective", ["all_to_all", "all_reduce"])
def test_on_a_topology_of_rails_pxn_changes_where_the_nvlink_hop_sits_not_the_time(collective: str) -> None:
    base = [*TWO_BY_TWO, f"workload.collective={collective}", "system.nccl.algorithm=ring"]
    if collective == "all_to_all":
        base = base[:-1]
    times = {
        pxn: run_study(load_study(STUDY, [*base, f"system.nccl.pxn={pxn}"])).total_time_ps for pxn in ("true", "false")
    }
    assert times["true"] == times["false"] == run_study(load_study(STUDY, base)).total_time_ps


def test_an_all_to_all_across_nodes_is_bound_by_the_rails_on_the_congestion_aware_network() -> None:
    """Each rail carries 8 shares of 1 GiB / 16 each way at 50 GB/s: 10.74 ms; the NVLink hop of each 2 MiB piece
    overlaps the rail's previous one (per dimension, without the key: 13.27 ms)."""
    study = load_study(STUDY, ["workload.collective=all_to_all", "network.backend=congestion_aware"])
    rail = 8 * (1 << 30) / 16 / 50e9
    assert rail < run_study(study).total_time_ps / 1e12 < 1.03 * rail


def test_nccl_picks_pat_for_a_small_all_gather_across_16_nodes_of_one_gpu_and_the_ring_when_large() -> None:
    """PAT/Simple: 8.0 + log2(16) x 14/3.5 + 16 x 2.8 = 68.8 us (tuning.cc 428-430); ring/LL 6.6 + 15 x 5.0 = 81.6;
    at 64 MiB the ring's bandwidth (50 GB/s x 16/15) beats PAT's (50 x 0.75)."""
    comm = Communicator(ranks=16, nodes=16, intra_gbps=50.0, inter_gbps=50.0)
    small = choose(comm, "all_gather", 8)
    assert (small.algorithm, small.protocol) == ("pat", "simple")
    assert small.time_us == pytest.approx(68.8 + 8 / (1000 * 37.5))
    assert choose(comm, "all_gather", 64 << 20).algorithm == "ring"
    study = load_study(STUDY, ["network.topology.1.size=16"])
    plan = plan_nccl_phase("all_gather", 1, 16, 8, study.grid.links, study.system.nccl)
    assert plan.algorithm == "nccl:pat/simple/1"  # one rail of 16 nodes, per dimension: halving-doubling's steps


@pytest.mark.parametrize("n", range(2, 34))
def test_pat_reaches_every_rank_once_in_log2_steps_farthest_first(n: int) -> None:
    steps = pat_shares(n)
    assert [d for d, _ in steps] == [1 << k for k in reversed(range((n - 1).bit_length()))]
    assert sum(shares for _, shares in steps) == n - 1
    held = [0]  # offsets of the owners whose share a rank holds: each reached once
    for d, shares in steps:
        reach = [s + d for s in held if s + d < n]
        assert len(reach) == shares
        held += reach
    assert sorted(held) == list(range(n))


def test_a_tiny_all_gather_across_12_nodes_runs_pat_in_4_steps_at_nccls_estimate() -> None:
    study = load_study(
        STUDY,
        [
            "network.topology.0.size=1",
            "network.topology.1.size=12",
            "workload.collective=all_gather",
            "workload.size=8B",
            "system.nccl.multi_node=false",
        ],
    )
    plan = plan_nccl_phase("all_gather", 1, 12, 8, study.grid.links, study.system.nccl)
    assert plan.algorithm == "nccl:pat/simple/1"
    assert [step.offsets for step in plan.steps_for(0)] == [(8,), (4,), (2,), (1,)]
    estimate = choose(Communicator(ranks=12, nodes=12, intra_gbps=50.0, inter_gbps=50.0), "all_gather", 8)
    assert run_study(study).total_time_ps == pytest.approx(estimate.time_us * 1e6, rel=1e-3)
