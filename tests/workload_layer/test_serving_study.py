"""Serving studies end to end: iterations priced by the roofline and the analytical network through the study's
composition root, request traces, and bad input refused with one clear message."""

from __future__ import annotations

import copy
import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from stratasim import cli
from stratasim.config.study_file import parse_study
from stratasim.kernel import registry
from stratasim.study.run import run_study
from stratasim.system_layer.serving import quantised
from stratasim.workload_layer.serving.iteration import iteration_shape
from stratasim.workload_layer.serving.trace_file import read_trace
from tests.helpers import RunCli
from tests.workload_layer.serving_pricers import ShapePricer, pool_pricer

STUDY: dict[str, Any] = {
    "name": "serving",
    "workload": {
        "kind": "serving",
        "model": {
            "layers": 8,
            "hidden": 2048,
            "heads": 16,
            "kv_heads": 4,
            "seq_len": 4096,
            "vocab": 32000,
            "activation": "swiglu",
            "ffn": 5632,
        },
        "pools": [{"replicas": 2, "parallelism": {"tp": 2}, "scheduler": {"max_batch": 32, "token_budget": 1024}}],
        "requests": {
            "count": 30,
            "seed": 2,
            "arrival": {"process": "fixed", "rate": "1/s"},
            "prompt": {"distribution": "fixed", "value": 700},
            "output": {"distribution": "fixed", "value": 5},
        },
        "slo": {"ttft": "50ms", "tpot": "5ms"},
    },
    "system": {"algorithm": "ring"},
    "network": {"topology": [{"kind": "switch", "size": 4, "bandwidth": "300GB/s", "latency": "1us"}]},
    "compute": {"backend": "roofline", "device": "h100"},
}

SERVING_SWEEP = Path(__file__).resolve().parents[2] / "examples" / "explore" / "serving_replicas.yaml"


def _pricer(parsed: Any) -> AbstractContextManager[ShapePricer]:
    """The pricer a serving run of ``parsed`` uses: its compute backend (closed after) and the analytical network."""
    return pool_pricer(parsed, registry.load("network", "analytical")())


def study(**workload: Any) -> dict[str, Any]:
    data = copy.deepcopy(STUDY)
    data["workload"] |= workload
    return data


def test_at_very_low_load_ttft_and_tpot_are_the_backends_prices() -> None:
    """One request at a time: TTFT is the priced 700-token prefill (one chunk within the 1,024-token budget), TPOT
    the mean of the four priced decode steps; the TP collectives are priced by the system layer."""
    parsed = parse_study(study(), "serving.yaml")
    report = run_study(parsed)
    serving = report.serving
    assert serving is not None
    with _pricer(parsed) as pricer:
        prefill = pricer(iteration_shape([(700, 700)], [], 1, 64))
        decodes = [pricer(iteration_shape([], [700 + k], 1, 64)) for k in range(1, 5)]
        collectives = pricer.distinct[1]
    assert serving["ttft_p99_ps"] == serving["ttft_mean_ps"] == prefill
    assert serving["tpot_mean_ps"] == pytest.approx(sum(decodes) / 4, rel=1e-15)
    assert collectives >= 2  # the all-reduce of 700 and of 1 token, and the logits' all-gather
    assert serving["slo_attainment"] == (1.0 if prefill <= 50 * 10**9 else 0.0)
    data = report.to_dict()
    assert data["serving"]["ttft_p99_ns"] == prefill / 1000 and data["serving_timeline"]["time_ns"]


def test_collective_sizes_are_quantised_by_at_most_a_32nd() -> None:
    sizes = [1, 33, 16_385, 700 * 4096, 8191 * 16384, 3 * 2**40 + 1]
    assert all(size <= quantised(size) <= size * (1 + 1 / 32) for size in sizes)
    assert quantised(2**20) == 2**20 and quantised(2**20 + 1) == 2**20 + 2**15


def test_decode_is_memory_bound_on_the_weights() -> None:
    """A decode step of one sequence reads every weight once. Per layer 2048 x 3072 (QKV with 4 of 16 KV heads)
    + 2048^2 (projection) + 3 x 2048 x 5632 (SwiGLU MLP) = 45.1 M parameters, 361 M for 8 layers, with 65.5 M of
    word and 8.4 M of position embeddings: ~435 M, ~443 MB per GPU in bf16 over TP 2. At the fitted H100's 0.887 x
    3.35 TB/s that is 149 us; the step adds 17 TP collectives (16 all-reduces, the logits' all-gather) of a few
    microseconds each on a 1 us switch, so TPOT lies between the datasheet's read time and that plus 10 us each."""
    report = run_study(parse_study(study(), "serving.yaml"))
    assert report.serving is not None
    weights = report.serving["weights_bytes_per_npu"]
    assert 430e6 < weights < 460e6
    read_ps = weights / (0.887 * 3.35e12) * 1e12
    assert weights / 3.35e12 * 1e12 < report.serving["tpot_mean_ps"] < read_ps + 17 * 10e6


def test_a_trace_replays_in_azure_and_plain_formats(tmp_path: Path) -> None:
    azure = tmp_path / "azure.csv"
    azure.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6000000,300,4\n"
        "2023-11-16 18:15:46.1000000,200,3\n2023-11-16 18:15:47.1,100,2\n"
    )
    requests = read_trace(azure)
    assert [(r.arrival_ps, r.prompt_tokens, r.output_tokens) for r in requests] == [
        (0, 200, 3),
        (500_000_000_000, 300, 4),
        (1_000_000_000_000, 100, 2),
    ]
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        '{"arrival_ms": 5, "prompt_tokens": 10, "output_tokens": 2}\n\n'
        '{"arrival_ms": 1.5, "prompt_tokens": 20, "output_tokens": 1}\n'
    )
    assert [(r.arrival_ps, r.prompt_tokens) for r in read_trace(plain)] == [(1_500_000_000, 20), (5_000_000_000, 10)]
    data = study(requests={"trace": {"path": str(azure)}})
    report = run_study(parse_study(data, "serving.yaml"))
    assert report.serving is not None and report.serving["requests"] == 3


def run_study_file(run_cli: RunCli, tmp_path: Path, data: dict[str, Any]) -> tuple[int, str]:
    """``stratasim run`` on ``data`` written as a study file; its exit code and stderr (never a traceback)."""
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(data))
    code, _, err = run_cli("run", str(path))
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            "arrival_s,prompt_tokens,output_tokens\n0,10,2\n0.5,ten,2\n",
            "trace.csv: line 3: prompt_tokens must be a whole number",
        ),
        ("arrival_s,prompt_tokens,output_tokens\n0,10,2\n1,10\n", "trace.csv: line 3: expected 3 columns"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 25:00:00,10,2\n",
            "trace.csv: line 2: TIMESTAMP is not a valid",
        ),
        ("when,tokens\n1,2\n", "trace.csv: line 2: expected the columns TIMESTAMP"),
        (
            "arrival_s,prompt_tokens,output_tokens\n0,4000,200\n",
            "request 0 (in arrival order) has 4000 prompt and 200 output",
        ),
    ],
)
def test_a_malformed_trace_is_one_message_naming_the_line(
    tmp_path: Path, run_cli: RunCli, rows: str, message: str
) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(rows)
    code, err = run_study_file(run_cli, tmp_path, study(requests={"trace": {"path": str(trace)}}))
    assert code != 0 and message in err


def test_a_kv_cache_that_cannot_hold_one_request_is_refused(tmp_path: Path, run_cli: RunCli) -> None:
    data = study()
    data["workload"]["pools"][0]["scheduler"]["kv_capacity"] = "1MiB"
    code, err = run_study_file(run_cli, tmp_path, data)
    assert code != 0
    assert "workload.pools.0.scheduler: the KV cache cannot hold one request" in err and "needs 45 " in err


def test_weights_beyond_the_device_leave_no_kv_cache(tmp_path: Path, run_cli: RunCli) -> None:
    data = study()
    data["system"]["memory_capacity"] = "100MiB"
    code, err = run_study_file(run_cli, tmp_path, data)
    assert code != 0 and "less weights" in err and "cannot hold one request" in err


def test_a_prompt_beyond_the_context_and_a_rate_of_zero_are_refused(tmp_path: Path, run_cli: RunCli) -> None:
    long = study()
    long["workload"]["requests"]["prompt"] = {"distribution": "uniform", "low": 10, "high": 4095}
    code, err = run_study_file(run_cli, tmp_path, long)
    assert code != 0 and "exceed workload.model.seq_len (4096)" in err
    still = study()
    still["workload"]["requests"]["arrival"]["rate"] = "0/s"
    code, err = run_study_file(run_cli, tmp_path, still)
    assert code != 0 and "workload.requests.arrival.rate" in err and "must be positive" in err


def test_millions_of_long_requests_are_refused_by_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = study()
    data["workload"]["requests"] |= {
        "count": 10_000_000,
        "arrival": {"process": "fixed", "rate": "100/s"},  # within the horizon: the budget speaks
        "output": {"distribution": "fixed", "value": 2000},
    }
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(data))
    assert cli.main(["check", str(path)]) != 0
    assert "reduce workload.requests.count" in capsys.readouterr().err


def test_out_draws_the_serving_timeline_and_traces_counters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    data = study()
    data["workload"]["pools"][0]["router"] = (
        "round_robin"  # both replicas serve (the least loaded would be 0 each time)
    )
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(data))
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    assert "TTFT             mean" in capsys.readouterr().out
    assert (tmp_path / "out" / "serving_timeline.png").stat().st_size > 0
    assert "serving_timeline" in json.loads((tmp_path / "out" / "report.json").read_text())
    events = json.loads((tmp_path / "out" / "trace.json").read_text())["traceEvents"]
    counters = {(event["pid"], event["name"]) for event in events if event["ph"] == "C"}
    assert counters == {(npu, name) for npu in (0, 2) for name in ("batch size", "queue length", "KV blocks used")}


def test_check_validates_a_serving_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(study()))
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out.startswith("OK: ")


def test_a_mixture_of_experts_holds_every_expert_and_decodes_slower() -> None:
    """Eight experts of the dense model's MLP, top-2: the weights grow by seven MLPs per layer (8 x 7 x 3 x 2048
    x 5632 / 2 TP ranks x 2 bytes = 969 MB), and a decode step, bound by reading them (a batch of one touches two
    experts but the batched expert GEMM reads all eight), takes longer than the dense model's."""
    dense = run_study(parse_study(study(), "serving.yaml")).serving
    data = study()
    data["workload"]["model"] |= {"experts": 8, "top_k": 2}
    moe = run_study(parse_study(data, "serving.yaml")).serving
    assert dense is not None and moe is not None
    extra = 8 * 7 * 3 * 2048 * 5632 // 2 * 2 + 8 * 2048 * 8 // 2 * 2  # seven more MLPs, and the routers
    assert moe["weights_bytes_per_npu"] - dense["weights_bytes_per_npu"] == pytest.approx(extra, rel=0.01)
    assert moe["tpot_mean_ps"] > dense["tpot_mean_ps"] * 1.5


def test_a_sweep_varies_replicas_and_rate_against_a_p99_ttft_slo(tmp_path: Path) -> None:
    """Serving composes with design-space sweeps: more replicas at a high rate bring p99 TTFT under the SLO."""
    from stratasim.explore import sweep

    base = study()
    base["workload"]["requests"] |= {"count": 200, "arrival": {"process": "poisson", "rate": "3000/s"}}
    outcome = sweep(
        {
            "study": base,
            "space": {"workload.pools.0.replicas": [1, 2]},
            "objectives": [{"metric": "serving.ttft_p99_ns", "goal": "min"}],
            "constraints": [{"metric": "serving.requests_per_second", "min": 1}],
            "search": {"method": "grid"},
        },
        workers=1,
    )
    ttft = {trial.params["workload.pools.0.replicas"]: trial.metrics["serving.ttft_p99_ns"] for trial in outcome.trials}
    assert ttft[2] < ttft[1]


def disaggregated_study(**decode: Any) -> dict[str, Any]:
    """One TP-2 prefill replica on NPUs 0-1 and one TP-2 decode replica on NPUs 2-3 of the 4-NPU switch."""
    data = study()
    data["workload"]["pools"] = [
        {
            "name": "prefill",
            "role": "prefill",
            "parallelism": {"tp": 2},
            "scheduler": {"max_batch": 32, "token_budget": 1024},
        },
        {
            "name": "decode",
            "role": "decode",
            "parallelism": {"tp": 2},
            "scheduler": {"max_batch": 32, "token_budget": 1024},
            **decode,
        },
    ]
    return data


def test_a_kv_cache_moves_between_pools_over_the_network() -> None:
    """A 700-token prompt's KV cache is 2 x 8 layers x 4 KV heads x 128 x 2 bytes = 16 KiB a token, 11.5 MB,
    sent as two 5.7 MB slices (NPU 0 to 2 and 1 to 3) in parallel over 300 GB/s links: ~19 us, plus the switch's
    latency. TTFT is the colocated run's (the same prefill, priced alike), and TPOT grows by the move over the 4
    later tokens."""
    colocated = run_study(parse_study(study(), "serving.yaml")).serving
    split = run_study(parse_study(disaggregated_study(), "serving.yaml")).serving
    assert colocated is not None and split is not None
    move_ps = quantised(700 * 16384) / 2 / 300e9 * 1e12
    assert move_ps < split["kv_transfer_mean_ps"] < move_ps * 1.05 + 10**7
    assert split["ttft_mean_ps"] == colocated["ttft_mean_ps"]
    assert split["tpot_mean_ps"] == pytest.approx(
        colocated["tpot_mean_ps"] + split["kv_transfer_mean_ps"] / 4, rel=1e-9
    )
    assert (
        "KV transfers     30 prefill to decode: mean "
        in run_study(parse_study(disaggregated_study(), "s.yaml")).to_text()
    )


def test_a_pool_on_its_own_device_is_priced_on_it() -> None:
    """Decoding on A100s (2.0 TB/s of HBM against the H100's 3.35), or on an H100 described with 2 TB/s, reads the
    weights more slowly: TPOT grows, the prefill pool's TTFT does not move."""
    h100 = run_study(parse_study(disaggregated_study(), "serving.yaml")).serving
    a100 = run_study(parse_study(disaggregated_study(device="a100"), "serving.yaml")).serving
    assert h100 is not None and a100 is not None
    assert a100["ttft_mean_ps"] == h100["ttft_mean_ps"] and a100["tpot_mean_ps"] > h100["tpot_mean_ps"] * 1.3
    assert a100["kv_capacity_bytes_per_npu.decode"] == h100["kv_capacity_bytes_per_npu.decode"]  # both hold 80 GB
    slower = run_study(
        parse_study(disaggregated_study(device={"preset": "h100", "memory_bandwidth": "2TB/s"}), "serving.yaml")
    ).serving  # a described device named like the preset, priced apart
    assert slower is not None and slower["tpot_mean_ps"] > h100["tpot_mean_ps"] * 1.3


@pytest.mark.parametrize(
    ("decode", "message"),
    [
        ({"device": "h999"}, "workload.pools[1].device: roofline has no device 'h999'"),
        ({"device": 7}, "workload.pools[1].device: expected a device name (h100) or a mapping describing one"),
        ({"device": {"preset": "h100", "bogus": 3}}, "workload.pools[1].device.bogus: unknown key"),
        ({"replicas": 2}, "workload needs 6 NPUs but the topology has 4"),
    ],
)
def test_bad_pools_are_refused_naming_the_key(
    tmp_path: Path, run_cli: RunCli, decode: dict[str, Any], message: str
) -> None:
    code, err = run_study_file(run_cli, tmp_path, disaggregated_study(**decode))
    assert code != 0 and message in err, err


def test_kv_slices_sharing_a_link_congest_on_the_congestion_aware_network() -> None:
    """Decoding on TP 1, both prefill NPUs send their half of the cache to NPU 2: on the analytical network the
    two slices cross in parallel (one slice's time), on the congestion-aware one they queue on NPU 2's link from
    the switch, taking about twice as long; with TP 2 on both sides the slices use distinct links and the two
    networks agree."""
    moves = {}
    for tp in (2, 1):
        for backend in ("analytical", "congestion_aware"):
            data = disaggregated_study(parallelism={"tp": tp})
            data["network"]["backend"] = backend
            data["workload"]["requests"]["count"] = 3
            serving = run_study(parse_study(data, "serving.yaml")).serving
            assert serving is not None
            moves[tp, backend] = serving["kv_transfer_mean_ps"]
    assert moves[2, "analytical"] == moves[2, "congestion_aware"] == moves[1, "analytical"]
    slice_ps = quantised(700 * 16384) / 2 / 300e9 * 1e12
    assert moves[1, "congestion_aware"] == pytest.approx(moves[1, "analytical"] + slice_ps, rel=0.01)


def test_the_throughput_ceiling_at_saturation_is_the_batch_roofline() -> None:
    """320 requests at once (64-token prompts, 512 output tokens) on one replica of max_batch 32: it runs ten
    waves of 32 sequences, each one prefill iteration then 511 full decode steps at contexts 65..575. Generation
    then runs at the batch roofline, max_batch / (a 32-sequence decode step priced at the mean context, 320): an
    attention kernel reads each cached key once, so a step's cost is linear in the context and the mean step is
    the step at the mean context, to the 64-token bucketing (steps are priced at contexts rounded up, the roofline
    at 320 exactly, within 1 % here). The margin below it: each wave's prefill iteration (2,048 prompt tokens,
    compute-bound: 2.4 ms, ~9 decode steps of 0.26 ms) in 512 iterations, ~1.8 %, and the rounding, ~1 %; so the
    simulated rate lies within 5 % below the roofline and never above it (but for the rounding's 1 %)."""
    data = study()
    data["workload"]["pools"][0] |= {"replicas": 1, "scheduler": {"max_batch": 32, "token_budget": 4096}}
    data["workload"]["requests"] |= {
        "count": 320,
        "arrival": {"process": "fixed", "rate": "1000000/s"},
        "prompt": {"distribution": "fixed", "value": 64},
        "output": {"distribution": "fixed", "value": 512},
    }
    parsed = parse_study(data, "serving.yaml")
    serving = run_study(parsed).serving
    assert serving is not None
    with _pricer(parsed) as pricer:
        step_ps = pricer(iteration_shape([], [64 + 256] * 32, 32, 1))
    roofline = 32 / (step_ps / 1e12)
    assert serving["batch_size_peak"] == 32
    assert roofline * 0.95 < serving["tokens_per_second"] < roofline * 1.01


def test_the_serving_sweep_example_finds_the_replicas_that_hold_the_slo_at_each_rate() -> None:
    """examples/explore/serving_replicas.yaml: at 60/s two replicas miss the 2 s p99 TTFT SLO and eight hold it."""
    from stratasim.explore import sweep

    outcome = sweep(SERVING_SWEEP, workers=1)
    ttft = {
        (trial.params["workload.pools.0.replicas"], trial.params["workload.requests.arrival.rate"]): trial.metrics[
            "serving.ttft_p99_ns"
        ]
        for trial in outcome.trials
    }
    assert len(ttft) == 12
    assert ttft[2, "60/s"] > 2e9 > ttft[8, "60/s"]
    assert all(ttft[8, rate] <= ttft[2, rate] for rate in ("20/s", "40/s", "60/s"))


def test_swap_preemption_runs_from_a_study_and_reports_its_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_cli: RunCli
) -> None:
    """Thirty 700-token prompts at once into 100 blocks (16 tokens, 128 KiB each on an NPU): two run at a time
    and, growing to 900 tokens, one is swapped out over the 32 GB/s host link (4.096 us a block) and back."""
    data = study(
        requests={
            **STUDY["workload"]["requests"],
            "arrival": {"process": "fixed", "rate": "1000/s"},
            "output": {"distribution": "fixed", "value": 200},
        }
    )
    data["workload"]["pools"][0]["scheduler"] |= {
        "kv_capacity": "12.5MiB",
        "preemption": "swap",
        "swap_bandwidth": "32GB/s",
    }
    serving = run_study(parse_study(data, "serving.yaml")).serving
    assert serving["swap_outs"] == serving["preemptions"] > 0
    assert serving["swap_time_ps"] > 0 and serving["swap_time_ps"] % (2 * 4_096_000) == 0
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(data))
    assert cli.main(["run", str(path)]) == 0
    assert "swapped to host memory" in capsys.readouterr().out
    del data["workload"]["pools"][0]["scheduler"]["swap_bandwidth"]
    code, err = run_study_file(run_cli, tmp_path, data)
    assert code != 0 and "1 problem\n  workload.pools[0].scheduler: preemption: swap needs swap_bandwidth" in err, err


def speculative_study(acceptance: float, **pool: Any) -> dict[str, Any]:
    """STUDY's requests, 40 output tokens each, with a 1-layer draft proposing 4 tokens a step."""
    data = study(requests={**STUDY["workload"]["requests"], "output": {"distribution": "fixed", "value": 41}})
    draft = {"layers": 1, "hidden": 512, "heads": 8, "kv_heads": 2, "seq_len": 4096, "vocab": 32000}
    data["workload"]["pools"][0] |= {"speculative": {"draft": draft, "tokens": 4, "acceptance": acceptance}, **pool}
    return data


def test_speculation_prices_the_drafts_passes_and_the_verification_and_pays_off_when_accepted() -> None:
    """Every proposal accepted: 40 tokens come in 8 steps, each the priced draft passes and the 5-token verification
    (memory-bound, so barely dearer than a 1-token step): TPOT is 8 steps' price over 40. None accepted: 40 such
    steps, dearer than plain decoding's."""
    plain = study(requests={**STUDY["workload"]["requests"], "output": {"distribution": "fixed", "value": 41}})
    base = run_study(parse_study(plain, "serving.yaml")).serving
    sure = run_study(parse_study(speculative_study(1.0), "serving.yaml")).serving
    never = run_study(parse_study(speculative_study(0.0), "serving.yaml")).serving
    assert base is not None and sure is not None and never is not None
    parsed = parse_study(speculative_study(1.0), "serving.yaml")
    with _pricer(parsed) as pricer:
        steps = [pricer(iteration_shape([], [700 + 5 * k + 5], 1, 64, queries=5)) for k in range(8)]
    assert sure["tpot_mean_ps"] == pytest.approx(sum(steps) / 40, rel=1e-15)
    assert sure["speculative_tokens_per_step"] == 5 and never["speculative_tokens_per_step"] == 1
    assert sure["tpot_mean_ps"] < 0.35 * base["tpot_mean_ps"] < never["tpot_mean_ps"] * 0.35
    assert sure["weights_bytes_per_npu"] > base["weights_bytes_per_npu"]


def test_a_pipelined_replica_prices_each_stage_and_a_lone_request_crosses_them_all(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """One TP-2 x PP-2 replica: the pricer gives each stage's part (the second's including the activation's
    transfer from the first), and one request at a time sees their sum as TTFT."""
    data = study(
        pools=[{"replicas": 1, "parallelism": {"tp": 2, "pp": 2}, "scheduler": {"max_batch": 32, "token_budget": 1024}}]
    )
    parsed = parse_study(data, "serving.yaml")
    serving = run_study(parsed).serving
    assert serving is not None
    with _pricer(parsed) as pricer:
        stages = pricer(iteration_shape([(700, 700)], [], 1, 64))
    assert isinstance(stages, tuple) and len(stages) == 2 and min(stages) > 0
    assert serving["ttft_mean_ps"] == serving["ttft_p99_ps"] == sum(stages)
    data["workload"]["pools"][0]["scheduler"]["kv_capacity"] = "5MiB"  # 80 blocks of 64 KiB: 40 a batch, 45 needed
    code, err = run_study_file(run_cli, tmp_path, data)
    assert code != 0 and "each of the 2 batches in flight on the pipeline holding" in err, err
