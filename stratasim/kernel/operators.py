"""Operator descriptors with their FLOP and byte counts filled in, shared by the workload and compute layers.

A builder returns a :class:`~stratasim.v1.compute_pb2.OperatorDesc` whose ``flops`` (floating-point or
integer operations, a multiply-add counting as two) and ``bytes`` (the least main-memory traffic: every input
read once and every output written once) are already computed, so a backend that only understands totals
(roofline) never needs to know the operator kind. Richer backends read the shape, through the one decoder
:func:`~stratasim.kernel.operator_shapes.shape_of`: the case of the descriptor's ``shape`` oneof is the kind, and its fields are named sizes.
A new operator kind is added by declaring its shape message in ``proto/stratasim/v1/compute.proto``, writing a
builder here that fills the same two totals and teaching :func:`~stratasim.kernel.operator_shapes.shape_of` to read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from types import MappingProxyType
from typing import TypeAlias

from stratasim.kernel.elementwise_functions import (
    ELEMENTWISE_FUNCTIONS,
    ElementwiseFunction,
    function_choices,
)
from stratasim.kernel.operator_shapes import AttentionShape, OperatorKind
from stratasim.v1 import compute_pb2

__all__ = [
    "DType",
    "DTYPES",
    "dtype_bytes",
    "dtype_name",
    "parse_dtype",
    "gemm",
    "conv2d",
    "elementwise",
    "attention",
    "signature",
    "kind_of",
    "kind_name",
    "basis_name",
]

DType: TypeAlias = compute_pb2.DType.ValueType
"""A value of the ``stratasim.v1.DType`` enum, e.g. ``compute_pb2.BF16``."""

# Storage size of one element in bytes; TF32 values live in 32-bit registers and memory.
_DTYPE_BYTES: MappingProxyType[DType, int] = MappingProxyType(
    {
        compute_pb2.BF16: 2,
        compute_pb2.FP16: 2,
        compute_pb2.FP32: 4,
        compute_pb2.TF32: 4,
        compute_pb2.FP64: 8,
        compute_pb2.FP8: 1,
        compute_pb2.INT8: 1,
    }
)

DTYPES: tuple[DType, ...] = tuple(_DTYPE_BYTES)
"""Every dtype an operator may have (all but ``DTYPE_UNSPECIFIED``)."""

# The proto field is uint64; a larger count cannot travel on the wire.
_UINT64_MAX = 2**64 - 1


def dtype_name(dtype: DType) -> str:
    """The lower-case name of a dtype for messages (``"bf16"``); never raises, even for unknown values."""
    if dtype in compute_pb2.DType.values():
        return compute_pb2.DType.Name(dtype).lower()
    return f"dtype #{dtype}"


def _choices() -> str:
    return ", ".join(dtype_name(dtype) for dtype in DTYPES)


def dtype_bytes(dtype: DType) -> int:
    """Size of one element of ``dtype`` in bytes; raises ValueError for ``DTYPE_UNSPECIFIED`` or unknown values."""
    size = _DTYPE_BYTES.get(dtype)
    if size is None:
        raise ValueError(f"{dtype_name(dtype)} has no element size; expected one of {_choices()}")
    return size


def parse_dtype(text: object) -> DType:
    """Read a dtype written as people write it (``"bf16"``, ``"FP32"``; case-insensitive)."""
    key = text.strip().lower() if isinstance(text, str) else None
    for dtype in DTYPES:
        if dtype_name(dtype) == key:
            return dtype
    raise ValueError(f"unknown dtype {text!r}; expected one of {_choices()}")


def _positive(argument: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{argument} must be a positive integer, got {value!r}")
    return value


def _non_negative(argument: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{argument} must be a non-negative integer, got {value!r}")
    return value


def _describe(
    field: str, sizes: dict[str, int], dtype: DType, flops: int, size: int, name: str
) -> compute_pb2.OperatorDesc:
    """A descriptor whose ``shape`` is its ``field`` case with ``sizes`` (a zero size is left unset)."""
    if flops > _UINT64_MAX or size > _UINT64_MAX:
        raise ValueError(f"operator {name or field!r} is too large: {flops} FLOPs and {size} bytes must fit in 64 bits")
    op = compute_pb2.OperatorDesc(dtype=dtype, flops=flops, bytes=size, name=name)
    shape = getattr(op, field)
    shape.SetInParent()
    for key, value in sizes.items():
        setattr(shape, key, value)
    return op


def gemm(
    m: int, k: int, n: int, dtype: DType = compute_pb2.BF16, batch: int = 1, name: str = ""
) -> compute_pb2.OperatorDesc:
    """A (batched) matrix product ``[B, M, K] x [B, K, N] -> [B, M, N]``.

    FLOPs = 2·B·M·K·N (one multiply and one add per term); bytes = B·(M·K + K·N + M·N)·element size, reading
    both inputs and writing the output once. ``batch`` is left unset when it is 1, so equal operators have
    equal signatures.
    """
    for argument, value in (("m", m), ("k", k), ("n", n), ("batch", batch)):
        _positive(argument, value)
    size = dtype_bytes(dtype)
    flops = 2 * batch * m * k * n
    traffic = batch * (m * k + k * n + m * n) * size
    return _describe("gemm", {"m": m, "k": k, "n": n, "batch": 0 if batch == 1 else batch}, dtype, flops, traffic, name)


def conv2d(
    n: int,
    k: int,
    c: int,
    p: int,
    q: int,
    r: int,
    s: int,
    stride: int = 1,
    dtype: DType = compute_pb2.BF16,
    name: str = "",
) -> compute_pb2.OperatorDesc:
    """A 2-D convolution of ``N`` ``C``-channel images with ``K`` ``R x S`` filters into ``P x Q`` outputs.

    FLOPs = 2·N·K·C·P·Q·R·S; bytes = (N·C·H·W + K·C·R·S + N·K·P·Q)·element size with the unpadded input
    H = (P - 1)·stride + R rows and W = (Q - 1)·stride + S columns. ``stride`` is left unset when it is 1, so
    equal operators have equal signatures.
    """
    sizes = (("n", n), ("k", k), ("c", c), ("p", p), ("q", q), ("r", r), ("s", s), ("stride", stride))
    for argument, value in sizes:
        _positive(argument, value)
    height, width = (p - 1) * stride + r, (q - 1) * stride + s
    flops = 2 * n * k * c * p * q * r * s
    traffic = (n * c * height * width + k * c * r * s + n * k * p * q) * dtype_bytes(dtype)
    shape = dict(sizes) | {"stride": 0 if stride == 1 else stride}
    return _describe("conv", shape, dtype, flops, traffic, name)


def elementwise(
    shape: Sequence[int],
    dtype: DType = compute_pb2.BF16,
    flops_per_element: int = 1,
    inputs: int = 1,
    name: str = "",
    *,
    function: ElementwiseFunction = compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED,
) -> compute_pb2.OperatorDesc:
    """An operator producing one output element per element of ``shape`` from ``inputs`` same-shaped tensors.

    FLOPs = elements·``flops_per_element``; bytes = elements·(``inputs`` + 1)·element size (each input read
    once, the output written once). ``inputs=0`` describes a fill; ``flops_per_element=0`` a copy. The wire
    carries the element count and ``function``, what the operator computes (e.g. ``compute_pb2.RMSNORM``), which
    a backend with a model per function prices it by; a builder that does not know it leaves it unspecified.
    """
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or not shape:
        raise ValueError(f"shape must be a non-empty sequence of positive integers, got {shape!r}")
    dims = [_positive(f"shape[{i}]", dim) for i, dim in enumerate(shape)]
    _non_negative("flops_per_element", flops_per_element)
    _non_negative("inputs", inputs)
    if function != compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED and function not in ELEMENTWISE_FUNCTIONS:
        raise ValueError(f"function must be an element-wise function ({function_choices()}), got {function!r}")
    size = dtype_bytes(dtype)
    elements = prod(dims)
    flops = elements * flops_per_element
    sizes = {"elements": elements, "function": function}
    return _describe("elementwise", sizes, dtype, flops, elements * (inputs + 1) * size, name)


_SOFTMAX_FLOPS = 5
"""FLOPs per computed score of the on-chip softmax (scale, running max, subtract, exp, running sum) forward, and of
its gradient backward (P recomputed from the row statistics, dS = P (dP - D) scaled): the unfused softmax's count."""

_STATS_BYTES = 4
"""One fp32 row statistic (the log-sum-exp of a query's scores) per query, written forward and read backward."""


def attention(
    batch: int,
    queries: int,
    keys: int,
    head_dim: int,
    *,
    causal: bool = False,
    backward: bool = False,
    group: int = 1,
    dtype: DType = compute_pb2.BF16,
    name: str = "",
) -> compute_pb2.OperatorDesc:
    """Fused attention (FlashAttention, Dao et al. 2022; FlashAttention-2, Dao 2023) over ``batch`` query heads,
    ``queries`` queries each against ``keys`` keys of size ``head_dim``; ``group`` query heads share each key-value
    head (grouped-query attention), so there are ``batch / group`` of those.

    With ``n`` the scores computed (:attr:`~stratasim.kernel.operator_shapes.AttentionShape.scores`: ``batch · queries · keys``, or causally only the
    :data:`~stratasim.kernel.operator_shapes.ATTENTION_BLOCK`-square blocks not wholly above the diagonal), FLOPs = ``n (4 head_dim + 5)`` forward
    (Q·Kᵀ and P·V, the online softmax) and ``n (10 head_dim + 5) + 2 batch queries head_dim`` backward (S recomputed,
    dV, dP, dQ and dK, the softmax's gradient, and D = rowsum(dO ∘ O)). Bytes are main-memory traffic, the score
    matrix never among them: Q, K, V read and O and the fp32 row statistics written forward; Q, K, V, O, dO and
    the statistics read and dQ, dK, dV written backward.
    """
    for argument, value in (
        ("batch", batch),
        ("queries", queries),
        ("keys", keys),
        ("head_dim", head_dim),
        ("group", group),
    ):
        _positive(argument, value)
    if batch % group:
        raise ValueError(f"batch ({batch}) must be divisible by group ({group}): whole key-value heads")
    if causal and queries > keys:
        raise ValueError(f"a causal attention needs queries ({queries}) at most keys ({keys}): queries end the keys")
    shape = AttentionShape(batch, queries, keys, head_dim, group, causal, backward)
    size = dtype_bytes(dtype)
    q_side, kv_side = batch * queries * head_dim * size, batch // group * keys * head_dim * size
    stats = batch * queries * _STATS_BYTES
    if backward:
        flops = shape.scores * (10 * head_dim + _SOFTMAX_FLOPS) + 2 * batch * queries * head_dim
        traffic = 3 * q_side + 2 * kv_side + stats + q_side + 2 * kv_side  # Q, O, dO, K, V, stats in; dQ, dK, dV out
    else:
        flops = shape.scores * (4 * head_dim + _SOFTMAX_FLOPS)
        traffic = q_side + 2 * kv_side + q_side + stats  # Q, K, V in; O and stats out
    sizes = {
        "batch": batch,
        "queries": queries,
        "keys": keys,
        "head_dim": head_dim,
        "group": 0 if group == 1 else group,
        "causal": causal,
        "backward": backward,
    }
    return _describe("attention", sizes, dtype, flops, traffic, name)


def signature(op: compute_pb2.OperatorDesc) -> bytes:
    """A deterministic serialization of ``op``, equal for equal operators: the key compute results are cached by."""
    return op.SerializeToString(deterministic=True)


# The case of the descriptor's ``shape`` oneof for each kind.
_KINDS: MappingProxyType[str, OperatorKind] = MappingProxyType(
    {
        "gemm": compute_pb2.GEMM,
        "conv": compute_pb2.CONV,
        "elementwise": compute_pb2.ELEMENTWISE,
        "attention": compute_pb2.ATTENTION,
    }
)


def kind_of(op: compute_pb2.OperatorDesc) -> OperatorKind:
    """``op``'s kind: which shape it carries (``OPERATOR_KIND_UNSPECIFIED`` when none, e.g. a bare FLOP count)."""
    case = op.WhichOneof("shape")
    return compute_pb2.OPERATOR_KIND_UNSPECIFIED if case is None else _KINDS[case]


def kind_name(kind: OperatorKind) -> str:
    """The lower-case name of a kind for messages and tables (``"gemm"``); never raises, even for unknown values."""
    if kind in compute_pb2.OperatorKind.values():
        return compute_pb2.OperatorKind.Name(kind).lower()
    return f"kind #{kind}"


def basis_name(basis: compute_pb2.Basis.ValueType) -> str:
    """Where a cost's time comes from, for reports and JSON (``"fitted_to_runs"``); ``"unknown"`` for a backend
    that does not say (``BASIS_UNSPECIFIED``) or a value this version does not know."""
    if basis != compute_pb2.BASIS_UNSPECIFIED and basis in compute_pb2.Basis.values():
        return compute_pb2.Basis.Name(basis).lower()
    return "unknown"
