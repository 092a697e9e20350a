"""SCALE-Sim's user-bandwidth mode in the Timeloop-style model: DRAM ports of bounded bandwidth make memory stall.

Each test states the timeline it checks: ``cycles = fill + compute + stall + tail`` with ``fill`` the first
half-buffers' load, ``compute`` SCALE-Sim's compute cycles, ``stall`` the array's wait for late half-buffers and
``tail`` the ofmap drain after the last output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from stratasim.cli import main
from stratasim.compute_layer.accelerator_section import AcceleratorSection
from stratasim.compute_layer.timeloop import TimeloopCompute, accelerator, systolic
from stratasim.compute_layer.timeloop.accelerator_wire import accelerator_from_message, accelerator_message
from stratasim.compute_layer.timeloop.problem import gemm
from stratasim.compute_layer.timeloop.scalesim_memory import MemoryTimeline, user_bandwidth_cycles
from stratasim.kernel import operators
from stratasim.kernel.errors import BackendError
from stratasim.v1 import compute_pb2

SRAM = (64 * 1024,) * 3  # SCALE-Sim's example: 64 kB ifmap, filter and ofmap SRAMs of 1-byte words


def _cycles(device: str, op: compute_pb2.OperatorDesc) -> compute_pb2.OperatorCost:
    response = TimeloopCompute().estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
    assert not response.HasField("error"), response.error.message
    return response.costs[0]


def test_resident_operands_cost_their_load_and_drain_only() -> None:
    # GEMM 64³ on 32x32 WS at 4 words/cycle: every operand fits the first half (32 kB) of its SRAM.
    # fill = ceil(2 row folds · 32 · 64 ifmap words / 4) = 1024; compute = (2·32 + 32 + 64 - 2) · 4 folds = 632;
    # the ofmap gets 2 row folds · 64 · 64 = 8192 partial sums, all within the first half: drained after, 2048.
    timeline = user_bandwidth_cycles(gemm(64, 64, 64), 32, 32, "ws", SRAM, 4)
    assert timeline == MemoryTimeline(fill=1024, compute=632, stall=0, tail=2048)
    assert timeline.total == 3704  # SCALE-Sim 3.0.0: 3702


def test_a_stream_faster_than_its_port_stalls_the_array() -> None:
    # 32x32 OS, GEMM 128x256x64 with 16 kB SRAMs at 16 words/cycle: the ifmap (4 row folds · 32 · 256 = 32768
    # words) overflows its 8192-word half and is streamed twice (2 column folds): 65536 words. The first half
    # loads before compute (512 cycles); the last half-buffer arrives at 7 · 512 = 3584, when compute
    # (2544 cycles) had reached 2544 · (8192 + 6·8192) / 65536 = 2226: 1358 cycles of stall.
    timeline = user_bandwidth_cycles(gemm(128, 256, 64), 32, 32, "os", (16384,) * 3, 16)
    assert (timeline.fill, timeline.compute, timeline.stall) == (512, 2544, 1358)


def test_outputs_drain_after_a_read_stall_when_no_drain_had_started() -> None:
    # 32x32 WS, GEMM 16x512x128 at 4 words/cycle: the filter (512 · 4 column folds · 32 = 65536 words) loads its
    # first half (8192 cycles) and streams the second, arriving at 8192 where compute (110 · 64 folds = 7040
    # cycles) needs it at 3520: 4672 cycles of stall. The 16 row folds' 16 · 128 partial sums (32768 words) fill
    # no more than half the ofmap SRAM, so no drain starts during compute: all of it drains after, 8192 cycles.
    timeline = user_bandwidth_cycles(gemm(16, 512, 128), 32, 32, "ws", SRAM, 4)
    assert timeline == MemoryTimeline(fill=8192, compute=7040, stall=4672, tail=8192)


def test_a_wide_enough_port_leaves_only_the_fill_and_the_drain() -> None:
    calc = _cycles("systolic-32x32-ws", operators.gemm(128, 256, 64))
    user = _cycles("systolic-32x32-ws-bw100000", operators.gemm(128, 256, 64))
    assert user.duration_ps == calc.duration_ps + 2 * 1000  # one cycle to load, one to drain


def test_less_bandwidth_never_runs_faster() -> None:
    op = operators.gemm(128, 256, 64, dtype=compute_pb2.INT8)
    times = [_cycles(f"systolic-32x32-ws-bw{bw}", op).duration_ps for bw in (64, 16, 4, 1)]
    assert times == sorted(times) and times[-1] > 10 * times[0]
    assert _cycles("systolic-32x32-ws-bw4", op).bound == compute_pb2.MEMORY


def test_a_batched_gemm_runs_its_products_in_turn() -> None:
    one = user_bandwidth_cycles(gemm(64, 64, 64), 32, 32, "is", SRAM, 2)
    three = user_bandwidth_cycles(gemm(64, 64, 64, batch=3), 32, 32, "is", SRAM, 2)
    assert three.total == 3 * one.total


def test_the_bandwidth_is_a_name_suffix_and_a_study_key_and_crosses_the_wire() -> None:
    named = accelerator("systolic-32x32-ws-bw10")
    assert named == systolic(32, 32, "ws", 10) and named.dram_bandwidth == 10
    described = AcceleratorSection.model_validate({"preset": "systolic-32x32-ws", "dram_words_per_cycle": 10})
    assert described.accelerator().dram_bandwidth == 10
    assert accelerator_from_message(accelerator_message(named)) == named
    assert accelerator("systolic-32x32-ws").dram_bandwidth is None


@pytest.mark.parametrize("name", ["systolic-32x32-ws-bw0", "systolic-32x32-ws-bw", "systolic-32x32-ws-bwx"])
def test_a_bad_bandwidth_suffix_is_an_unknown_device(name: str) -> None:
    with pytest.raises(BackendError, match=r"systolic-<R>x<C>-<os\|ws\|is>\[-bw<B>\]"):
        accelerator(name)


def test_the_bandwidth_needs_scalesims_three_srams() -> None:
    with pytest.raises(ValidationError, match="dram_bandwidth models SCALE-Sim's ifmap, filter and ofmap SRAMs"):
        AcceleratorSection.model_validate({"preset": "gemmini", "dram_words_per_cycle": 8})


def _gemm_study(folder: Path) -> Path:
    """One 256x128x256 GEMM on the 32x32 weight-stationary systolic preset, written to ``folder``."""
    study = folder / "base.yaml"
    study.write_text(
        "name: gemm\n"
        "workload: {kind: training_loop, passes: 1, dtype: bf16,"
        " layers: [{name: block, forward: {gemm: [256, 128, 256]}}]}\n"
        "system: {algorithm: ring}\n"
        "network: {backend: analytical, topology: [{kind: ring, size: 2, bandwidth: 50GB/s, latency: 500ns}]}\n"
        "compute: {backend: timeloop, device: systolic-32x32-ws}\n",
        encoding="utf-8",
    )
    return study


@pytest.mark.parametrize(
    ("device", "fragment"),
    [
        ("{preset: systolic-32x32-ws, dram_words_per_cycle: 0}", "compute.device.dram_words_per_cycle: input should"),
        ("{preset: systolic-32x32-ws, dram_words_per_cycle: fast}", "compute.device.dram_words_per_cycle: input"),
        ("{preset: tpu-like, dram_words_per_cycle: 8}", "compute.device: accelerator 'tpu-like': dram_bandwidth"),
    ],
)
def test_bad_bandwidths_are_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], device: str, fragment: str
) -> None:
    study = _gemm_study(tmp_path)
    assert main(["check", str(study), "--set", f"compute.device={device}"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err, err


def test_a_study_runs_with_the_bandwidth_and_takes_longer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = _gemm_study(tmp_path)
    assert main(["run", str(study), "--json"]) == 0
    fast = json.loads(capsys.readouterr().out)["compute_time_ns"]
    device = "compute.device={preset: systolic-32x32-ws, dram_words_per_cycle: 2}"
    assert main(["run", str(study), "--json", "--set", device]) == 0
    slow = json.loads(capsys.readouterr().out)["compute_time_ns"]
    assert slow > fast
