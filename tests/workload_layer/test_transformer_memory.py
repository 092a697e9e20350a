"""Peak memory per NPU of the transformer workload: hand counts, pipeline schedules, recomputation, TP."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from stratasim.workload_layer.transformer.memory import layer_activation_bytes, micro_batches_in_flight
from stratasim.workload_layer.transformer.workload import TransformerWorkload

TINY = dict(layers=2, hidden=8, heads=2, seq_len=4, vocab=10)
SMALL = dict(layers=4, hidden=8, heads=2, seq_len=4, vocab=10)
MODEL = dict(layers=4, hidden=256, heads=4, seq_len=128, vocab=1000)


def transformer(model: Mapping[str, object], **plan: object) -> TransformerWorkload:
    """Korthikanti et al.'s activations are of the unfused attention core."""
    config = {"model": model, "parallelism": plan, "attention": "unfused"}
    return TransformerWorkload(TransformerWorkload.Config.model_validate(config))


def test_single_npu_matches_hand_count() -> None:
    # Parameters: per layer 4h^2 + 2h*4h + 3h + 4h (GEMMs, biases) + 2h + 4h (row biases, layernorms)
    # = 256 + 512 + 24 + 32 + 16 + 32 = 872; 2 layers + word (10*8) + position (4*8) + final layernorm (2*8)
    # = 1744 + 128 = 1872. Activations per layer: s b h (10 + 24 + 5 a s / h) = 32 * 39 = 1248.
    memory = transformer(TINY).stage_memory(0)
    assert (memory.weights_bytes, memory.gradients_bytes, memory.optimizer_bytes) == (2 * 1872, 2 * 1872, 12 * 1872)
    assert memory.activations_bytes == 2 * 1248
    assert transformer(TINY).memory_per_npu_bytes() == [16 * 1872 + 2 * 1248] == [32448]


def test_pipeline_and_tensor_parallel_match_hand_count() -> None:
    workload = transformer(SMALL, tp=2, pp=2, global_batch=4)  # m = 4 micro-batches, 1F1B
    # Per layer per TP rank: (256 + 512 + 24 + 32) / 2 + 16 + 32 = 460, two layers per stage = 920; embeddings
    # padded to ceil(10 / 2) * 8 = 40 on both ends; position embeddings 32 on stage 0, final layernorm 16 on 1.
    # Activations per layer: 10 * 32 + 24 * 32 / 2 + 5 * 2 * 4 * 4 / 2 = 784; stage 0 holds 2, stage 1 one.
    stage0, stage1 = 16 * (920 + 40 + 32) + 784 * 2 * 2, 16 * (920 + 16 + 40) + 784 * 2 * 1
    assert (stage0, stage1) == (19008, 17184)
    assert workload.memory_per_npu_bytes() == [stage0, stage0, stage1, stage1]
    gpipe = transformer(SMALL, tp=2, pp=2, global_batch=4, schedule="gpipe")
    assert [gpipe.stage_memory(p).activations_bytes for p in range(2)] == [784 * 2 * 4] * 2
    full = transformer(SMALL, tp=2, pp=2, global_batch=4, recompute="full")
    # Layer inputs 2 s b h = 64 bytes per layer and micro-batch in flight, plus one layer's full activations.
    assert [full.stage_memory(p).activations_bytes for p in range(2)] == [64 * 2 * 2 + 784, 64 * 2 * 1 + 784]


def test_korthikanti_formula_without_tensor_parallelism() -> None:
    s, b, h, a = 2048, 4, 4096, 32
    assert layer_activation_bytes(s, b, h, a, tp=1) == s * b * h * 34 + 5 * a * s * s * b
    assert layer_activation_bytes(s, b, h, a, tp=8) == s * b * h * 10 + (24 * s * b * h + 5 * a * s * s * b) // 8


@pytest.mark.parametrize("pp, global_batch", [(2, 8), (4, 8), (4, 4), (4, 2)])
def test_1f1b_never_holds_more_than_gpipe(pp: int, global_batch: int) -> None:
    one_f_one_b = transformer(MODEL, pp=pp, global_batch=global_batch)
    gpipe = transformer(MODEL, pp=pp, global_batch=global_batch, schedule="gpipe")
    for stage in range(pp):
        assert one_f_one_b.stage_memory(stage).total_bytes <= gpipe.stage_memory(stage).total_bytes
    first_1f1b, first_gpipe = one_f_one_b.stage_memory(0), gpipe.stage_memory(0)
    if global_batch > pp:
        assert first_1f1b.total_bytes < first_gpipe.total_bytes
        assert first_gpipe.activations_bytes * pp == first_1f1b.activations_bytes * global_batch
    else:
        assert first_1f1b == first_gpipe


def test_micro_batches_in_flight() -> None:
    assert [micro_batches_in_flight("1f1b", p, 4, 8) for p in range(4)] == [4, 3, 2, 1]
    assert [micro_batches_in_flight("1f1b", p, 4, 2) for p in range(4)] == [2, 2, 2, 1]
    assert [micro_batches_in_flight("gpipe", p, 4, 8) for p in range(4)] == [8] * 4
    with pytest.raises(ValueError, match="zero-bubble"):
        micro_batches_in_flight("zero-bubble", 0, 4, 8)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_full_recompute_lowers_activation_memory(schedule: str) -> None:
    none = transformer(MODEL, pp=2, global_batch=8, schedule=schedule)
    full = transformer(MODEL, pp=2, global_batch=8, schedule=schedule, recompute="full")
    for stage in range(2):
        kept, recomputed = none.stage_memory(stage), full.stage_memory(stage)
        assert recomputed.activations_bytes < kept.activations_bytes
        assert recomputed.weights_bytes == kept.weights_bytes and recomputed.optimizer_bytes == kept.optimizer_bytes


def test_tensor_parallelism_halves_the_weights_per_npu() -> None:
    # Only layernorms, row-parallel biases and position embeddings are replicated: ~1% of this model.
    one, two = transformer(MODEL).stage_memory(0), transformer(MODEL, tp=2).stage_memory(0)
    assert two.weights_bytes == pytest.approx(one.weights_bytes / 2, rel=0.02)
    assert two.weights_bytes > one.weights_bytes / 2  # the replicated part
    assert two.optimizer_bytes == pytest.approx(one.optimizer_bytes / 2, rel=0.02)


def test_one_entry_per_npu_in_rank_order() -> None:
    workload = transformer(MODEL, tp=2, pp=2, dp=2, global_batch=8)
    memory = workload.memory_per_npu_bytes()
    assert len(memory) == workload.npus_required() == 8
    first, last = workload.stage_memory(0).total_bytes, workload.stage_memory(1).total_bytes
    assert first != last
    # npu = tp_rank + tp * (pp_rank + pp * dp_rank)
    assert memory == [first, first, last, last, first, first, last, last]
