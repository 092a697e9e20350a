"""Every study in ``examples/`` runs and gives its headline figures (simulated time is exact, to the picosecond).

Each figure was checked against a hand estimate before it was stored (ser(x) = x / bandwidth):
- quickstart: the baseline all-reduce runs a full ring all-reduce per dimension and the 4 chunks pipeline, so
  the switch (2 x 3 x (2 us + ser(256 MiB) at 25 GB/s) = 64.4 ms) plus one chunk on the ring of 8 (9.4 ms).
- training_loop: two passes of ~19.5 TFLOP of GEMMs at the fitted H100's 0.508 x 989 TFLOP/s, ~77.6 ms, and the
  exposed tail.
- transformer: Megatron's count 72 B s l h^2 (1 + s/6h + V/16lh) = 5.85e14 FLOP over 32 NPUs at the reported
  233 TFLOP/s is 78.5 ms; the optimizer step adds 1.7 ms (5.1 GB of states at 0.887 x 3.35 TB/s).
- inference: decode reads the 6.74 GB of weights per GPU (TP 2) at the fitted 0.887 x 3.35 TB/s, ~2.3 ms a token
  against a TPOT of 2.72 ms.
- resnet50: 0.79 TFLOP per GPU (3 x 8.2 GFLOP x 32 images), 4.3 ms at the fitted A100's 0.586 x 312 TFLOP/s, but
  most layers are memory-bound: 12.2 GB of operator traffic at 0.834 x 2.04 TB/s is ~7.2 ms; the gradient all-reduces (51 MB, ~1.8 ms
  on the ring) hide under the backward pass.
- torus_allreduce: a ring all-reduce per dimension of 4, 2 x 3 x ser(16 MiB) = 2.01 ms each, 4 chunks
  pipelined: 2.01 ms + 2.01 ms / 4.
- fat_tree_alltoall: each NPU sends 15 x 1 MiB through its own 50 GB/s link: 0.315 ms and the hops.
- palm_congestion: the busiest mesh link carries 7.5 x 4 MiB at 256 GB/s, 122.9 us
  (tests/network_layer/test_palm_congestion.py derives the load).
- gpt3_175b (a short form: 16 micro-batches per pipeline instead of 192, the whole 96-layer model; the full
  iteration, 30.495 s in benchmarks/README.md, takes ~26 s and 1.3 GB to simulate, so the full file is only
  validated, by ``stratasim check``): 1/12 of the full iteration's FLOPs, 3.7e14 per GPU, ~2.5 s at
  ~150 TFLOP/s, stretched by the 1F1B bubble of (p - 1) / m = 15/16 to ~4.7 s.
- serving/llama3_70b_h100_tp8 (a short form: 400 requests of the 2,000): 400 arrivals at 40/s take ~10 s, and
  the longest outputs (up to 2,048 tokens at ~10 ms a step, ~20 s) finish after them: 29.9 s in all. A
  6,144-token prompt (the longest) is 2 x 70e9 x 6144 / 8 = 1.1e14 FLOP per GPU, ~0.22 s at the fitted H100's
  ~500 TFLOP/s, plus its attention: p99 TTFT 0.40 s. A decode step reads the 17.6 GB of weights per GPU at
  0.887 x 3.35 TB/s, ~5.9 ms, plus 160 all-reduces of a few tens of microseconds each; p99 TPOT 58 ms at batches
  of ~90 sequences per replica mixing prefill chunks in.
- serving/llama3_8b_h100_sessions (1,000 two-turn conversations starting at 2/s on one H100, prefix caching on):
  without the cache a first turn's prompt is the 256-token system prompt and ~613 new tokens (512 e^0.18),
  2 x 7.5e9 x 869 = 1.3e13 FLOP, ~26 ms at the fitted H100's ~500 TFLOP/s plus attention (p50 30.0 ms), and a second
  turn's carries the first turn's prompt and answer (~153 tokens) and ~613 new ones, ~1,635 tokens, ~49 ms (p50
  52.8 ms). With the cache a first turn finds its system prompt (256 of ~869 tokens) and a second turn the ~1,008
  tokens its first computed, each prefilling ~613 new tokens: p50 21.4 and 21.9 ms, half the prompt tokens found
  (hit rate 0.51). A decode step reads 16 GB of weights at 0.887 x 3.35 TB/s, 5.4 ms, p99 TPOT 6.7 ms with the
  shorter prompt chunks mixed in; the starts span ~500 s, the last conversation ending at 530.5 s.
- serving/llama3_8b_h100x4_sessions_routing (the sessions example at 8/s on four replicas): each replica sees the
  one-replica example's load, so a turn prefilling only its new tokens costs what it did there (~21 ms) and one
  missing its first turn's blocks what the uncached run's did (~40 ms for a second turn). Counting tokens, a second
  turn mostly lands on another replica than its first turn's: the hit rate falls from the example's 0.51 to 0.28
  (the system prompts are found everywhere), the second turns' p50 TTFT rises to 38.5 ms. By cache or by session
  nearly every second turn finds its blocks: 0.51, p50 TTFT 22.3 and 21.0 ms.
- serving/llama3_70b_h100_disaggregated (400 requests of the 2,000, at 20/s): arrivals take ~20 s and the longest
  outputs (2,048 tokens at ~12 ms a step, ~25 s) end at 34.5 s. A KV move is 320 KiB a token over eight 50 GB/s
  links: the mean prompt (1,024 e^0.32 = 1,410 tokens) moves in 1.16 ms, moves started together (one prefill
  iteration's hand-offs to one decode replica) take longer, and a move waits while its replicas' links carry
  earlier ones: mean 1.50 ms. p99 TPOT 12.5 ms: the 5.9 ms weight read
  and 160 all-reduces at ~100 sequences, with no prompt chunk mixed in; p99 TTFT 0.58 s, the longest prompt's
  0.22 s and queueing behind others on two prefill replicas.
- serving/mixtral_8x7b_h100_tp2 (400 requests of the 2,000, at 20/s): ~20 s of arrivals, the longest output 2,048
  tokens at ~20 ms, 42.6 s in all. A decode step reads 46.7 GB of weights per GPU (every expert, TP 2) at 0.887 x
  3.35 TB/s, 15.7 ms: p99 TPOT 24 ms; the longest prompt is 6144 x 2 x 12.9e9 active parameters / 2 = 7.9e13 FLOP
  per GPU, ~0.16 s at ~500 TFLOP/s, plus attention: p99 TTFT 0.19 s.
- serving/mixtral_8x7b_h100_ep8 (400 requests of the 2,000, at 20/s): the same model as eight TP-1 replicas in one
  EP-8 group, a GPU holding one expert a layer: 7.24 B parameters, 14.5 GB, so a decode step reads ~4.9 ms of
  weights plus the busiest member's chunk and 64 all-to-alls of 16 KiB a token: mean TPOT 8.8 ms, p99 13.3 ms. The
  longest prompt (6,144 tokens) is 2 x 1.6e9 x 6144 = 2.0e13 FLOP of its own part on its GPU and, routed evenly,
  1,536 tokens through each GPU's 32 experts, 2 x 5.6e9 x 1536 = 1.7e13 FLOP: ~75 ms at ~500 TFLOP/s, plus
  attention, 64 all-to-alls of 7/8 x 100 MB at 450 GB/s (~14 ms) and queueing: p99 TTFT 0.14 s; 26.7 s in all (the
  longest outputs at ~9 ms a step, ~19 s after the last arrival).
- serving/mixtral_8x7b_h100_ep8_skew (400 requests of the 2,000, at 20/s): the EP-8 group with Zipf-skewed routing
  (s = 1.2) and EPLB's 8 redundant experts, two a GPU: the busiest GPU takes 13.4 % of a layer's assignments (even:
  12.5 %) but reads two experts' weights a decode step, 25.8 GB of weights in all: mean TPOT 14.2 ms against the
  even routing's 8.8 ms.
- moe_training_skew: four Mixtral layers, EP 8, capacity factor 2, unpadded: the busiest expert of each layer
  fills its capacity (2 x 4,096 x 2 / 8 = 2,048 tokens from each of 8 GPUs) and drops 17.9 % of the assignments,
  so each MoE layer runs at the padded pace, 338.4 ms against 195.5 ms routed evenly.
- serving/llama3_70b_h100_speculative (400 requests of the 2,000, at 20/s): the 70B replicas of the TP-8 example
  with an 8B draft proposing 4 tokens at acceptance 0.7: a step yields 2.76 tokens against the expected
  (1 - 0.7^5) / 0.3 = 2.77. A step is the draft's 4 passes (2 GB of weights a GPU each, ~0.7 ms, plus 64
  all-reduces) and the 70B's verification of 5 tokens a sequence (~5.9 ms of weights and the batch's compute):
  TPOT mean 13.5 ms, below the 16.4 ms the same 400 requests see without the draft; 30.8 s in all.
- clusters/goodput_16k (a 128-layer LLaMA-3-405B-like model on 16,384 H100s, TP 8, PP 16, DP 128): 6 x 406e9
  parameters x 2,048 x 8,192 tokens, x 4/3 for full recomputation, is 3.3e15 FLOP per GPU, ~6.6 s at the fitted
  H100's ~500 TFLOP/s (7.1 s of compute reported); the 1F1B bubble of (p - 1) / m = 15/16 stretches it to ~13.8 s,
  and exposed tensor- and data-parallel collectives add ~1 s: 15.7 s. Its goodput figures are checked against the
  closed forms in tests/report/test_goodput.py.
- clusters/two_jobs (two DP-8 training jobs of a 4-layer transformer, spread over two rings of 8): each job's
  ~10.3 ms of compute and its gradient all-reduce, whose ring hops cross the links the other job's also use: 64.5 ms
  against 48.3 ms for one alone on the same NPUs (tests/workload_layer/test_jobs.py pins both, and packed).
- clusters/placement_fat_tree (four 32-NPU ring all-reduces of 256 MiB, packed on a k = 8 fat tree): each ring
  carries 2 x 31/32 x 256 MiB through each NPU's 50 GB/s link, 10.4 ms, plus the 62 steps' hops and the chunks'
  pipeline fill: 10.73 ms; random placement (docs/how-to/several-jobs.md) takes 20.4-20.9 ms.
- clusters/stragglers (a data-parallel step on 8 H100s): 4 layers x 3 GEMMs of 2 x 16384 x 4096 x 4096 = 6.6 TFLOP
  at the fitted 0.508 x 989 TFLOP/s is 13.1 ms without variability (13.126 ms simulated, the all-reduces hidden);
  each NPU's lognormal factor of sigma 0.05 puts the slowest of 8 some 1.4 sigma (7 %) above it: p50 14.05 ms over
  100 samples, the first 14.05 ms; the p99 (14.99 ms) is the slowest of 8 at 2.9 sigma in one sample of 100.
- clusters/mixed_h100_a100 (a 1.3B GPT, TP 8 in each pod, DP 2 across an H100 pod and an A100 pod): each GPU's
  share is 64 / 2 x 6 x 1.3e9 x 2,048 / 8 = 6.4e13 FLOP, ~0.35 s at the fitted A100's 0.586 x 312 TFLOP/s
  (0.474 s of compute reported, attention, element-wise and memory-bound operators included), against ~0.13 s
  (0.191 s reported) on the H100s; the pods' all-reduce waits for the A100s, so the iteration is the all-A100 one,
  578.7 ms.
- clusters/train_and_serve (a training job on node 0, a serving job on node 1; the serving job's figures are its
  jobs entry's, ``jobs.serve.*``): the training job is two_jobs' DP-8 iteration (10.29 ms of compute) with its
  517 MiB gradient all-reduce through the 450 GB/s switch, 2 x 7/8 x 542 MB / 450 GB/s = 2.11 ms (2.14 ms exposed):
  12.43 ms. The serving job's 886 M parameters (16 layers of 47.2 M, 131 M of embeddings; 886 MB a GPU at TP 2, as
  its weights_bytes_per_npu says) read at 0.887 x 3.35 TB/s take 0.30 ms a decode step, plus 32 TP all-reduces of a
  few microseconds: p99 TPOT 0.45 ms. The longest prompts (2,048 tokens) are 2 x 755e6 x 2048 / 2 = 1.5e12 FLOP a
  GPU, ~3.1 ms at the fitted 0.508 x 989 TFLOP/s: p99 TTFT 3.1 ms. A KV move is 64 KiB a token (2 x 16 layers x 8
  KV heads x 128 x 2 bytes): the mean prompt (512 e^0.125 = 580 tokens), 38 MB as two 19 MB sends through the
  450 GB/s switch, 42 us; mean 41 us. 200 Poisson arrivals at 50/s end near 4.25 s, the last request a few tens of
  milliseconds later: the study ends with the serving job, at 4.27 s.
- dataflow/two_gemms (a Megatron-sharded MLP block as a dataflow graph, 4 repeats, 4 micro-batches, TP 4, DP 2): per
  micro-batch and repeat, six GEMMs of 2 x 2048 x 4096 x 4096 = 68.7 GFLOP a GPU (forward, input and weight
  gradients of each), 6.6 TFLOP in all, 13.1 ms at the fitted 0.508 x 989 TFLOP/s, plus the GeLU's memory-bound
  passes: 13.59 ms of compute; each row-parallel output's 16 MiB all-reduce on the 300 GB/s ring (2 x 3/4 x 16.8 MB,
  ~84 us and the hops) waits in the chain, 1.53 ms in all; the 256 MiB of weight shares (two GEMMs of 32 MiB a GPU,
  4 repeats) all-reduced over the 50 GB/s switch at the end take 5.40 ms: 20.52 ms.

The Megatron-LM rows (``examples/megatron/``) and the paper scripts (``examples/paper/``) have tests of their
own; ``test_every_example_has_a_test`` keeps that true for any example added later.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim import cli
from stratasim.config.study_file import load_study
from stratasim.report.report import Report
from stratasim.study.run import run_study
from tests.examples.test_calibration import (
    CALIBRATION,
    GAUDI3,
    GPT_NEOX_20B_GAUDI3,
    H100_FP8,
    H200_FP8,
    LLAMA,
    LLAMA3_8B_B200,
    LLAMA3_8B_CP2,
    LLAMA3_70B_CP2,
    LLAMA31_8B,
    MAXTEXT_22B,
    MAXTEXT_V5P,
    MI300X,
    NEMOTRON4_15B_B200,
    PUBLISHED_SEQUENCES,
)
from tests.examples.test_megatron import EXAMPLES as MEGATRON
from tests.examples.test_megatron import PUBLISHED_TFLOPS
from tests.examples.test_paper_findings import SCRIPT as ASTRA_FINDINGS
from tests.examples.test_vidur import EXAMPLE_FILES as VIDUR_EXAMPLES
from tests.explore.test_deap_example import BERT as DEAP_BERT
from tests.explore.test_deap_example import GPT as DEAP_GPT
from tests.explore.test_generators import GPT3_PLANS
from tests.explore.test_ladder import EXAMPLE as TORUS_LADDER
from tests.explore.test_sweep import EXAMPLE as TORUS_SWEEP
from tests.network_layer.test_palm_congestion import SCRIPT as PALM_CONGESTION
from tests.workload_layer.test_serving_study import SERVING_SWEEP

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Overrides (``--set`` style) that make a slow example's short form.
SHORT_FORMS = {
    "gpt3_175b.yaml": ["workload.parallelism.global_batch=128"],
    "serving/llama3_70b_h100_tp8.yaml": ["workload.requests.count=400"],
    "serving/llama3_70b_h100_disaggregated.yaml": ["workload.requests.count=400"],
    "serving/mixtral_8x7b_h100_tp2.yaml": ["workload.requests.count=400"],
    "serving/mixtral_8x7b_h100_ep8.yaml": ["workload.requests.count=400"],
    "serving/mixtral_8x7b_h100_ep8_skew.yaml": ["workload.requests.count=400"],
    "serving/llama3_70b_h100_speculative.yaml": ["workload.requests.count=400"],
}

# Headline figures by example: total_time_ps, and what the report adds for training or serving.
HEADLINES: dict[str, dict[str, int | float]] = {
    "quickstart.yaml": {"total_time_ps": 73_875_130_400},
    "training_loop.yaml": {"total_time_ps": 77_886_407_388},
    # Fused attention and the h100 preset's fitted model (issue 14): unfused on the datasheet, 70,678,794,768 ps.
    "transformer.yaml": {"total_time_ps": 79_842_170_750, "tflops_per_npu": 233.03222033541718},
    # Fused attention and the fitted h100 (issue 14): unfused on the datasheet, 348,118,406,357 ps.
    "inference.yaml": {"total_time_ps": 409_484_042_802, "ttft_ns": 63_559_942.87, "tpot_ns": 2_723_811.8104881886},
    # Every operator from the operator-level model fitted to H100 kernel times (issue 26).
    # Element-wise operators name their function (RMSNorm, SwiGLU): inferred from FLOPs, 53,815,571,337 ps,
    # TTFT 47,712,723.106 ns and TPOT 6,102,848.231 ns.
    "llama3_8b_h100_measured.yaml": {
        "total_time_ps": 52_246_827_031,
        "ttft_ns": 46_243_397.193,
        "tpot_ns": 6_003_429.838,
    },
    "resnet50.yaml": {"total_time_ps": 8_765_003_214},
    "torus_allreduce.yaml": {"total_time_ps": 2_531_582_400},
    "fat_tree_alltoall.yaml": {"total_time_ps": 320_572_800},
    "palm_congestion.yaml": {"total_time_ps": 122_980_000},
    # Fused attention (issue 14): unfused, 4,679,391,706,744 ps and 78.45 TFLOP/s.
    "gpt3_175b.yaml": {"total_time_ps": 4_571_545_695_461, "tflops_per_npu": 80.30188565226379},
    "clusters/goodput_16k.yaml": {"total_time_ps": 15_733_971_796_010, "tflops_per_npu": 231.14958155471962},
    "clusters/two_jobs.yaml": {"total_time_ps": 64_534_072_300},
    "dataflow/two_gemms.yaml": {"total_time_ps": 20_521_278_560},
    "clusters/placement_fat_tree.yaml": {"total_time_ps": 10_727_873_920},
    "clusters/degraded_link.yaml": {"total_time_ps": 1_007_132_960},  # row 0's all-reduce, at the slow link's pace
    "clusters/failed_link.yaml": {"total_time_ps": 3_701_487_520},  # intact torus: 2,531,582,400 ps
    # Job a alone on its ring, to its end: 14 steps of (500 ns + ser(8 MiB at 50 GB/s)) = 14 x 168,272,160 ps; job b
    # stopped at NPU 12's failure, 1 ms in.
    "clusters/npu_failure.yaml": {"total_time_ps": 2_355_810_240},
    # The first of 100 Monte-Carlo samples, and the distribution's median and tail (docs/how-to/stragglers.md).
    "clusters/stragglers.yaml": {
        "total_time_ps": 14_045_869_945,
        "samples.p50_ns": 14_048_324.909,
        "samples.p99_ns": 14_991_842.70916,
    },
    # Exactly the all-A100 time: the pods' gradient all-reduce waits for the A100s (both pods on H100s: 336.38 ms).
    "clusters/mixed_h100_a100.yaml": {"total_time_ps": 578_713_835_768, "tflops_per_npu": 128.43821568805498},
    "clusters/train_and_serve.yaml": {
        "total_time_ps": 4_274_300_174_515,
        "jobs.train.iteration_time_ns": 12_430_655.17,
        "jobs.serve.ttft_p99_ns": 3_106_455.264159996,
        "jobs.serve.tpot_p99_ns": 452_013.0820192029,
        "jobs.serve.kv_transfer_mean_ns": 41_081.30181,
    },
    "serving/llama3_8b_h100_sessions.yaml": {
        "total_time_ps": 530_459_999_288_098,
        "ttft_first_turns_p50_ns": 21_368_417.6245,
        "ttft_later_turns_p50_ns": 21_927_381.4285,
        "tpot_p99_ns": 6_720_280.881844811,
        "prefix_cache_hit_rate": 0.5077721851614418,
        "ttft_p50_no_prefix_cache_ns": 43_174_440.52,
    },
    # router: prefix_aware; the other routers' figures in ROUTED below.
    "serving/llama3_8b_h100x4_sessions_routing.yaml": {
        "total_time_ps": 154_306_245_969_180,
        "ttft_p50_ns": 22_262_963.5995,
        "ttft_p99_ns": 69_663_070.56933999,
        "prefix_cache_hit_rate": 0.5077721851614418,
    },
    "serving/llama3_70b_h100_tp8.yaml": {
        "total_time_ps": 29_927_234_957_307,
        "ttft_p99_ns": 398_284_557.96863997,
        "tpot_p99_ns": 57_975_240.73761643,
    },
    "serving/llama3_70b_h100_disaggregated.yaml": {
        "total_time_ps": 34_521_173_497_124,
        "ttft_p99_ns": 578_758_372.6647298,
        "tpot_p99_ns": 12_548_510.398237959,
        "kv_transfer_mean_ns": 1_498_533.1440275,
    },
    "serving/mixtral_8x7b_h100_tp2.yaml": {
        "total_time_ps": 42_705_490_020_105,
        "ttft_p99_ns": 186_538_908.98749998,
        "tpot_p99_ns": 23_630_170.536563743,
    },
    "serving/mixtral_8x7b_h100_ep8.yaml": {
        "total_time_ps": 26_745_612_948_024,
        "ttft_p99_ns": 139_684_048.64106998,
        "tpot_p99_ns": 13_312_777.243610295,
        "tpot_mean_ns": 8_764_610.655163357,
        "weights_bytes_per_npu": 14_485_561_344.0,
    },
    # Zipf-skewed routing (s = 1.2) with EPLB's 8 redundant experts; routing.s=0 and no redundant experts give the
    # ep8 figures above to the picosecond (tests/workload_layer/test_moe_routing.py).
    "serving/mixtral_8x7b_h100_ep8_skew.yaml": {
        "total_time_ps": 32_430_501_849_603,
        "ttft_p99_ns": 159_832_370.16974998,
        "tpot_p99_ns": 18_252_336.25921432,
        "tpot_mean_ns": 14_188_254.448401704,
        "weights_bytes_per_npu": 25_759_850_496.0,
    },
    "moe_training_skew.yaml": {
        "total_time_ps": 338_395_506_272,
        "tflops_per_npu": 472.3194088198829,
        "moe_dropped_tokens": 93_696,
        "moe_dropped_fraction": 0.1787109375,
    },
    "serving/llama3_70b_h100_speculative.yaml": {
        "total_time_ps": 30_625_099_956_755,
        "ttft_p99_ns": 379_053_131.52051,
        "tpot_mean_ns": 13_474_725.04843002,
        "speculative_tokens_per_step": 2.756145610278373,
    },
}


# The routing example under the other routers (docs/how-to/prefix-caching.md quotes all three).
ROUTED: dict[str, dict[str, int | float]] = {
    "least_outstanding_tokens": {
        "total_time_ps": 154_290_281_893_699,
        "ttft_p50_ns": 28_347_873.678,
        "ttft_p99_ns": 89_360_029.58245999,
        "prefix_cache_hit_rate": 0.2789481367701477,
        "ttft_later_turns_p50_ns": 38_524_314.272,
    },
    "session_affinity": {
        "total_time_ps": 154_267_673_404_512,
        "ttft_p50_ns": 21_007_664.3205,
        "ttft_p99_ns": 68_515_400.33733,
        "prefix_cache_hit_rate": 0.5065535166836984,
    },
}


def headline_figures(report: Report, names: set[str]) -> dict[str, int | float]:
    """The named figures of a report: its total time and its training or serving fields as the JSON gives them, and
    each job's as ``jobs.<name>.<field>`` (its serving figures' too)."""
    data = report.to_dict()
    serving = data.get("serving", {})
    samples = {f"samples.{key}": value for key, value in (report.samples or {}).items() if key != "times_ns"}
    jobs = {
        f"jobs.{row['name']}.{key}": value
        for row in data.get("jobs", [])
        for key, value in {**row, **row.get("serving", {})}.items()
    }
    figures = {"total_time_ps": report.total_time_ps, **(report.training or {}), **serving, **samples, **jobs}
    return {name: figures[name] for name in names}


@pytest.mark.parametrize("example", sorted(HEADLINES))
def test_example_gives_its_headline_figures(example: str) -> None:
    report = run_study(load_study(EXAMPLES / example, SHORT_FORMS.get(example, [])))
    expected = HEADLINES[example]
    figures = headline_figures(report, set(expected))
    assert figures["total_time_ps"] == expected["total_time_ps"]
    # The derived figures are floats computed from the exact times.
    assert figures == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("router", sorted(ROUTED))
def test_the_routing_example_under_another_router(router: str) -> None:
    example = EXAMPLES / "serving" / "llama3_8b_h100x4_sessions_routing.yaml"
    report = run_study(load_study(example, [f"workload.pools.0.router={router}"]))
    expected = ROUTED[router]
    figures = headline_figures(report, set(expected))
    assert figures["total_time_ps"] == expected["total_time_ps"]
    assert figures == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("example", sorted(SHORT_FORMS))
def test_a_slow_example_validates_in_full(capsys: pytest.CaptureFixture[str], example: str) -> None:
    assert cli.main(["check", str(EXAMPLES / example)]) == 0
    assert capsys.readouterr().out.startswith("OK: ")


def test_every_example_has_a_test() -> None:
    tested = {EXAMPLES / name for name in HEADLINES}
    tested |= {MEGATRON / f"gpt_{row}.yaml" for row in PUBLISHED_TFLOPS}
    tested |= {
        ASTRA_FINDINGS,
        PALM_CONGESTION,
        TORUS_SWEEP,
        TORUS_LADDER,
        GPT3_PLANS,
        DEAP_BERT,
        DEAP_GPT,
        LLAMA,
        MAXTEXT_22B,
        SERVING_SWEEP,
    }
    tested |= {CALIBRATION / f"mpt_{size}_h100.yaml" for size in PUBLISHED_SEQUENCES}
    tested |= {CALIBRATION / f"maxtext_{size}_tpuv5p.yaml" for size in MAXTEXT_V5P} | {LLAMA31_8B}
    tested |= {LLAMA3_8B_B200, NEMOTRON4_15B_B200, LLAMA3_8B_CP2, LLAMA3_70B_CP2} | {
        CALIBRATION / f"{name}.yaml" for name in H100_FP8
    }
    tested |= {CALIBRATION / f"{name}.yaml" for name in (MI300X, *GAUDI3, H200_FP8, GPT_NEOX_20B_GAUDI3)}
    tested |= VIDUR_EXAMPLES  # tests/examples/test_vidur.py runs Vidur's configurations and their traces
    tested |= {EXAMPLES / "explore" / "quickstart_sweep.yaml"}  # docs/tutorials/exploring.md shows its best trial
    tested |= {EXAMPLES / "training" / "deepseek_v3_like_schedules.yaml"}  # test_pipeline_schedules_example.py
    tested |= {EXAMPLES / "dataflow" / "two_gemms.graph.json"}  # the graph dataflow/two_gemms.yaml runs
    # tests/optimize/test_dataflow_study.py optimises and simulates these studies and their graphs
    tested |= {
        EXAMPLES / "optimize" / f"{name}{kind}"
        for name in ("hpl", "fft", "gpt_layer")
        for kind in (".yaml", ".graph.json")
    }
    tested |= {EXAMPLES / "explore" / "stragglers_p99.yaml"}  # tests/explore/test_p99_sweep.py ranks its trials
    tested |= {EXAMPLES / "explore" / "gpt3_1t_splits.yaml"}  # tests/optimize/test_plans.py solves it (Fig. 8)
    tested |= {EXAMPLES / "explore" / "gpt3_plans_ladder.yaml"}  # tests/explore/test_screening.py runs its ladder
    tested |= {EXAMPLES / "explore" / "deepseek_v3_like_plans_ladder.yaml"}  # tests/optimize/test_first_order_moe.py
    # tests/optimize/test_two_pass.py runs the design-space script on a small grid
    tested |= {EXAMPLES / "optimize" / "dataflow_vs_kernel" / "run.py"}
    # tests/optimize/test_chip_study.py runs DFModel's two passes on these (Sec. VII's SN10s; HPL generated)
    tested |= {EXAMPLES / "optimize" / name for name in ("gpt3_sn10.yaml", "hpl_generated.yaml")}
    tested |= {EXAMPLES / "oracle" / "replay_trace.py"}  # tests/remote/test_serving_oracle.py replays through it
    # tests/system_layer/test_nccl.py runs the NCCL example and its nccl-tests script against NVIDIA's figures;
    # tests/system_layer/test_nccl_multi_node.py the two-node one against NCCL's tuning model by hand
    tested |= {EXAMPLES / "nccl" / name for name in ("allreduce_8xh100.yaml", "busbw.py", "allreduce_2x8xh100.yaml")}
    examples = {path for path in EXAMPLES.rglob("*") if path.is_file() and path.suffix != ".md"}
    untested = sorted(str(path.relative_to(EXAMPLES)) for path in examples - tested)
    assert not untested, f"examples no test runs: {untested}; give each a headline figure in HEADLINES here"
    assert tested <= examples, f"tests name examples that are gone: {sorted(map(str, tested - examples))}"
