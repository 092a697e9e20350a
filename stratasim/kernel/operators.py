"""Operator descriptors with their FLOP and byte counts filled in, shared by the workload and compute layers.

A builder returns a :class:`~stratasim.v1.compute_pb2.OperatorDesc` whose ``flops`` (floating-point or
integer operations, a multiply-add counting as two) and ``bytes`` (the least main-memory traffic: every input
read once and every output written once) are already computed, so a backend that only understands totals
(roofline) never needs to know the operator kind. Richer backends read ``kind`` and ``shape`` instead.
A new operator kind is added by declaring it in ``proto/stratasim/v1/compute.proto`` and writing a builder
here that fills the same two totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from types import MappingProxyType
from typing import TypeAlias

from stratasim.v1 import compute_pb2

__all__ = ["DType", "DTYPES", "dtype_bytes", "dtype_name", "parse_dtype", "gemm", "conv2d", "elementwise", "signature"]

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
    kind: compute_pb2.OperatorKind.ValueType, shape: list[int], dtype: DType, flops: int, size: int, name: str
) -> compute_pb2.OperatorDesc:
    if flops > _UINT64_MAX or size > _UINT64_MAX:
        label = name or compute_pb2.OperatorKind.Name(kind).lower()
        raise ValueError(f"operator {label!r} is too large: {flops} FLOPs and {size} bytes must fit in 64 bits")
    return compute_pb2.OperatorDesc(kind=kind, shape=shape, dtype=dtype, flops=flops, bytes=size, name=name)


def gemm(
    m: int, k: int, n: int, dtype: DType = compute_pb2.BF16, batch: int = 1, name: str = ""
) -> compute_pb2.OperatorDesc:
    """A (batched) matrix product ``[B, M, K] x [B, K, N] -> [B, M, N]``.

    FLOPs = 2·B·M·K·N (one multiply and one add per term); bytes = B·(M·K + K·N + M·N)·element size, reading
    both inputs and writing the output once. ``shape`` is ``[M, K, N]``, with a leading ``B`` only when
    ``batch`` is not 1, so equal operators have equal signatures.
    """
    for argument, value in (("m", m), ("k", k), ("n", n), ("batch", batch)):
        _positive(argument, value)
    size = dtype_bytes(dtype)
    shape = [m, k, n] if batch == 1 else [batch, m, k, n]
    flops = 2 * batch * m * k * n
    traffic = batch * (m * k + k * n + m * n) * size
    return _describe(compute_pb2.GEMM, shape, dtype, flops, traffic, name)


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
    H = (P - 1)·stride + R rows and W = (Q - 1)·stride + S columns. ``shape`` is ``[N, K, C, P, Q, R, S, stride]``.
    """
    sizes = (("n", n), ("k", k), ("c", c), ("p", p), ("q", q), ("r", r), ("s", s), ("stride", stride))
    for argument, value in sizes:
        _positive(argument, value)
    height, width = (p - 1) * stride + r, (q - 1) * stride + s
    flops = 2 * n * k * c * p * q * r * s
    traffic = (n * c * height * width + k * c * r * s + n * k * p * q) * dtype_bytes(dtype)
    return _describe(compute_pb2.CONV, [value for _, value in sizes], dtype, flops, traffic, name)


def elementwise(
    shape: Sequence[int],
    dtype: DType = compute_pb2.BF16,
    flops_per_element: int = 1,
    inputs: int = 1,
    name: str = "",
) -> compute_pb2.OperatorDesc:
    """An operator producing one output element per element of ``shape`` from ``inputs`` same-shaped tensors.

    FLOPs = elements·``flops_per_element``; bytes = elements·(``inputs`` + 1)·element size (each input read
    once, the output written once). ``inputs=0`` describes a fill; ``flops_per_element=0`` a copy.
    """
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or not shape:
        raise ValueError(f"shape must be a non-empty sequence of positive integers, got {shape!r}")
    dims = [_positive(f"shape[{i}]", dim) for i, dim in enumerate(shape)]
    _non_negative("flops_per_element", flops_per_element)
    _non_negative("inputs", inputs)
    size = dtype_bytes(dtype)
    elements = prod(dims)
    return _describe(
        compute_pb2.ELEMENTWISE, dims, dtype, elements * flops_per_element, elements * (inputs + 1) * size, name
    )


def signature(op: compute_pb2.OperatorDesc) -> bytes:
    """A deterministic serialization of ``op``, equal for equal operators: the key compute results are cached by."""
    return op.SerializeToString(deterministic=True)
