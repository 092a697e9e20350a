"""The device presets' efficiency models reproduce the published runs they were fitted to
(``tools/fit_efficiency.py``, ``docs/validation/calibration.md``), and a run they were not fitted to, LLaMA-2-70B on 64
H100s, lands in the range published for such runs with the calibration's source in its report."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.study.run import run_study
from stratasim.validate.cases import case
from tools.fit_efficiency import REFERENCES, operator_errors

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CALIBRATION = EXAMPLES / "calibration"
LLAMA = EXAMPLES / "llama2_70b_h100.yaml"

# MosaicML llm-foundry benchmarks, "H100 80GB BF16", sequence 2048: tokens/s over 2048 tokens per sequence, as
# stratasim validate checks them (stratasim/validate/cases.yaml, suite calibration: one source for both).
PUBLISHED_SEQUENCES = {
    size: case("calibration", f"mpt_{size}_h100").check("samples_per_second").expected
    for size in ("7b", "13b", "30b", "70b")
}
FITTED = ("7b", "13b", "30b")
# MaxText's 22B on a v4-128 slice: 156 TFLOP/s per chip under MaxText's count, 35.10 sequences/s.
MAXTEXT_22B = CALIBRATION / "maxtext_22b_tpuv4.yaml"
LLAMA31_8B = CALIBRATION / "llama31_8b_h100.yaml"
# The simulated MPT-70B iteration on 64 GPUs, to the picosecond: 23 % fewer sequences per second than measured.
MPT_70B_PS = case("calibration", "mpt_70b_h100").check("total_time_ps").expected
MAXTEXT_SEQUENCES = case("calibration", "maxtext_22b_tpuv4").check("samples_per_second").expected


@pytest.mark.parametrize("size", FITTED)
def test_the_h100_model_reproduces_the_runs_it_was_fitted_to(size: str) -> None:
    report = run_study(load_study(CALIBRATION / f"mpt_{size}_h100.yaml"))
    assert report.training is not None
    rate = report.training["samples_per_second"]
    assert abs(rate / PUBLISHED_SEQUENCES[size] - 1) < 0.09, f"MPT-{size}: {rate:.2f} sequences/s"
    assert "MosaicML" in report.calibration and not report.warnings


def test_mpt_70b_on_eight_nodes_shows_the_exposed_fsdp_gathers() -> None:
    """Not fitted: across eight nodes each layer's 1.5 GiB parameter all-gather crosses InfiniBand, and the
    simulated ZeRO-3 run leaves much of it exposed where PyTorch's FSDP prefetch hides it, so the simulated run
    is slower than MosaicML measured. The gap is the network schedule's, not the device's."""
    report = run_study(load_study(CALIBRATION / "mpt_70b_h100.yaml"))
    assert report.training is not None
    rate = report.training["samples_per_second"]
    assert 0.7 < rate / PUBLISHED_SEQUENCES["70b"] < 0.85
    assert report.total_time_ps == MPT_70B_PS


def test_llama2_70b_on_64_h100s_is_in_the_published_range() -> None:
    """Published bf16 H100 training of 70B-class models: 36-48 % MFU of 989 TFLOP/s (MosaicML's MPT-70B on 32
    and 64 GPUs, 36.2 % and 42.6 %; Megatron-LM's README, 41 % to 47-48 % for GPTs of 2B to 462B)."""
    report = run_study(load_study(LLAMA))
    assert report.training is not None
    tflops = report.training["tflops_per_npu"]
    assert 0.36 * 989.4 <= tflops <= 0.48 * 989.4, f"{tflops:.1f} TFLOP/s per GPU"
    assert "fitted to MosaicML's MPT-7B, 13B and 30B" in report.calibration
    assert f"calibration      {report.calibration}" in report.to_text()


def test_nvidias_llama_3_1_8b_on_one_h100_node_runs_faster_than_the_h100_model() -> None:
    """Not fitted: NVIDIA's DGX Cloud recipe (NeMo 24.09, bf16, 8 H100s) ran Llama 3.1 8B at 81,222 tokens/s, 59 %
    MFU, well above the MosaicML runs of 2023 the h100 model is fitted to; the preset comes out 8-15 % slower."""
    report = run_study(load_study(LLAMA31_8B))
    assert report.training is not None
    published = case("calibration", "llama31_8b_h100").check("samples_per_second")
    low, high = published.band
    assert low <= report.training["samples_per_second"] / published.expected <= high


def test_the_tpuv4_model_reproduces_maxtext() -> None:
    report = run_study(load_study(MAXTEXT_22B))
    assert report.training is not None
    rate = report.training["samples_per_second"]
    assert abs(rate / MAXTEXT_SEQUENCES - 1) < 0.01, f"{rate:.2f} sequences/s"
    assert "MaxText" in report.calibration and not report.warnings


# MaxText's v5p configurations (December 2023): 32B and 64B on a v5p-128, 128B on a v5p-256, in sequences/s under
# MaxText's FLOP count of the time, as stratasim validate checks them.
MAXTEXT_V5P = ("32b", "64b", "128b")


@pytest.mark.parametrize("size", MAXTEXT_V5P)
def test_the_tpuv5p_model_reproduces_maxtext(size: str) -> None:
    name = f"maxtext_{size}_tpuv5p"
    report = run_study(load_study(CALIBRATION / f"{name}.yaml"))
    assert report.training is not None
    rate, published = report.training["samples_per_second"], case("calibration", name).check("samples_per_second")
    assert abs(rate / published.expected - 1) < published.tolerance, f"MaxText {size}: {rate:.3f} sequences/s"
    assert "MaxText's 32B and 64B" in report.calibration
    assert not [w for w in report.warnings if "uncalibrated" in w]  # the studies keep MaxText's memory over capacity


# NVIDIA's Llama 3 8B on one DGX B200 in FP8 (GEMMs in fp8, the rest in bf16), the same configuration in NeMo 25.02's
# performance summary and Megatron Bridge 25.11's, as stratasim validate checks them.
LLAMA3_8B_B200 = CALIBRATION / "llama3_8b_b200.yaml"
B200_RELEASES = ("nemo 25.02", "megatron bridge 25.11")
NEMOTRON4_15B_B200 = CALIBRATION / "nemotron4_15b_b200.yaml"
H100_FP8 = ("llama3_8b_h100_fp8", "llama2_7b_h100_fp8")
LLAMA3_70B_CP2 = CALIBRATION / "llama3_70b_h100_cp2.yaml"
LLAMA3_8B_CP2 = CALIBRATION / "llama3_8b_h100_cp2.yaml"


def test_the_b200_model_reproduces_nvidias_fp8_runs_it_was_fitted_to() -> None:
    report = run_study(load_study(LLAMA3_8B_B200))
    assert report.training is not None
    rate = report.training["samples_per_second"]
    for release in B200_RELEASES:
        published = case("calibration", f"llama3_8b_b200 {release}").check("samples_per_second")
        assert abs(rate / published.expected - 1) < published.tolerance, f"{release}: {rate:.3f} sequences/s"
    assert "fitted to NVIDIA's Llama 3 8B" in report.calibration and "FP8" in report.calibration
    assert not report.warnings


def test_nemotron4_15b_on_eight_b200_nodes_shows_the_exposed_data_parallel_gathers() -> None:
    """Not fitted: across eight nodes the distributed optimizer's gradient reduce-scatter and parameter all-gather
    (15.6 B parameters in bf16) cross InfiniBand, and the simulated run leaves them exposed where Megatron overlaps
    them with compute, so it is slower than NeMo 25.02 measured."""
    report = run_study(load_study(NEMOTRON4_15B_B200))
    assert report.training is not None
    published = case("calibration", "nemotron4_15b_b200")
    low, high = published.check("samples_per_second").band
    assert low <= report.training["samples_per_second"] / published.check("samples_per_second").expected <= high
    assert report.total_time_ps == published.check("total_time_ps").expected


@pytest.mark.parametrize("name", H100_FP8)
def test_the_bf16_fitted_h100_model_reproduces_fp8_runs_with_the_gemms_at_the_fp8_peak(name: str) -> None:
    """The transfer the b200 model relies on, checked on H100: the efficiency fitted to bf16 runs reproduces NVIDIA's
    FP8 runs within 15 % once the GEMMs are priced at the FP8 peak; priced all in bf16 they come out 35-45 % slow."""
    published = case("calibration", name).check("samples_per_second")
    report = run_study(load_study(CALIBRATION / f"{name}.yaml"))
    assert report.training is not None
    assert abs(report.training["samples_per_second"] / published.expected - 1) < published.tolerance
    as_bf16 = run_study(load_study(CALIBRATION / f"{name}.yaml", ["workload.gemm_precision=bf16"]))
    assert as_bf16.training is not None
    assert as_bf16.training["samples_per_second"] / published.expected < 0.7


# The mi300x and gaudi3 references and the h200 check (docs/validation/calibration.md), as stratasim validate checks them.
MI300X = "llama31_8b_mi300x"
GAUDI3 = ("gemma_2b_gaudi3", "codellama_13b_gaudi3", "gpt2_xl_gaudi3")
H200_FP8 = "llama31_8b_h200_fp8"
GPT_NEOX_20B_GAUDI3 = "gpt_neox_20b_gaudi3"


@pytest.mark.parametrize(("name", "source"), [(MI300X, "SemiAnalysis"), *((name, "optimum-habana") for name in GAUDI3)])
def test_the_mi300x_and_gaudi3_models_reproduce_the_runs_they_were_fitted_to(name: str, source: str) -> None:
    report = run_study(load_study(CALIBRATION / f"{name}.yaml"))
    assert report.training is not None
    published = case("calibration", name).check("samples_per_second")
    assert abs(report.training["samples_per_second"] / published.expected - 1) < published.tolerance
    assert source in report.calibration and not report.warnings


def test_the_h100_model_on_h200_memory_reproduces_semianalysis_h200_fp8_run() -> None:
    """Not fitted: the h200 preset (h100's compute model) with the GEMMs at the FP8 peak, against the H200 run SemiAnalysis
    reported beside its MI300X one (same harness and model)."""
    report = run_study(load_study(CALIBRATION / f"{H200_FP8}.yaml"))
    assert report.training is not None
    published = case("calibration", H200_FP8).check("samples_per_second")
    assert abs(report.training["samples_per_second"] / published.expected - 1) < published.tolerance
    assert "the h100 preset's model" in report.calibration


def test_gpt_neox_20b_on_gaudi3_shows_its_exposed_gradient_all_reduce() -> None:
    """Not fitted: with two sequences a card and DeepSpeed's ZeRO-2 not overlapping its gradient reduction, the
    network changes this run's simulated time by 12 % (the fitted ones' by under 2 %), and it comes out faster than
    optimum-habana's CI measured it."""
    report = run_study(load_study(CALIBRATION / f"{GPT_NEOX_20B_GAUDI3}.yaml"))
    assert report.training is not None
    published = case("calibration", GPT_NEOX_20B_GAUDI3)
    low, high = published.check("samples_per_second").band
    assert low <= report.training["samples_per_second"] / published.check("samples_per_second").expected <= high
    assert report.total_time_ps == published.check("total_time_ps").expected


def test_the_operator_model_leaves_the_mpt_runs_a_fifth_to_two_fifths_fast() -> None:
    """Priced by the `measured` backend (operators fitted to H100 kernel times), with the optimizer step, exposed
    communication, collectives slowing the compute they overlap and FSDP's shard casts named, MPT's runs come out
    15-45 % faster than MosaicML measured them (+30.1, +33.9, +18.2 %; +30.3, +34.6, +18.5 % before the casts,
    +31.2, +37.1, +19.8 % before contention was counted): what no
    overhead the simulator names explains yet (docs/validation/calibration.md, "What the operator model leaves of
    whole runs"). A named overhead that closes part of the gap moves these figures and that section with them."""
    errors = operator_errors(REFERENCES["h100"])
    assert len(errors) == 3 and all(0.15 < error < 0.45 for error in errors), errors


@pytest.mark.slow
def test_llama3_70b_with_context_parallelism_lands_within_15_percent_of_nemo() -> None:
    """Not fitted: NeMo 24.07's LLaMA3-70B on 64 H100s with TP 4, PP 4, CP 2 (ring attention) and VP 5, the GEMMs at
    the FP8 peak of the bf16-fitted h100 model (about two minutes)."""
    report = run_study(load_study(LLAMA3_70B_CP2))
    assert report.training is not None
    published = case("calibration", "llama3_70b_h100_cp2 nemo 24.07")
    check = published.check("samples_per_second")
    assert abs(report.training["samples_per_second"] / check.expected - 1) < (check.tolerance or 0)
    assert report.total_time_ps == published.check("total_time_ps").expected


def test_llama3_8b_with_context_parallelism_runs_faster_than_nemo_measured() -> None:
    """Not fitted: NeMo 24.07's LLaMA3-8B on one DGX H100 with CP 2 comes out 20-30 % faster than measured; ring
    attention's merges (Transformer Engine's output corrections and gradient accumulations) cost the plan 1-3 %
    against the same run without CP, and what else the measured run loses to CP is not priced."""
    report = run_study(load_study(LLAMA3_8B_CP2))
    without = run_study(load_study(LLAMA3_8B_CP2, ["workload.parallelism.cp=1", "workload.parallelism.dp=8"]))
    assert report.training is not None and without.training is not None
    published = case("calibration", "llama3_8b_h100_cp2 nemo 24.07")
    low, high = published.check("samples_per_second").band or (0, 0)
    assert low <= report.training["samples_per_second"] / published.check("samples_per_second").expected <= high
    assert report.total_time_ps == published.check("total_time_ps").expected
    assert 0.97 < report.training["samples_per_second"] / without.training["samples_per_second"] < 0.99
