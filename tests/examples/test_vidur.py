"""The studies of examples/serving/vidur/ (Vidur's configurations, docs/validation/vidur.md) run and give their
figures, to the picosecond; their bad input ends ``stratasim run`` with one clear message.

Hand checks of the figures stored here:
- llama3_8b_a100_sarathi (Vidur's README configuration): 512 requests over ~79 s at 6.45/s; a decode step with ~60
  sequences reads 16 GB of weights at the fitted A100's 0.834 x 2.04 TB/s, ~9.4 ms, and most iterations carry a
  512-token prompt chunk, 2 x 8e9 x 512 = 8.2e12 FLOP at ~183 TFLOP/s, ~45 ms: p50 TPOT 52 ms. Vidur's README
  plots (read by eye) give p50 TPOT ~46.5 ms, p50 TTFT ~0.78 s (here 1.17 s), peak batch ~90 (here 90).
- llama2_7b_a100_{vllm,sarathi,orca}: the same 256 Arxiv-Summarization requests at 2/s; a lone 2,730-token prompt
  (the median) is 2 x 6.7e9 x 2730 = 3.7e13 FLOP, ~0.2 s: p50 TTFT 0.29 s on vLLM (whole prompts first, counted padded), longer
  on Sarathi (0.50 s: 512-token chunks beside the decodes) and Orca (0.34 s, and a p90 of 1.8 s: at most 29
  requests run, the rest queue); Sarathi's p50 TPOT (36 ms) is the lowest (no whole prompt stalls a decode).
- llama2_70b_{a100,h100}_tp4_sarathi: a decode step reads the 34.4 GB of weights a GPU holds (TP 4) at 1.70 TB/s
  (A100), ~20 ms, or 2.97 TB/s (H100), ~11.6 ms, plus 160 all-reduces; a 512-token chunk is 2 x 69e9 x 512 / 4 =
  1.8e13 FLOP a GPU, ~97 ms on the A100 (0.586 x 312 TFLOP/s) against ~35 ms on the H100 (0.508 x 989): p50 TPOT
  46 ms against 16 ms, most iterations carrying a chunk on the A100, fewer on the faster H100.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratasim import cli
from stratasim.config.study_file import load_study
from stratasim.study.run import run_study

VIDUR = Path(__file__).resolve().parents[2] / "examples" / "serving" / "vidur"

FIGURES: dict[str, dict[str, float]] = {
    "llama3_8b_a100_sarathi.yaml": {
        "total_time_ps": 85_020_939_522_737,
        "ttft_p50_ns": 1_174_843_728.752,
        "ttft_p90_ns": 2_366_298_871.2123003,
        "tpot_p50_ns": 52_187_276.36238093,
        "e2e_p50_ns": 8_218_118_048.699,
        "e2e_p99_ns": 31_874_662_296.567764,
        "batch_size_peak": 90,
    },
    # Prompts counted padded (prompt_padding), as Vidur's vllm: summed, 158,661,173,873,350 ps and p50 TTFT 292.10 ms.
    "llama2_7b_a100_vllm.yaml": {
        "total_time_ps": 158_662_217_150_258,
        "ttft_p50_ns": 290_771_825.28,
        "tpot_p50_ns": 43_988_683.47213893,
        "e2e_p50_ns": 8_362_224_704.0755,
    },
    "llama2_7b_a100_sarathi.yaml": {
        "total_time_ps": 156_766_705_374_688,
        "ttft_p50_ns": 498_914_165.9155,
        "tpot_p50_ns": 36_404_140.931178726,
        "e2e_p50_ns": 7_528_119_193.2905,
    },
    "llama2_7b_a100_orca.yaml": {
        "total_time_ps": 158_404_842_339_477,
        "ttft_p50_ns": 344_179_894.81,
        "ttft_p90_ns": 1_844_094_572.6055,
        "tpot_p50_ns": 42_853_275.47458456,
        "batch_size_peak": 29,
        "preemptions": 0,
    },
    "llama2_70b_a100_tp4_sarathi.yaml": {
        "total_time_ps": 71_163_393_883_929,
        "ttft_p50_ns": 390_077_216.273,
        "tpot_p50_ns": 46_408_867.76757594,
        "e2e_p50_ns": 7_310_292_696.6575,
    },
    "llama2_70b_h100_tp4_sarathi.yaml": {
        "total_time_ps": 65_985_872_207_048,
        "ttft_p50_ns": 113_057_066.695,
        "tpot_p50_ns": 16_052_413.547548737,
        "e2e_p50_ns": 2_536_400_260.564,
    },
}

TRACES = {"conv_16k_6.45qps.csv", "arxiv_4k_2qps.csv", "conv_4k_4qps.csv"}
EXAMPLE_FILES = {VIDUR / name for name in (*FIGURES, *TRACES)}
"""Every file of examples/serving/vidur/ a test runs (the traces through their studies)."""


@pytest.mark.parametrize("example", sorted(FIGURES))
def test_vidur_example_gives_its_figures(example: str) -> None:
    report = run_study(load_study(VIDUR / example, []))
    expected = FIGURES[example]
    figures = {"total_time_ps": report.total_time_ps, **report.to_dict()["serving"]}
    assert figures["total_time_ps"] == expected["total_time_ps"]
    assert {name: figures[name] for name in expected} == pytest.approx(expected, rel=1e-12)


def test_every_vidur_file_is_run() -> None:
    assert {path for path in VIDUR.iterdir() if path.suffix != ".md"} == EXAMPLE_FILES


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("workload.pools.0.router=lor", ("workload.pools[0].router", "'least_outstanding_requests'", "got 'lor'")),
        ("workload.pools.0.scheduler.watermark=1.5", ("workload.pools[0].scheduler.watermark", "less than 1")),
        ("workload.pools.0.scheduler.watermark=lots", ("workload.pools[0].scheduler.watermark", "valid number")),
        ("workload.pools.0.scheduler.chunked_prefill=true", ("prompt_padding applies to whole prompts only",)),
        (
            "workload.pools.0.scheduler.watermark=0.99",
            ("workload.pools.0.scheduler.watermark (0.99) keeps 7349 of 7424 KV blocks free", "largest prompt"),
        ),
    ],
)
def test_bad_vidur_keys_end_the_run_with_one_message(
    capsys: pytest.CaptureFixture[str], override: str, fragments: tuple[str, ...]
) -> None:
    assert cli.main(["run", str(VIDUR / "llama2_7b_a100_vllm.yaml"), "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and err.count("error: ") == 1
    for fragment in fragments:
        assert fragment in err


# Vidur's profiled medians (ms) of a layer's four GEMMs (data/profiling/compute/<device>/<model>/mlp.csv:
# attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj), their TP shard's (K, N), and the band StrataSim's
# backend stays in (docs/validation/vidur.md, "Kernel times beside Vidur's profiles").
LLAMA3_8B_TP1 = ((4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096))
LLAMA2_70B_TP4 = ((8192, 2560), (2048, 8192), (8192, 14336), (7168, 8192))
PROFILES = [
    ("a100", "roofline", LLAMA3_8B_TP1, 1, 0.276, (-0.10, -0.04)),
    ("a100", "roofline", LLAMA3_8B_TP1, 512, 0.994, (0.20, 0.26)),
    ("a100", "roofline", LLAMA2_70B_TP4, 1, 0.284, (-0.14, -0.08)),
    ("a100", "roofline", LLAMA2_70B_TP4, 512, 1.038, (0.13, 0.19)),
    ("h100", "roofline", LLAMA2_70B_TP4, 1, 0.159, (-0.12, -0.06)),
    ("h100", "roofline", LLAMA2_70B_TP4, 512, 0.330, (0.29, 0.35)),
    ("h100", "measured", LLAMA2_70B_TP4, 1, 0.159, (-0.10, 0.0)),
    ("h100", "measured", LLAMA2_70B_TP4, 512, 0.330, (-0.11, 0.0)),
]


@pytest.mark.parametrize(("device", "backend", "shapes", "tokens", "vidur_ms", "band"), PROFILES)
def test_layer_gemms_stay_in_their_band_of_vidurs_profile(
    capsys: pytest.CaptureFixture[str],
    device: str,
    backend: str,
    shapes: tuple[tuple[int, int], ...],
    tokens: int,
    vidur_ms: float,
    band: tuple[float, float],
) -> None:
    total_ns = 0.0
    for k, n in shapes:
        assert (
            cli.main(
                ["cost", "gemm", f"M={tokens}", f"K={k}", f"N={n}", "--device", device, "--backend", backend, "--json"]
            )
            == 0
        )
        total_ns += json.loads(capsys.readouterr().out)["costs"][0]["duration_ns"]
    assert band[0] <= total_ns / 1e6 / vidur_ms - 1 <= band[1]
