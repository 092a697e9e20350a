"""ZeRO-3's shard casts in mixed precision: what each moves, what it waits for, and when a study runs them."""

from __future__ import annotations

import pytest

from stratasim.cli import main
from stratasim.compute_layer.measured.backend import MeasuredCompute
from stratasim.config.study_file import load_study
from stratasim.study.shard_casts import with_shard_casts
from stratasim.system_layer.operators import OperatorPricer
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.workload_layer.transformer_helpers import unrolled_graphs

MODEL = dict(layers=2, hidden=256, heads=4, seq_len=128, vocab=1000)


def graph(**keys: object) -> workload_pb2.ExecutionGraph:
    plan = {"dp": 2, "global_batch": 4, "zero": 3, "shard_casts": True} | keys.pop("parallelism", {})
    config = TransformerWorkload.Config.model_validate({"model": MODEL, "parallelism": plan} | keys)
    workload = TransformerWorkload(config)
    return unrolled_graphs(workload.graphs(workload.npus_required()))[0]


def named(found: workload_pb2.ExecutionGraph, part: str) -> list[workload_pb2.Node]:
    return [node for node in found.nodes if part in node.name]


def test_each_gather_waits_for_its_shard_cast_of_six_bytes_a_parameter() -> None:
    found = graph()
    gathers = named(found, "zero all-gather")
    layer = 12 * 256**2 + 13 * 256  # a layer's parameters: its projections' weights and biases, two norms'
    shard = layer // 2
    casts = {node.id: node for node in named(found, "zero parameter cast")}
    assert len(casts) == len(gathers) and all(set(casts) & set(gather.data_deps) for gather in gathers)
    layer_casts = [cast for cast in casts.values() if cast.op.elementwise.elements == shard]
    assert layer_casts and layer_casts[0].op.bytes == shard * 6  # fp32 read, bf16 written
    assert layer_casts[0].op.dtype == compute_pb2.BF16 and layer_casts[0].op.elementwise.function == compute_pb2.COPY


def test_each_reduced_shard_is_accumulated_into_fp32_before_the_optimizer_step() -> None:
    found = graph()
    scatters = {node.id for node in named(found, "zero reduce-scatter")}
    accumulates = named(found, "zero gradient accumulate")
    assert len(accumulates) == len(scatters) and {a.data_deps[0] for a in accumulates} == scatters
    assert all(a.op.bytes == a.op.elementwise.elements * 10 for a in accumulates)  # bf16 + fp32 read, fp32 written
    (step,) = named(found, "optimizer step")
    assert {a.id for a in accumulates} <= set(step.data_deps)


def test_a_cast_takes_what_the_measured_pricer_gives_it() -> None:
    (cast,) = named(graph(), "mb0 layer0 fwd zero parameter cast")
    assert cast.op.elementwise.elements == 394_880 and cast.op.bytes == 2_369_280
    (priced,) = OperatorPricer(MeasuredCompute(), "h100").durations_ps([cast.op])
    assert priced == 2_031_456  # 2.03 us: 1.17 TB/s for 2.37 MB on the h100's measured copy curve


@pytest.mark.parametrize(
    "keys", [{"precision": "fp32"}, {"parallelism": {"shard_casts": False}}, {"parallelism": {"zero": 1}}]
)
def test_fp32_training_an_unasked_plan_and_other_zero_stages_cast_nothing(keys: dict[str, object]) -> None:
    found = graph(**keys)
    assert not named(found, "cast") and not named(found, "accumulate")


@pytest.mark.parametrize(("backend", "casts"), [("measured", True), ("roofline", False)])
def test_unset_the_key_follows_the_compute_backend(backend: str, casts: bool) -> None:
    study = load_study("examples/calibration/mpt_7b_h100.yaml", [f"compute.backend={backend}"])
    assert with_shard_casts(study).workload.config.parallelism.shard_casts is casts  # type: ignore[attr-defined]


def test_a_key_that_is_no_boolean_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", "examples/calibration/mpt_7b_h100.yaml", "--set", "workload.parallelism.shard_casts=maybe"]
    assert main(args) != 0
    _, err = capsys.readouterr()
    assert "workload.parallelism.shard_casts: input should be a valid boolean" in err and "Traceback" not in err
