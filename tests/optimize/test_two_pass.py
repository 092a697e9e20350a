"""DFModel's two passes chained: kernel-by-kernel execution gives back the inter-chip pass's own estimate, dataflow
execution is never slower than kernel-by-kernel on the same chip, and a tiny design space keeps the paper's
directions."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from stratasim.compute_layer.dataflow_chips import dataflow_chip
from stratasim.kernel import operators
from stratasim.network_layer.design_space import DESIGN_SPACE_TOPOLOGIES, design_space_topology, dimensions
from stratasim.optimize.design_space import Limits, explore, findings
from stratasim.optimize.two_pass import solve_two_pass
from stratasim.v1 import network_pb2
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Tensor
from stratasim.workload_layer.dataflow.schemes import replicated
from tests.optimize.inter_chip_cases import gpt_layer

RING = network_pb2.Dimension.RING
SWITCH = network_pb2.Dimension.SWITCH


@pytest.mark.parametrize(
    ("layout", "micro_batches"),
    [(((RING, 4),), 4), (((SWITCH, 2), (RING, 4)), 8), (((RING, 2), (RING, 2)), 2)],
)
def test_kernel_by_kernel_gives_the_inter_chip_estimate(
    layout: tuple[tuple[int, int], ...], micro_batches: int
) -> None:
    """With DRAM and links so fast that every kernel is compute-bound, the intra-chip pass run kernel by kernel
    prices each kernel exactly as the inter-chip pass did, so the recomposed iteration is the inter-chip one."""
    chip = dataflow_chip("h100", dram_bandwidth=1e30, dram_capacity=2**50)
    topology = dimensions(layout, 1e30, 0)
    result = solve_two_pass(gpt_layer(1024, 8, 512, 4), chip, topology, micro_batches=micro_batches)
    assert result.execution == "kernel_by_kernel" and result.status == "optimal"
    assert result.iteration_s == pytest.approx(result.inter.iteration_ps / 1e12, rel=1e-9)
    parts = result.breakdown
    assert parts.compute_s + parts.memory_s + parts.network_s == pytest.approx(result.iteration_s, rel=1e-9)
    assert 0 < result.utilisation <= 1


def chain(kernels: int) -> DataflowGraph:
    """Element-wise kernels in a chain that can only be replicated, once (not repeated), with their backward pass:
    tensor parallelism cannot help them, so a pipeline cuts the chain's kernels into stages."""
    ops = [Kernel(f"k{i}", operators.elementwise([4096, 4096], name=f"k{i}"), (replicated(1),)) for i in range(kernels)]
    tensors = tuple(Tensor(f"t{i}", f"k{i}", f"k{i + 1}", 2 * 4096 * 4096) for i in range(kernels - 1))
    return DataflowGraph("chain", tuple(ops), tensors, repeat=1, training=True)


def test_kernel_by_kernel_gives_the_inter_chip_estimate_stage_by_stage() -> None:
    """Stages that split a graph's kernels are mapped one by one, and give back the inter-chip estimate too."""
    chip = dataflow_chip("h100", dram_bandwidth=1e30, dram_capacity=2**50)
    result = solve_two_pass(chain(4), chip, dimensions(((RING, 2),), 1e30, 0), micro_batches=3)
    assert result.inter.pp == 2 and len(result.intra) == 2
    assert sorted(len(s.partitions) for s in result.intra) == [4, 4]  # two kernels a stage, forward and backward
    assert result.iteration_s == pytest.approx(result.inter.iteration_ps / 1e12, rel=1e-9)


@pytest.mark.parametrize("chip_name", ["sn30", "h100"])
def test_dataflow_is_never_slower_than_kernel_by_kernel(chip_name: str) -> None:
    """Same chip, same inter-chip mapping: fusing kernels never makes a stage, so an iteration, slower."""
    chip = dataflow_chip(chip_name, memory="ddr4")
    topology = dimensions(((RING, 4), (SWITCH, 2)), 25e9, 1_000_000)
    graph = gpt_layer(2048, 16, 1024, 4)
    fused = solve_two_pass(graph, chip, topology, micro_batches=8, execution="dataflow", intra_time_limit_s=2)
    by_kernel = solve_two_pass(graph, chip, topology, micro_batches=8, execution="kernel_by_kernel")
    assert replace(fused.inter, wall_s=0) == replace(by_kernel.inter, wall_s=0)
    assert fused.iteration_s <= by_kernel.iteration_s * (1 + 1e-12)
    assert all(f.total_s <= k.total_s * (1 + 1e-12) for f, k in zip(fused.intra, by_kernel.intra))


def test_a_tiny_design_space_keeps_the_papers_directions() -> None:
    """Dataflow chips at least as well used as kernel-by-kernel ones; HBM helps the H100 more than the SN30."""
    topologies = {"ring 8": lambda bandwidth: dimensions(((RING, 8),), bandwidth, 1_000_000)}
    points = explore(
        gpt_layer(2048, 16, 1024, 4),
        ("h100", "sn30"),
        ("ddr4", "hbm3"),
        ("nvlink4",),
        topologies,
        micro_batches=8,
        limits=Limits(inter_s=5, intra_s=2, max_partitions=4),
    )
    assert len(points) == 4 and all(p.result is not None for p in points)
    found = findings(points)
    assert found["dataflow_vs_kernel_utilisation"] >= 1
    assert found["kernel_hbm_vs_ddr_utilisation"] > found["dataflow_hbm_vs_ddr_utilisation"]
    assert math.isnan(found["wse2_vs_others_perf_per_dollar"])
    assert all(p.perf_per_dollar > 0 and p.perf_per_watt > 0 for p in points)


def test_the_design_space_topologies_connect_1024_chips() -> None:
    for name in DESIGN_SPACE_TOPOLOGIES:
        topology = design_space_topology(name, 25e9)
        assert math.prod(d.size for d in topology.dimensions) == 1024, name
        assert all(d.bandwidth_bytes_per_s == 25e9 and d.latency_ps == 1_000_000 for d in topology.dimensions)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: design_space_topology("hypercube", 25e9),
            "unknown design-space topology 'hypercube'; known: torus_2d",
        ),
        (lambda: dimensions(((RING, 4),), 0.0, 0), "bandwidth must be a positive number"),
        (lambda: dimensions(((RING, 4),), 1e9, -1), "latency_ps must be at least 0"),
        (lambda: dimensions(((RING, 1),), 1e9, 0), "at least 2 NPUs"),
    ],
)
def test_bad_topologies_are_named(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        call()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "optimize" / "dataflow_vs_kernel" / "run.py"


def test_the_example_runs_on_a_small_grid() -> None:
    """The design-space example on the kernel-by-kernel chips and one topology: a row a point and the findings."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--chips", "h100", "tpuv4", "--topologies", "torus_2d"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| h100 ", "| tpuv4 "))]
    assert len(rows) == 8
    assert "| SN30 / (H100, TPUv4) utilisation | n/a | 1.52x |" in done.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--micro-batches", "0"], "--micro-batches and --max-partitions must be at least 1"),
        (["--intra-limit", "-1"], "the limits positive"),
        (["--topologies", "hypercube"], "invalid choice: 'hypercube'"),
    ],
)
def test_the_example_refuses_bad_options(arguments: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE), *arguments], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
