"""``workload.gemm_precision``: FP8 training (Transformer Engine) computes the linear layers' GEMMs in fp8 while
weights, activations, gradients, their memory and communication stay in ``precision``."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from stratasim import cli
from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.devices import datasheet
from stratasim.compute_layer.roofline import level_times
from stratasim.kernel import operators
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.workload_layer.transformer_helpers import GPT, all_graphs

PLAN = {"tp": 2, "dp": 2, "micro_batch": 2, "global_batch": 8}


def _build(**keys: object) -> TransformerWorkload:
    config = {"model": GPT, "parallelism": PLAN, "attention": "fused", **keys}
    return TransformerWorkload(TransformerWorkload.Config.model_validate(config))


def _computes(graphs: list[workload_pb2.ExecutionGraph]) -> list[compute_pb2.OperatorDesc]:
    return [n.op for g in graphs for n in g.nodes if n.type == workload_pb2.COMP_NODE]


def _comms(graphs: list[workload_pb2.ExecutionGraph]) -> list[tuple[str, int, int]]:
    return [(n.name, n.comm_type, n.comm_bytes) for g in graphs for n in g.nodes if n.type != workload_pb2.COMP_NODE]


def test_fp8_gemms_keep_their_bytes_and_everything_else_stays_bf16() -> None:
    bf16, fp8 = all_graphs(_build()), all_graphs(_build(gemm_precision="fp8"))
    for plain, mixed in zip(_computes(bf16), _computes(fp8), strict=True):
        assert (plain.flops, plain.bytes, plain.name) == (mixed.flops, mixed.bytes, mixed.name)
        if plain.HasField("gemm"):
            assert (plain.dtype, mixed.dtype) == (compute_pb2.BF16, compute_pb2.FP8)
        else:  # pointwise operators and the fused attention core
            assert plain.dtype == mixed.dtype == compute_pb2.BF16
    assert any(op.HasField("attention") for op in _computes(fp8))
    assert _comms(bf16) == _comms(fp8)  # TP all-reduces, pipeline hand-overs and DP gradients: bf16 bytes
    assert _build().memory_per_npu_bytes() == _build(gemm_precision="fp8").memory_per_npu_bytes()


def test_the_default_and_gemm_precision_equal_to_precision_change_nothing() -> None:
    default = all_graphs(_build())
    assert [g.SerializeToString() for g in default] == [
        g.SerializeToString() for g in all_graphs(_build(gemm_precision="bf16"))
    ]


def test_a_compute_bound_fp8_gemm_takes_half_the_bf16_time() -> None:
    # The dense FP8 peaks are twice the bf16 ones: B200 4.5 vs 2.25 PFLOPS, H100 1978.9 vs 989.4 TFLOPS (the
    # presets' datasheet figures).
    bf16 = operators.gemm(8192, 8192, 8192, dtype=compute_pb2.BF16)
    fp8 = compute_pb2.OperatorDesc()
    fp8.CopyFrom(bf16)
    fp8.dtype = compute_pb2.FP8
    b200 = datasheet(PRESETS["b200"])
    plain, mixed = level_times(bf16, b200), level_times(fp8, b200)
    assert plain.bound == mixed.bound == compute_pb2.COMPUTE  # still compute-bound at the fp8 peak
    assert plain.compute_ps == 2 * mixed.compute_ps
    assert plain.dram_ps == mixed.dram_ps  # main memory: the operands' bf16 bytes, read once (no SRAM level)
    h100 = datasheet(PRESETS["h100"])
    plain, mixed = level_times(bf16, h100), level_times(fp8, h100)
    assert plain.bound == mixed.bound == compute_pb2.COMPUTE
    peaks = h100.peak_flops
    assert plain.compute_ps / mixed.compute_ps == Fraction(peaks[compute_pb2.FP8]) / Fraction(peaks[compute_pb2.BF16])
    assert abs(plain.compute_ps / mixed.compute_ps - 2) < 1e-3
    # With an SRAM level the tiles' re-reads are counted in fp8 elements (what the tensor cores stream); the
    # operator's own bytes, the floor of its main-memory traffic, stay bf16's.
    assert bf16.bytes <= mixed.traffic[0][1] <= plain.traffic[0][1]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["workload.gemm_precision=fp9"], "workload.gemm_precision: unknown dtype 'fp9'; expected one of"),
        (["workload.gemm_precision=fp8", "compute.device=a100"], "device 'a100' cannot compute in fp8"),
    ],
)
def test_a_gemm_precision_the_study_cannot_use_is_one_error(
    capsys: pytest.CaptureFixture[str], overrides: list[str], message: str
) -> None:
    """An unknown dtype, or one the device has no peak for, ends the run with one message and exit 2."""
    study = Path(__file__).resolve().parents[2] / "examples" / "transformer.yaml"
    argv = ["run", str(study), *(part for key in overrides for part in ("--set", key))]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
