"""Operator builders: FLOP and byte counts, shapes, dtype sizes and parsing, validation, signatures."""

from __future__ import annotations

import pytest

from stratasim.kernel import operator_shapes, operators
from stratasim.v1 import compute_pb2


def test_gemm_counts_flops_and_bytes() -> None:
    op = operators.gemm(64, 128, 32, name="proj")
    assert operators.kind_of(op) == compute_pb2.GEMM
    assert operator_shapes.shape_of(op) == operator_shapes.GemmShape(batch=1, m=64, k=128, n=32)
    assert not op.gemm.batch  # left unset when 1, so a batch of one has the same signature as no batch
    assert op.dtype == compute_pb2.BF16
    assert op.flops == 2 * 64 * 128 * 32  # 524288
    assert op.bytes == (64 * 128 + 128 * 32 + 64 * 32) * 2  # A, B read once, C written once: 28672
    assert op.name == "proj"


def test_batched_gemm_has_leading_batch_and_scales_counts() -> None:
    op = operators.gemm(8, 16, 4, dtype=compute_pb2.FP32, batch=3)
    assert operator_shapes.shape_of(op) == operator_shapes.GemmShape(batch=3, m=8, k=16, n=4)
    assert operator_shapes.shape_of(op).dims() == (3, 8, 16, 4)
    assert op.flops == 2 * 3 * 8 * 16 * 4
    assert op.bytes == 3 * (8 * 16 + 16 * 4 + 8 * 4) * 4


def test_conv2d_counts_flops_and_unpadded_input_bytes() -> None:
    # ResNet's first layer: 64 7x7 filters over 3 channels, stride 2, 112x112 outputs from 229x229 inputs.
    op = operators.conv2d(1, 64, 3, 112, 112, 7, 7, stride=2, dtype=compute_pb2.INT8, name="conv1")
    assert operators.kind_of(op) == compute_pb2.CONV
    assert operator_shapes.shape_of(op) == operator_shapes.ConvShape(n=1, k=64, c=3, p=112, q=112, r=7, s=7, stride=2)
    assert (operator_shapes.shape_of(op).height, operator_shapes.shape_of(op).width) == (229, 229)
    assert op.flops == 2 * 64 * 3 * 112 * 112 * 7 * 7
    assert op.bytes == 3 * 229 * 229 + 64 * 3 * 7 * 7 + 64 * 112 * 112
    with pytest.raises(ValueError, match="stride must be a positive integer"):
        operators.conv2d(1, 1, 1, 1, 1, 1, 1, stride=0)


def test_elementwise_counts_flops_and_bytes() -> None:
    op = operators.elementwise([4, 1024], dtype=compute_pb2.FP32, flops_per_element=3, inputs=2, name="add")
    assert operators.kind_of(op) == compute_pb2.ELEMENTWISE
    assert operator_shapes.shape_of(op) == operator_shapes.ElementwiseShape(elements=4 * 1024)
    assert op.flops == 4096 * 3
    assert op.bytes == 4096 * (2 + 1) * 4  # two inputs read, one output written
    assert op.name == "add"


def test_elementwise_defaults_and_copy() -> None:
    assert operators.elementwise([10]).bytes == 10 * 2 * 2
    copy = operators.elementwise([10], flops_per_element=0)
    assert (copy.flops, copy.bytes) == (0, 40)


@pytest.mark.parametrize(
    ("dtype", "size"),
    [
        (compute_pb2.BF16, 2),
        (compute_pb2.FP16, 2),
        (compute_pb2.FP32, 4),
        (compute_pb2.TF32, 4),
        (compute_pb2.FP64, 8),
        (compute_pb2.FP8, 1),
        (compute_pb2.INT8, 1),
    ],
)
def test_dtype_bytes(dtype: compute_pb2.DType.ValueType, size: int) -> None:
    assert operators.dtype_bytes(dtype) == size
    assert operators.elementwise([5], dtype=dtype, inputs=0).bytes == 5 * size


def test_dtype_bytes_rejects_unspecified() -> None:
    with pytest.raises(ValueError, match="dtype_unspecified"):
        operators.dtype_bytes(compute_pb2.DTYPE_UNSPECIFIED)
    with pytest.raises(ValueError, match="expected one of"):
        operators.gemm(1, 1, 1, dtype=compute_pb2.DTYPE_UNSPECIFIED)


@pytest.mark.parametrize(
    ("text", "dtype"),
    [
        ("bf16", compute_pb2.BF16),
        ("BF16", compute_pb2.BF16),
        (" Fp16 ", compute_pb2.FP16),
        ("fp32", compute_pb2.FP32),
        ("fp8", compute_pb2.FP8),
        ("INT8", compute_pb2.INT8),
        ("fp64", compute_pb2.FP64),
        ("tf32", compute_pb2.TF32),
    ],
)
def test_parse_dtype(text: str, dtype: compute_pb2.DType.ValueType) -> None:
    assert operators.parse_dtype(text) == dtype


@pytest.mark.parametrize("text", ["fp7", "", "dtype_unspecified", "bfloat16", 16, None])
def test_parse_dtype_error_lists_choices(text: object) -> None:
    with pytest.raises(ValueError) as info:
        operators.parse_dtype(text)
    message = str(info.value)
    assert repr(text) in message
    for choice in ("bf16", "fp16", "fp32", "fp8", "int8", "fp64", "tf32"):
        assert choice in message


def test_dtype_name_never_raises() -> None:
    assert operators.dtype_name(compute_pb2.INT8) == "int8"
    assert operators.dtype_name(compute_pb2.DType.ValueType(99)) == "dtype #99"


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"m": 0, "k": 1, "n": 1}, "m"),
        ({"m": 1, "k": -2, "n": 1}, "k"),
        ({"m": 1, "k": 1, "n": 0}, "n"),
        ({"m": 1, "k": 1, "n": 1, "batch": 0}, "batch"),
        ({"m": True, "k": 1, "n": 1}, "m"),
        ({"m": 1.5, "k": 1, "n": 1}, "m"),
    ],
)
def test_gemm_rejects_bad_dimensions(kwargs: dict[str, object], argument: str) -> None:
    with pytest.raises(ValueError, match=rf"^{argument} must be a positive integer"):
        operators.gemm(**kwargs)  # type: ignore[arg-type]


def test_elementwise_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^shape\[1\] must be a positive integer, got 0"):
        operators.elementwise([4, 0])
    with pytest.raises(ValueError, match="non-empty sequence"):
        operators.elementwise([])
    with pytest.raises(ValueError, match="non-empty sequence"):
        operators.elementwise(8)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^flops_per_element must be a non-negative integer"):
        operators.elementwise([4], flops_per_element=-1)
    with pytest.raises(ValueError, match="^inputs must be a non-negative integer"):
        operators.elementwise([4], inputs=-1)


def test_counts_beyond_uint64_are_rejected() -> None:
    with pytest.raises(ValueError, match="'huge' is too large"):
        operators.gemm(2**22, 2**22, 2**22, name="huge")


def test_signature_is_deterministic_and_distinguishes_operators() -> None:
    a = operators.gemm(16, 32, 64)
    assert operators.signature(a) == operators.signature(operators.gemm(16, 32, 64))
    assert operators.signature(a) == a.SerializeToString(deterministic=True)
    assert operators.signature(a) != operators.signature(operators.gemm(16, 32, 64, dtype=compute_pb2.FP16))
    assert operators.signature(a) != operators.signature(operators.gemm(16, 32, 32))
    assert operators.signature(operators.gemm(2, 2, 2, batch=1)) == operators.signature(operators.gemm(2, 2, 2))
    # Kinds are told apart by the shape they carry, not by a positional list whose length happens to match.
    assert operators.signature(operators.gemm(2, 3, 4)) != operators.signature(operators.elementwise([2, 3, 4]))
    assert operators.signature(operators.conv2d(1, 2, 3, 4, 5, 6, 7)) == operators.signature(
        operators.conv2d(1, 2, 3, 4, 5, 6, 7, stride=1)
    )


def test_shape_of_fills_unset_optional_sizes() -> None:
    # A hand-written descriptor leaving batch and stride unset means one product and a stride of 1.
    gemm = compute_pb2.OperatorDesc(gemm=compute_pb2.GemmShape(m=2, k=3, n=4))
    assert operator_shapes.shape_of(gemm) == operator_shapes.GemmShape(batch=1, m=2, k=3, n=4)
    assert operator_shapes.shape_of(gemm).dims() == (2, 3, 4)
    conv = compute_pb2.OperatorDesc(conv=compute_pb2.ConvShape(n=1, k=2, c=3, p=4, q=5, r=6, s=7))
    assert operator_shapes.shape_of(conv).dims() == (1, 2, 3, 4, 5, 6, 7, 1)


@pytest.mark.parametrize(
    ("op", "field", "text"),
    [
        (compute_pb2.OperatorDesc(flops=10), "shape", "carries no shape"),
        (compute_pb2.OperatorDesc(gemm=compute_pb2.GemmShape(m=2, n=4)), "gemm.k", "gemm.k must be a positive size"),
        (compute_pb2.OperatorDesc(conv=compute_pb2.ConvShape(n=1, k=2, c=3, p=4, q=5, r=6)), "conv.s", "conv.s must"),
        (compute_pb2.OperatorDesc(elementwise=compute_pb2.ElementwiseShape()), "elementwise.elements", "got 0"),
    ],
)
def test_shape_of_names_the_unusable_field(op: compute_pb2.OperatorDesc, field: str, text: str) -> None:
    with pytest.raises(operator_shapes.ShapeError, match=text) as raised:
        operator_shapes.shape_of(op)
    assert raised.value.field == field
    assert operators.kind_of(op) == (
        compute_pb2.OPERATOR_KIND_UNSPECIFIED
        if field == "shape"
        else {"g": compute_pb2.GEMM, "c": compute_pb2.CONV, "e": compute_pb2.ELEMENTWISE}[field[0]]
    )
