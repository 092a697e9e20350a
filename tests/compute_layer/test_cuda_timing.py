"""The CUDA timer's method on a fake GPU: per-call medians of captured graphs, eager timing where capture fails,
attention's backward pass as forward-and-backward minus forward, the eager launch at the host's pace, and every
operator of the grid built."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.measured.cuda_timing import CudaTimer
from stratasim.compute_layer.measured.grid import Case, grid
from stratasim.compute_layer.measured.runner import measure
from tests.compute_layer.fake_torch import BACKWARD_US, KERNEL_US, fake_torch


def test_a_captured_operator_costs_its_kernel_per_call() -> None:
    torch, gpu = fake_torch()
    timer = CudaTimer(torch)
    assert timer(Case("gemm", {"M": 8, "K": 1024, "N": 1024})) == pytest.approx(KERNEL_US)
    # 3 warm-up calls, 1 on the side stream, 12 captured (replays launch nothing new)
    assert gpu.launches == 3 + 1 + 12


def test_silu_mul_is_two_kernels() -> None:
    torch, _ = fake_torch()
    assert CudaTimer(torch)(Case("silu_mul", {"elements": 2**16})) == pytest.approx(2 * KERNEL_US)


def test_attention_backward_is_forward_and_backward_minus_forward() -> None:
    torch, _ = fake_torch()
    case = Case("attention_causal", {"batch_heads": 8, "seq": 512, "head_dim": 64, "pass_": "backward"})
    assert CudaTimer(torch)(case) == pytest.approx(BACKWARD_US)


def test_every_operator_of_the_grid_is_built_and_timed() -> None:
    torch, _ = fake_torch()
    rows = measure(grid(), CudaTimer(torch, "fp16"))
    assert len(rows) == len(grid()) and all(float(row["us"]) > 0 for row in rows)


def test_where_capture_fails_the_calls_are_timed_back_to_back() -> None:
    torch, gpu = fake_torch()

    def refuse(graph: object) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")

    torch.cuda.graph = refuse
    assert CudaTimer(torch)(Case("copy", {"elements": 2**20})) == pytest.approx(KERNEL_US)
    # 3 warm-up calls, 1 on the side stream, then eagerly: 3 more warm-up calls and 5 timings of 12 calls
    assert gpu.launches == 3 + 1 + 3 + 5 * 12


def test_the_eager_launch_is_timed_without_a_graph_at_the_hosts_pace() -> None:
    torch, gpu = fake_torch(host_us=9.0)
    timer = CudaTimer(torch)
    assert timer(Case("tiny_kernel", {})) == pytest.approx(KERNEL_US)  # replayed: the GPU's own time
    launches = gpu.launches
    assert timer(Case("launch_eager", {})) == pytest.approx(9.0)  # the host's issue time, not the kernel's
    assert gpu.launches - launches == 3 + 5 * 200  # warm-up, then 5 timings of 200 calls, none captured
    fast_host, _ = fake_torch(host_us=0.5)
    assert CudaTimer(fast_host)(Case("launch_eager", {})) == pytest.approx(KERNEL_US)
