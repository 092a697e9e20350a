"""Fit a device preset's compute efficiency once to published training throughput, and show the fit.

    python tools/fit_efficiency.py a100

Each reference is a study of a published training run and a throughput its authors measured: model TFLOP/s per
GPU as the study's report counts them (Megatron-LM's formula), or sequences per second. The
study is run on the device's datasheet figures with size-dependent efficiency (tile and wave quantization) on or off,
the memory efficiency and launch overhead given, and one compute efficiency for every reference; the fit is the
compute efficiency that makes the largest over-estimate equal the largest under-estimate (the minimax relative
error: each study's throughput rises with the efficiency, so a bisection finds it). The result goes into the
preset in compute_layer/devices.py by hand, with the references cited; tests/examples/test_calibration.py checks
the preset still reproduces them.

    python tools/fit_efficiency.py h100 --operators

fits nothing: it prices the device's references with the ``measured`` backend (operators fitted to measured kernel
times, with the overheads the simulator names: the optimizer step, exposed communication, collectives slowing the
compute they overlap) and prints what is left.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import stratasim
from stratasim.compute_layer.device_presets import PRESETS

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Reference:
    """A study of a published run and what was measured on it: ``value`` of the report's training figure
    ``metric`` (``tflops_per_npu`` or ``samples_per_second``)."""

    study: Path
    value: float
    metric: str = "tflops_per_npu"


_MEGATRON = ROOT / "examples" / "megatron"
_CALIBRATION = ROOT / "examples" / "calibration"
REFERENCES: dict[str, tuple[Reference, ...]] = {
    # Narayanan et al., SC'21, table 1 (Megatron-LM weak scaling on DGX A100s).
    "a100": tuple(
        Reference(_MEGATRON / f"gpt_{row}.yaml", tflops)
        for row, tflops in (
            ("18b", 135),
            ("39b", 138),
            ("76b", 140),
            ("145b", 148),
            ("310b", 155),
            ("530b", 163),
            ("1t", 163),
        )
    )
    # PALM's table IV, "published seq/s" column, for the same rows (it has no 1T row).
    + tuple(
        Reference(_MEGATRON / f"gpt_{row}.yaml", rate, "samples_per_second")
        for row, rate in (
            ("18b", 116.415),
            ("39b", 111.565),
            ("76b", 115.898),
            ("145b", 95.720),
            ("310b", 58.738),
            ("530b", 47.440),
        )
    ),
    # MosaicML llm-foundry benchmarks, "H100 80GB BF16", sequence 2048: tokens/s of MPT-7B, 13B and 30B on one
    # HGX node, in sequences per second (within a node the network is NVLink's, which the model knows well).
    "h100": tuple(
        Reference(_CALIBRATION / f"mpt_{size}_h100.yaml", tokens / 2048, "samples_per_second")
        for size, tokens in (("7b", 85144), ("13b", 38336), ("30b", 16022))
    ),
    # Llama 3 8B on one DGX B200 in FP8 (GEMMs in fp8, the rest in bf16), the same configuration in NVIDIA's first
    # and latest published releases: NeMo 25.02's performance summary, 26,006 tokens/s per GPU, and Megatron Bridge
    # 25.11's (FP8-CS), 30,624; in sequences of 8192 tokens per second over the 8 GPUs.
    "b200": tuple(
        Reference(_CALIBRATION / "llama3_8b_b200.yaml", tokens * 8 / 8192, "samples_per_second")
        for tokens in (26006, 30624)
    ),
    # MaxText's 22B model on a v4-128 slice: 156 TFLOP/s per chip under MaxText's FLOP count, 35.10 sequences/s
    # (examples/calibration/maxtext_22b_tpuv4.yaml derives it).
    "tpuv4": (Reference(_CALIBRATION / "maxtext_22b_tpuv4.yaml", 35.10, "samples_per_second"),),
    # MaxText's 32B and 64B models on one v5p-128 slice and its 128B on a v5p-256 (MaxText/configs/v5p/README.md of
    # 2023-12-15): 328, 323 and 315 TFLOP/s per chip under MaxText's FLOP count of the time, 51.635, 25.553 and
    # 24.984 sequences/s (the studies derive them).
    "tpuv5p": tuple(
        Reference(_CALIBRATION / f"maxtext_{size}_tpuv5p.yaml", rate, "samples_per_second")
        for size, rate in (("32b", 51.635), ("64b", 25.553), ("128b", 24.984))
    ),
    # Llama 3.1 8B with FSDP on one 8 x MI300X node in bf16 (ROCm/TransformerEngine issue #79): 410.42 TFLOP/s per
    # GPU under the harness's count, 6N + 12 L H d S = 54,624,018,432 FLOPs a token, in sequences of 4096 per second.
    "mi300x": (
        Reference(
            _CALIBRATION / "llama31_8b_mi300x.yaml",
            410.42e12 / (6 * 8_030_261_248 + 12 * 32 * 32 * 128 * 4096) * 8 / 4096,
            "samples_per_second",
        ),
    ),
    # optimum-habana's CI baselines of full bf16 fine-tuning on Gaudi 3 (tests/baselines/fixture/tests/
    # test_examples.json), sequences of 1024 per second: Gemma 2B on one card, CodeLlama 13B and GPT-2 XL with
    # DeepSpeed on one 8-card node (the runs whose simulated time the network changes by under 2 %).
    "gaudi3": tuple(
        Reference(_CALIBRATION / f"{name}_gaudi3.yaml", rate, "samples_per_second")
        for name, rate in (("gemma_2b", 23.781), ("codellama_13b", 29.814), ("gpt2_xl", 147.801))
    ),
}


# Each device's measured memory efficiency (the default of --memory-efficiency).
# TPUs and B200: no published measurement.
MEMORY_EFFICIENCY = {
    "a100": 0.834,
    "h100": 0.887,
    "tpuv4": 1.0,
    "tpuv5p": 1.0,
    "b200": 1.0,
    "mi300x": 0.772,
    "gaudi3": 1.0,
}


def errors(references: Sequence[Reference], efficiency: float, memory: float, launch: str, sized: bool) -> list[float]:
    """Each reference's relative error (simulated / published - 1) at compute ``efficiency``."""
    calibration = {
        "basis": "datasheet",
        "compute_efficiency": efficiency,
        "memory_efficiency": memory,
        "launch_overhead": launch,
        "size_efficiency": sized,
    }
    figures: dict[Path, dict[str, float]] = {}
    for study in dict.fromkeys(reference.study for reference in references):
        report = stratasim.run(study, **{"compute.calibration": calibration})
        assert report.training is not None, f"{study} is not a training study"
        figures[study] = report.training
    return [figures[reference.study][reference.metric] / reference.value - 1 for reference in references]


def fit(
    references: Sequence[Reference],
    memory: float,
    launch: str,
    sized: bool,
    low: float = 0.1,
    high: float = 1.0,
    tolerance: float = 5e-4,
) -> float:
    """The compute efficiency whose largest over- and under-estimates balance, to ``tolerance``."""
    while high - low > tolerance:
        middle = (low + high) / 2
        found = errors(references, middle, memory, launch, sized)
        if max(found) + min(found) > 0:
            high = middle
        else:
            low = middle
    return round((low + high) / 2, 3)


def operator_errors(references: Sequence[Reference]) -> list[float]:
    """Each reference's relative error priced by the ``measured`` backend's operator model, nothing fitted: what
    the operators measured one by one and the overheads the simulator names leave of the published run."""
    figures: dict[Path, dict[str, float]] = {}
    for study in dict.fromkeys(reference.study for reference in references):
        report = stratasim.run(study, **{"compute.backend": "measured"})
        assert report.training is not None, f"{study} is not a training study"
        figures[study] = report.training
    return [figures[reference.study][reference.metric] / reference.value - 1 for reference in references]


def main() -> None:
    """Fit the device named on the command line and print each reference's error at the fit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", choices=sorted(REFERENCES))
    parser.add_argument(
        "--operators",
        action="store_true",
        help="fit nothing: price the references with the measured backend's operator model and print what is left",
    )
    parser.add_argument("--memory-efficiency", type=float, help="default: the device's measured one")
    parser.add_argument("--launch-overhead", default="0ns")
    parser.add_argument(
        "--size-efficiency",
        dest="sized",
        action=argparse.BooleanOptionalAction,
        help="with tile and wave quantization (the default for a device with a tiling) or without",
    )
    args = parser.parse_args()
    if args.operators:
        for reference, error in zip(REFERENCES[args.device], operator_errors(REFERENCES[args.device])):
            print(f"  {reference.study.relative_to(ROOT)}: operator model, {reference.metric} error {error:+.1%}")
        return
    if args.sized is None:  # a device whose tile is not published (b200) has no quantization to apply
        args.sized = PRESETS[args.device].tiling is not None
    args.memory_efficiency = args.memory_efficiency or MEMORY_EFFICIENCY[args.device]
    references = REFERENCES[args.device]
    efficiency = fit(references, args.memory_efficiency, args.launch_overhead, args.sized)
    sized = "size-dependent" if args.sized else "not size-dependent"
    print(f"{args.device}: compute_efficiency {efficiency} (memory {args.memory_efficiency}, {sized})")
    found = errors(references, efficiency, args.memory_efficiency, args.launch_overhead, args.sized)
    for reference, error in zip(references, found):
        print(
            f"  {reference.study.relative_to(ROOT)}: published {reference.metric} {reference.value:.2f}, "
            f"error {error:+.1%}"
        )


if __name__ == "__main__":
    main()
