"""Fused attention (FlashAttention-style): exact FLOPs and HBM bytes, causal block counts, shapes on the wire."""

from __future__ import annotations

from fractions import Fraction

import pytest

from stratasim.kernel import operator_shapes, operators
from stratasim.v1 import compute_pb2


def test_non_causal_forward_counts_two_products_the_softmax_and_q_k_v_o_and_statistics() -> None:
    # 4 query heads, 256 queries, 512 keys, head size 64, bf16.
    op = operators.attention(4, 256, 512, 64, name="attn")
    assert operators.kind_of(op) == compute_pb2.ATTENTION
    assert operator_shapes.shape_of(op) == operator_shapes.AttentionShape(4, 256, 512, 64, 1, False, False)
    scores = 4 * 256 * 512
    assert op.flops == 2 * (2 * scores * 64) + 5 * scores  # Q·Kᵀ and P·V, 5 per score of online softmax
    q = 4 * 256 * 64 * 2
    kv = 4 * 512 * 64 * 2
    assert op.bytes == q + 2 * kv + q + 4 * 256 * 4  # Q, K, V read; O and fp32 log-sum-exp written; no scores


def test_backward_counts_five_products_and_reads_dO_and_statistics() -> None:
    op = operators.attention(4, 256, 512, 64, backward=True)
    scores = 4 * 256 * 512
    # S recomputed, dV, dP, dQ, dK; softmax gradient 5 per score; D = rowsum(dO ∘ O), 2 d per query.
    assert op.flops == 5 * (2 * scores * 64) + 5 * scores + 2 * 4 * 256 * 64
    q, kv, stats = 4 * 256 * 64 * 2, 4 * 512 * 64 * 2, 4 * 256 * 4
    assert op.bytes == (3 * q + 2 * kv + stats) + (q + 2 * kv)  # Q, O, dO, K, V, stats in; dQ, dK, dV out


def test_causal_square_runs_the_blocks_on_and_below_the_diagonal() -> None:
    # 512 x 512 in 128-blocks: 4 x 4 blocks, 1 + 2 + 3 + 4 = 10 of them computed (the diagonal ones whole).
    shape = operator_shapes.shape_of(operators.attention(2, 512, 512, 128, causal=True))
    assert isinstance(shape, operator_shapes.AttentionShape)
    assert shape.scores == 2 * 10 * 128 * 128
    assert shape.causal_share == Fraction(10, 16)
    op = operators.attention(2, 512, 512, 128, causal=True)
    assert op.flops == 2 * 10 * 128 * 128 * (4 * 128 + 5)


def test_causal_queries_are_aligned_to_the_end_of_the_keys() -> None:
    # A prefill of 200 tokens after 100 cached: block 0 (queries 0..127, positions 100..227) needs key blocks 0, 1;
    # block 1 (72 queries, positions 228..299) key blocks 0..2, the last cut to the 300 keys.
    shape = operator_shapes.shape_of(operators.attention(1, 200, 300, 64, causal=True))
    assert isinstance(shape, operator_shapes.AttentionShape)
    assert shape.scores == 128 * 256 + 72 * 300
    # A decode step: one query sees every cached key.
    decode = operators.attention(8, 1, 1000, 128, causal=True, group=4)
    assert decode.flops == 8 * 1000 * (4 * 128 + 5)
    # K and V are read once per key-value head (8 / 4 = 2 of them): the cache read that bounds decode.
    assert decode.bytes == 8 * 128 * 2 + 2 * (2 * 1000 * 128 * 2) + 8 * 128 * 2 + 8 * 4


def test_products_are_the_kernels_batched_gemms() -> None:
    forward = operator_shapes.shape_of(operators.attention(3, 256, 384, 64))
    backward = operator_shapes.shape_of(operators.attention(3, 256, 384, 64, backward=True))
    assert isinstance(forward, operator_shapes.AttentionShape) and isinstance(backward, operator_shapes.AttentionShape)
    assert forward.products() == (
        operator_shapes.GemmShape(3, 256, 64, 384),
        operator_shapes.GemmShape(3, 256, 384, 64),
    )
    assert len(backward.products()) == 5
    assert all(2 * p.batch * p.m * p.k * p.n == 2 * 3 * 256 * 384 * 64 for p in backward.products())


def test_bad_attentions_are_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="head_dim must be a positive integer"):
        operators.attention(1, 1, 1, 0)
    with pytest.raises(ValueError, match="divisible by group"):
        operators.attention(6, 8, 8, 8, group=4)
    with pytest.raises(ValueError, match="queries .* at most keys"):
        operators.attention(1, 9, 8, 8, causal=True)
    op = operators.attention(1, 8, 8, 8)
    op.attention.keys = 0
    with pytest.raises(operator_shapes.ShapeError, match="attention.keys must be a positive size"):
        operator_shapes.shape_of(op)
