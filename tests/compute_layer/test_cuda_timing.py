"""The CUDA timer's method on a fake GPU: per-call medians of captured graphs, eager timing where capture fails,
attention's backward pass as forward-and-backward minus forward (captured, or eagerly where autograd refuses capture,
which the profile's method then says), the eager launch at the host's pace, and every
operator of the grid built."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from stratasim.compute_layer.measured import gpu_profile
from stratasim.compute_layer.measured.cuda_timing import CudaTimer
from stratasim.compute_layer.measured.gpu_profile import EAGER_BACKWARD, METHOD
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


BACKWARD = Case("attention_causal", {"batch_heads": 8, "seq": 512, "head_dim": 64, "pass_": "backward"})


def test_attention_backward_is_forward_and_backward_minus_forward_both_captured() -> None:
    # A slow host (20 us a kernel) changes nothing: captured kernels replay back to back.
    torch, _ = fake_torch(host_us=20.0, capture_autograd=True)
    timer = CudaTimer(torch)
    assert timer(BACKWARD) == pytest.approx(BACKWARD_US) and not timer.eager_backward


def test_where_autograd_refuses_capture_both_passes_run_eagerly_and_the_timer_says_so() -> None:
    torch, _ = fake_torch()
    timer = CudaTimer(torch)
    assert timer(BACKWARD) == pytest.approx(BACKWARD_US) and timer.eager_backward
    # Eagerly, a host slower than the kernels is what is timed: the reference profiles' short backward rows.
    slow_host, _ = fake_torch(host_us=20.0)
    assert CudaTimer(slow_host)(BACKWARD) == pytest.approx(20.0)


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


@pytest.mark.parametrize("capture_autograd", [True, False])
def test_the_profiles_method_says_when_its_backward_passes_ran_eagerly(
    capture_autograd: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    torch, _ = fake_torch(capture_autograd=capture_autograd)
    torch.__version__, torch.version = "2.11", types.SimpleNamespace(cuda="13.0")
    torch.cuda.get_device_name = lambda index: "NVIDIA H100 80GB HBM3"
    saved: dict[str, object] = {}

    def keep(rows: object, out: Path, name: str, dtype: str, like: object, provenance: dict[str, object]) -> None:
        saved.update(provenance)

    monkeypatch.setattr(gpu_profile, "save_profile", keep)
    gpu_profile.profile_gpu(tmp_path, import_module=lambda name: torch)
    assert saved["method"] == METHOD + ("" if capture_autograd else EAGER_BACKWARD)
