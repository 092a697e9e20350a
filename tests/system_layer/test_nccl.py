"""``system.algorithm: nccl``: NCCL's own choice by size (its tuning model, hand-checked), and nccl-tests' bus
bandwidth on one 8 x H100 NVSwitch node against NVIDIA's published figures, within 10 %.

Published points (none of them fitted: every constant comes from NCCL's source, see docs/how-to/nccl.md):
- NVLS all-reduce on 8 H100: peak busbw ~480 GB/s, algbw ~275 GB/s (S. Jeaugey, NVIDIA, NVIDIA/nccl-tests#212;
  GTC S62129 quoted in NVIDIA/nccl#1374: 480 GB/s);
- without NVLS (ring): all-reduce busbw 368.76 GB/s at large sizes (NVIDIA/nccl-tests#309), and "~370 GB/s" busbw for
  the non-all-reduce collectives (NVIDIA/nccl-tests#212);
- NCCL's pick on one 8-GPU node: ring / LL from 8 B to 1 MB, NVLS / Simple from 2 MB to 16 GB (NVIDIA/nccl-tests#309).

Hand check of the pick (tuning.cc 2.30.7; us and GB/s; 16 channels of 370.8/16 GB/s): ring/LL latency 6.6 + 14 x 0.6
= 15.0, bandwidth min(141, 0.5 x 370.8) x 8/14 = 80.6; NVLS latency 25, bandwidth (8 channels of 46.35, capped by
bwInter) 370.8 x 8/14 = 211.9. NVLS wins once 25 + S/211,900 < 15 + S/80,600: S > 1.30 MB.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stratasim.bench.nccl_busbw import busbw_rows
from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from stratasim.system_layer.collectives.nccl import nccl_choice
from stratasim.system_layer.collectives.nccl_tuning import Communicator, choose

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "examples" / "nccl" / "allreduce_8xh100.yaml"
H100_NODE = Communicator(ranks=8, nodes=1, intra_gbps=370.8, inter_gbps=370.8, nvls=True)
MiB = 1 << 20


def _within(simulated: float, published: float, tolerance: float = 0.10) -> bool:
    return abs(simulated - published) <= tolerance * published


@pytest.mark.parametrize("size", [8, 1024, 64 * 1024, MiB])
def test_small_all_reduces_run_ring_ll(size: int) -> None:
    choice = choose(H100_NODE, "all_reduce", size)
    assert (choice.algorithm, choice.protocol) == ("ring", "ll")


@pytest.mark.parametrize("size", [2 * MiB, 64 * MiB, 1 << 30, 16 << 30])
def test_large_all_reduces_run_nvls_simple(size: int) -> None:
    choice = choose(H100_NODE, "all_reduce", size)
    assert (choice.algorithm, choice.protocol, choice.channels) == ("nvls", "simple", 16)


def test_the_nvls_crossover_is_where_the_hand_check_puts_it() -> None:
    assert choose(H100_NODE, "all_reduce", 1_290_000).algorithm == "ring"
    assert choose(H100_NODE, "all_reduce", 1_320_000).algorithm == "nvls"


def test_ring_ll_estimate_is_the_hand_checked_one() -> None:
    ll_bandwidth = min(141.0, 0.5 * 370.8) * 8 / 14  # Hopper's one-node LL cap, then bus to algorithm bandwidth
    assert choose(H100_NODE, "all_reduce", 8).time_us == pytest.approx(15.0 + 8 / (1000 * ll_bandwidth))


def test_without_a_reducing_switch_nccl_never_picks_nvls() -> None:
    plain = Communicator(ranks=8, nodes=1, intra_gbps=370.8, inter_gbps=370.8)
    assert {choose(plain, "all_reduce", 8 << k).algorithm for k in range(31)} <= {"ring", "tree"}


def test_all_gather_moves_from_ll_to_ll128_to_simple() -> None:
    picks = [choose(H100_NODE, "all_gather", 8 << k).protocol for k in range(31)]
    assert picks[0] == "ll" and picks[-1] == "simple"
    assert "ll128" in picks
    assert {choose(H100_NODE, "all_gather", 8 << k).algorithm for k in range(31)} == {"ring"}


def test_pat_needs_one_gpu_per_node() -> None:
    across = Communicator(ranks=8, nodes=8, intra_gbps=50, inter_gbps=50)
    assert choose(across, "all_gather", MiB).algorithm == "pat"
    assert choose(H100_NODE, "all_gather", MiB).algorithm != "pat"


def test_nvls_all_reduce_bus_bandwidth_matches_nvidia() -> None:
    (row,) = busbw_rows(STUDY, "all_reduce", [8 << 30])
    assert row.choice == "nvls/simple/16"
    assert _within(row.busbw_gbps, 480.0)
    assert _within(row.algbw_gbps, 275.0)


def _forced(tmp_path: Path, nccl: str) -> Path:
    """The example with ``system.nccl`` set to ``nccl`` (a flow mapping)."""
    study = tmp_path / "forced.yaml"
    text = STUDY.read_text(encoding="utf-8").replace("  algorithm: nccl\n", f"  algorithm: nccl\n  nccl: {nccl}\n")
    study.write_text(text, encoding="utf-8")
    return study


def test_ring_bus_bandwidth_matches_nvidia(tmp_path: Path) -> None:
    (row,) = busbw_rows(_forced(tmp_path, "{algorithm: ring}"), "all_reduce", [8 << 30])
    assert row.choice == "ring/simple/16"
    assert _within(row.busbw_gbps, 368.76)


def test_all_gather_bus_bandwidth_matches_nvidia() -> None:
    (row,) = busbw_rows(STUDY, "all_gather", [8 << 30])
    assert row.choice == "ring/simple/16"
    assert _within(row.busbw_gbps, 370.0)


def test_the_simulated_picks_follow_nccl_across_sizes() -> None:
    rows = busbw_rows(STUDY, "all_reduce", [8, MiB, 2 * MiB, 1 << 30])
    assert [row.choice.split("/")[0] for row in rows] == ["ring", "ring", "nvls", "nvls"]


def test_ll_puts_twice_the_bytes_on_the_wire(tmp_path: Path) -> None:
    def time_with(protocol: str) -> int:
        study = _forced(tmp_path, f"{{algorithm: ring, protocol: {protocol}}}")
        return busbw_rows(study, "all_gather", [8 << 30])[0].time_ps

    # the protocols' latencies (10.8 us for LL, 32.2 us for Simple) are a few parts in ten thousand of 20 ms
    assert time_with("ll") / time_with("simple") == pytest.approx(2.0, rel=5e-3)


def test_a_tiny_collective_takes_what_nccls_model_estimates() -> None:
    (row,) = busbw_rows(STUDY, "all_reduce", [8])
    assert row.time_ps == pytest.approx(choose(H100_NODE, "all_reduce", 8).time_us * 1e6, abs=1000)


def test_the_busbw_script_prints_both_tables() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "nccl" / "busbw.py")], capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    assert sum("all_reduce" in line for line in lines) == 31 and sum("all_gather" in line for line in lines) == 31
    assert "8589934592" in done.stdout and "nvls/simple/16" in done.stdout


def test_sharp_across_nodes_is_forced_per_dimension(tmp_path: Path) -> None:
    """Two 8-GPU nodes on a SHARP switch: NVLS in the node, CollNet across, when forced as a list per dimension."""
    study = tmp_path / "two_nodes.yaml"
    text = STUDY.read_text(encoding="utf-8").replace(
        "in_network_reduction: true}\n",
        "in_network_reduction: true}\n    - {kind: switch, size: 2, bandwidth: 50GB/s, latency: 2us, in_network_reduction: true}\n",
    )
    study.write_text(
        text.replace("  algorithm: nccl\n", "  algorithm: nccl\n  nccl: {algorithm: [nvls, collnet_chain]}\n")
    )
    forced = load_study(study)
    assert run_study(forced).total_time_ps > 0
    choice = nccl_choice("all_reduce", forced.grid.links, 1, 2, 1 << 30, forced.system.nccl)
    assert choice.algorithm == "collnet_chain"
