"""A kernel's operator on one device of a group: its FLOPs are the whole kernel's divided by the group when the
split dimension divides evenly (and the busiest device's share, rounded up, when not); backward operators."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.kernel import operators
from stratasim.workload_layer.dataflow.graph import GraphError, Kernel, Scheme
from stratasim.workload_layer.dataflow.schemes import (
    attention_schemes,
    elementwise_schemes,
    embedding_schemes,
    gemm_schemes,
)
from stratasim.workload_layer.dataflow.sharding import backward_operators, sharded_operator

sizes = st.integers(1, 64)
groups = st.integers(1, 16)


@given(sizes, sizes, sizes, sizes, groups, st.sampled_from(gemm_schemes(False)))
def test_a_gemm_divides_exactly_when_divisible(
    m: int, k: int, n: int, batch: int, devices: int, scheme: Scheme
) -> None:
    """FLOPs per device = 2 B M K N / devices when ``devices`` divides the split dimension, else the rounded-up
    share of it."""
    kernel = Kernel("mm", operators.gemm(m, k, n, batch=batch), gemm_schemes(False))
    part = sharded_operator(kernel, scheme, devices)
    dims = {"m": m, "k": k, "n": n, "batch": batch}
    if scheme.divides is None:
        assert part.flops == kernel.flops
        return
    split = dims[scheme.divides]
    share = -(-split // devices)
    assert part.flops == kernel.flops // split * share
    if split % devices == 0:
        assert part.flops * devices == kernel.flops


@given(st.lists(st.integers(1, 32), min_size=1, max_size=3), st.integers(0, 9), groups)
def test_an_elementwise_operator_divides_its_elements(shape: list[int], per: int, devices: int) -> None:
    """FLOPs and bytes per device = the per-element counts times ceil(elements / devices)."""
    op = operators.elementwise(shape, flops_per_element=per, inputs=2)
    kernel = Kernel("pw", op, elementwise_schemes(2))
    part = sharded_operator(kernel, kernel.scheme("split_S0"), devices)
    elements = op.elementwise.elements
    share = -(-elements // devices)
    assert (part.elementwise.elements, part.flops, part.bytes) == (share, per * share, op.bytes // elements * share)
    if elements % devices == 0:
        assert part.flops * devices == op.flops and part.bytes * devices == op.bytes


@pytest.mark.parametrize("devices", [1, 2, 4, 8])
def test_attention_splits_its_heads(devices: int) -> None:
    op = operators.attention(8, 256, 256, 64, causal=True)
    part = sharded_operator(Kernel("attn", op, attention_schemes()), attention_schemes()[0], devices)
    assert part.attention.batch == 8 // devices
    assert part.flops * devices == op.flops


def test_attention_heads_must_keep_whole_key_value_groups() -> None:
    op = operators.attention(8, 128, 128, 64, group=4)
    kernel = Kernel("attn", op, attention_schemes())
    assert sharded_operator(kernel, attention_schemes()[0], 2).attention.batch == 4
    with pytest.raises(GraphError, match=r"kernel 'attn': .* 2 per device is not a whole number of key-value groups"):
        sharded_operator(kernel, attention_schemes()[0], 4)


def test_a_replicated_kernel_runs_whole_on_each_device() -> None:
    kernel = Kernel("mm", operators.gemm(64, 64, 64), gemm_schemes(True))
    assert sharded_operator(kernel, kernel.scheme("replicate"), 8) == kernel.operator


def test_a_scheme_must_divide_a_dimension_the_operator_has() -> None:
    kernel = Kernel("mm", operators.gemm(64, 64, 64), gemm_schemes(True))
    with pytest.raises(GraphError, match=r"kernel 'mm': scheme 'vocab' divides 'elements', which a gemm operator"):
        sharded_operator(kernel, embedding_schemes()[0], 2)


@given(sizes, sizes, sizes, st.integers(1, 4))
def test_a_gemm_backward_is_twice_its_forward(m: int, k: int, n: int, batch: int) -> None:
    """Input gradient ``[M, N] x [N, K]`` and weight gradient ``[K, M] x [M, N]``: 4 B M K N FLOPs."""
    op = operators.gemm(m, k, n, batch=batch, name="mm")
    dgrad, wgrad = backward_operators(op)
    assert dgrad.flops + wgrad.flops == 2 * op.flops
    assert (dgrad.name, wgrad.name) == ("mm.dgrad", "mm.wgrad")


def test_an_elementwise_backward_reads_the_incoming_gradient_too() -> None:
    op = operators.elementwise((16, 16), inputs=2, flops_per_element=3, name="add")
    (grad,) = backward_operators(op)
    assert grad.bytes == op.bytes // 3 * 4 and grad.flops == op.flops and grad.name == "add.backward"


def test_attention_backward_is_its_gradient_kernel() -> None:
    op = operators.attention(4, 128, 128, 64, causal=True)
    (grad,) = backward_operators(op)
    assert grad.attention.backward and grad.flops > 2 * op.flops


def test_an_operator_without_a_backward_pass_is_named() -> None:
    op = operators.conv2d(1, 8, 8, 4, 4, 3, 3, name="conv")
    with pytest.raises(ValueError, match="operator 'conv': no backward pass is known for a conv operator"):
        backward_operators(op)
