"""Uneven work in a transformer plan: layers per pipeline stage and micro-batches per DP rank, listed or
``by_device`` (:mod:`stratasim.workload_layer.transformer.work_split`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.workload_layer.transformer.balance import balanced_config
from stratasim.workload_layer.transformer.work_split import chunk_ranges, proportional_split
from tests.helpers import RunCli
from tests.workload_layer.transformer_helpers import GPT, build

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "clusters" / "mixed_h100_a100.yaml")


def _serialized(workload: object) -> list[bytes]:
    graphs = workload.graphs(workload.npus_required())  # type: ignore[attr-defined]
    return [graph.SerializeToString(deterministic=True) for graph in graphs]


@pytest.mark.parametrize(
    "plan",
    [
        {"tp": 2, "pp": 2, "dp": 2, "global_batch": 8, "stage_layers": [2, 2], "batch_split": [4, 4]},
        {"pp": 2, "dp": 1, "global_batch": 4, "schedule": "interleaved", "virtual_stages": 2, "stage_layers": [2, 2]},
    ],
)
def test_equal_counts_build_exactly_the_even_plan(plan: dict[str, object]) -> None:
    """Listing the even split's counts changes nothing, bit for bit: the graphs and the memory."""
    even = {key: value for key, value in plan.items() if key not in ("stage_layers", "batch_split")}
    listed, plain = build(GPT, **plan), build(GPT, **even)
    assert _serialized(listed) == _serialized(plain)
    assert listed.memory_per_npu_bytes() == plain.memory_per_npu_bytes()
    assert listed.work_split() is not None and plain.work_split() is None


def test_uneven_stages_hold_their_layers_with_the_embedding_first_and_the_head_last() -> None:
    """stage_layers [3, 1]: stage 0 holds the embedding and layers 0-2, stage 1 layer 3 and the head."""
    workload = build(GPT, pp=2, stage_layers=[3, 1])
    names = [[block.name for chunk in workload._stage_chunks(stage) for block in chunk] for stage in (0, 1)]
    assert names == [["embedding", "layer0", "layer1", "layer2"], ["layer3", "head"]]
    assert workload.stage_parameters(0) > workload.stage_parameters(1) - workload.stage_parameters(0)


def test_interleaved_chunks_split_each_stage_evenly_along_the_model() -> None:
    """Stage 0 holds 4 layers in 2 chunks, stage 1 two: chunks 0 (stage 0), 1 (stage 1), 2 (stage 0), 3 (stage 1)
    run layers 0-1, 2, 3-4, 5."""
    assert chunk_ranges((4, 2), 2) == (range(0, 2), range(2, 3), range(3, 5), range(5, 6))


def test_uneven_micro_batches_run_their_own_count_per_dp_rank() -> None:
    """batch_split [3, 1]: DP rank 0 runs 3 micro-batches, rank 1 one; the gradient all-reduce is the same."""
    workload = build(GPT, dp=2, global_batch=4, batch_split=[3, 1])
    graphs = workload.graphs(2)
    blocks = [sum(1 for node in graph.nodes if node.name.endswith(" layer0")) for graph in graphs]
    assert blocks == [6, 2]  # forward and backward per micro-batch
    reductions = [[node.comm_bytes for node in graph.nodes if "gradient" in node.name] for graph in graphs]
    assert reductions[0] == reductions[1] != []


def test_proportional_split_rounds_by_largest_remainders_and_gives_each_at_least_one() -> None:
    """Quotas 16 (1/2) / (1/2 + 1/5) = 11.43 and 4.57 give 11 and 5; 3 shares at speeds 1, 1/100, 1/100 give
    (3, 0, 0) by remainders, then one each to those left without."""
    assert proportional_split(16, [2, 5]) == (11, 5)
    assert proportional_split(10, [7, 7]) == (5, 5)
    assert proportional_split(3, [1, 100, 100]) == (1, 1, 1)


def test_balancing_splits_by_the_slowest_npu_of_each_stage_and_rank() -> None:
    """pp 2 x dp 2 (NPU = pp rank + 2 dp rank), one NPU of stage 1 three times slower: stage 0 gets 3 layers of 4
    (stage 1's unit time is its slowest NPU's); then DP rank 1 holding that NPU paces at max(3 x 1, 1 x 3) = 3, as
    DP rank 0 does, so the micro-batches split evenly."""
    workload = build(GPT, pp=2, dp=2, global_batch=8, stage_layers="by_device", batch_split="by_device")
    config = balanced_config(workload.config, [1, 1, 1, 3])
    assert config.parallelism.stage_layers == (3, 1)
    assert config.parallelism.batch_split == (4, 4)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("batch_split", "[8]", "parallelism.batch_split lists 1 count(s), but the plan has 2 DP rank(s)"),
        ("batch_split", "[16,0]", "parallelism.batch_split[1] is 0: every DP rank needs at least one micro-batch"),
        ("batch_split", "[-1,17]", "parallelism.batch_split[0] is -1"),
        (
            "batch_split",
            "[10,7]",
            "parallelism.batch_split sums to 17, but must sum to global_batch / micro_batch (16)",
        ),
        ("batch_split", "fast", "expected even, by_device or a list of counts, got 'fast'"),
        ("stage_layers", "[12,12]", "parallelism.stage_layers lists 2 count(s), but the plan has 1 stage(s)"),
        ("stage_layers", "[0]", "parallelism.stage_layers[0] is 0: every stage needs at least one layer"),
        ("stage_layers", "[25]", "parallelism.stage_layers sums to 25, but must sum to model.layers (24)"),
    ],
)
def test_bad_splits_get_one_clear_message(run_cli: RunCli, key: str, value: str, said: str) -> None:
    code, out, err = run_cli("check", EXAMPLE, "--set", f"workload.parallelism.{key}={value}")
    assert code == 2 and said in err and "Traceback" not in err
    assert "1 problem" in err


def test_uneven_batches_are_refused_where_dp_ranks_meet_every_micro_batch(run_cli: RunCli) -> None:
    code, _, err = run_cli(
        "check", EXAMPLE, "--set", "workload.parallelism.zero=3", "--set", "workload.parallelism.batch_split=by_device"
    )
    assert code == 2 and "uneven micro-batches per DP rank need parallelism.zero below 3" in err


def test_by_device_needs_a_compute_section(run_cli: RunCli) -> None:
    code, _, err = run_cli(
        "check", EXAMPLE, "--set", "workload.parallelism.batch_split=by_device", "--set", "compute=null"
    )
    assert code != 0 and "needs a compute section" in err and "Traceback" not in err


def test_by_device_in_a_job_of_several_asks_for_listed_counts(run_cli: RunCli) -> None:
    """A job of a study of several is not balanced to devices: it says so, naming the job."""
    jobs = str(Path(EXAMPLE).with_name("two_jobs.yaml"))
    code, _, err = run_cli("check", jobs, "--set", "workload.jobs.0.workload.parallelism.batch_split=by_device")
    assert code != 0 and "workload.jobs[0] (job 'a')" in err and "list the counts here" in err


@pytest.mark.parametrize(
    ("sets", "said"),
    [
        (
            ["pp=2", "dp=1", "virtual_stages=2", "stage_layers=[13,11]"],
            "parallelism.stage_layers[0] (13) must be a multiple of 2 (each stage's chunks share its layers evenly",
        ),
        (
            ["tp=4", "pp=2", "batch_split=[9,7]"],
            "parallelism.batch_split[0] (9) must be a multiple of 2 (the interleaved schedule takes micro-batches in "
            "groups of parallelism.pp)",
        ),
    ],
)
def test_interleaved_splits_come_in_whole_groups(run_cli: RunCli, sets: list[str], said: str) -> None:
    args = [arg for key in [*sets, "schedule=interleaved"] for arg in ("--set", f"workload.parallelism.{key}")]
    code, _, err = run_cli("check", EXAMPLE, *args)
    assert code == 2 and said in err
