"""One operator's time under the fitted model: which class prices a descriptor, and the seconds, bytes and bound.

- a GEMM (batched or not) is the ``gemm`` class;
- an attention with one query per head is a decode step, ``attention_decode``, priced by the bytes it moves (the
  KV cache of its ``batch / group`` key-value heads, its queries and outputs); any other attention is fused,
  ``attention_forward`` or ``attention_backward``, with causal blocks counted as FlashAttention-2 skips them;
- an element-wise operator is priced by its bytes, as the profiled kind its function names
  (:data:`FUNCTION_CLASSES`); one whose function is unspecified (an older client's, or a builder's that does not
  know it) falls back to the kind its FLOPs and bytes suggest (:func:`elementwise_class`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.measured.features import decode_bytes, elementwise_cached
from stratasim.compute_layer.measured.forms import (
    attention_backward_time,
    attention_features,
    attention_forward_time,
    bandwidth_time,
    fits_in_cache,
    gemm_compute_time,
    gemm_features,
    gemm_time,
)
from stratasim.compute_layer.measured.launch import EAGER_KERNELS
from stratasim.kernel.elementwise_functions import ElementwiseFunction
from stratasim.kernel.operator_shapes import AttentionShape, ElementwiseShape, GemmShape, Shape
from stratasim.v1 import compute_pb2

__all__ = ["Priced", "price_shape", "FUNCTION_CLASSES", "elementwise_kind", "elementwise_class"]

Parameters = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Priced:
    """An operator's modelled time in seconds, the bytes it moves, the level that bounds it and the kernels an eager
    framework launches for it (:data:`~stratasim.compute_layer.measured.launch.EAGER_KERNELS`)."""

    seconds: float
    bytes: int
    bound: compute_pb2.Bound.ValueType
    kernels: int = 1


FUNCTION_CLASSES: Mapping[ElementwiseFunction, str] = MappingProxyType(
    {
        compute_pb2.ADD: "add",
        compute_pb2.GELU: "gelu",
        compute_pb2.SILU_MUL: "silu_mul",
        compute_pb2.LAYERNORM: "layernorm",
        compute_pb2.RMSNORM: "rmsnorm",
        compute_pb2.SOFTMAX: "softmax",
        compute_pb2.COPY: "copy",
        compute_pb2.ROTARY: "gelu",
        compute_pb2.RELU: "gelu",
        compute_pb2.POOL: "gelu",
        compute_pb2.EMBEDDING: "copy",
        compute_pb2.WEIGHTED_SUM: "add",
        compute_pb2.OPTIMIZER: "add",
        compute_pb2.BATCHNORM: "layernorm",
        compute_pb2.CROSS_ENTROPY: "softmax",
        compute_pb2.SAMPLE: "softmax",
    }
)
"""The profiled kind each element-wise function is priced as: its own where it was profiled (add, gelu, silu_mul,
layernorm, rmsnorm, softmax, copy); otherwise the profiled kind bound by the same thing:

- ``rotary``, ``relu`` and ``pool``: one input read and one output written with a little arithmetic per element,
  bound by that traffic, as the one-input activation ``gelu`` is;
- ``embedding``: rows moved from a table without arithmetic (positions added at most), bound by the bytes moved,
  as ``copy`` is;
- ``weighted_sum``: several inputs streamed into one output, as ``add``'s two are; ``optimizer``: a parameter's
  gradient and states streamed in and its states and weight out, as ``add`` streams its tensors;
- ``batchnorm``: a normalisation, bound by its reductions and traffic, as ``layernorm`` is;
- ``cross_entropy`` and ``sample``: a softmax over each row of logits and a pick, bound by the per-row work, as
  ``softmax`` is (:data:`~stratasim.compute_layer.measured.features.WORK_BOUND`)."""


def elementwise_kind(op: compute_pb2.OperatorDesc, shape: ElementwiseShape, element_bytes: int) -> str:
    """The profiled kind the element-wise ``op`` is priced as: its function's (:data:`FUNCTION_CLASSES`), or when
    that is unspecified, the fallback inferred from its FLOPs and bytes (:func:`elementwise_class`)."""
    if shape.function == compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED:
        return elementwise_class(op.flops, op.bytes, shape.elements, element_bytes)
    return FUNCTION_CLASSES[shape.function]


def elementwise_class(flops: int, moved: int, elements: int, element_bytes: int) -> str:
    """The profiled kind an element-wise descriptor without a function is priced as (the fallback), from its FLOPs
    and tensors per element; a guess, which cannot tell an rmsnorm from a layernorm.

    No FLOPs: ``copy``; 5 per element: ``softmax`` (the model builders' count); 8 or more: ``layernorm`` (a
    normalisation, or a GELU, which a descriptor cannot tell apart: the slower of them); three or more tensors:
    ``add`` (2 FLOPs or fewer per element) or ``silu_mul``; otherwise a one-input activation, ``gelu``."""
    per_element = flops // elements
    tensors = moved // (elements * element_bytes)
    if flops == 0:
        return "copy"
    if per_element == 5:
        return "softmax"
    if per_element >= 8:
        return "layernorm"
    if tensors >= 3:
        return "add" if per_element <= 2 else "silu_mul"
    return "gelu"


def price_shape(
    op: compute_pb2.OperatorDesc, shape: Shape, params: Parameters, device: Device, element_bytes: int
) -> Priced:
    """``op`` (whose decoded ``shape`` is a GEMM, an attention or an element-wise one) on ``device``."""
    if isinstance(shape, GemmShape):
        gemm = gemm_features(shape.batch, shape.m, shape.k, shape.n, device, element_bytes)
        compute = gemm_compute_time(params["gemm"], gemm)
        bound = compute_pb2.COMPUTE if compute >= gemm.bytes / params["gemm"]["bandwidth"] else compute_pb2.MEMORY
        return Priced(gemm_time(params["gemm"], gemm), gemm.bytes, bound)
    if isinstance(shape, AttentionShape):
        if shape.queries == 1:
            moved = decode_bytes(shape.batch, shape.group, shape.keys, shape.head_dim, element_bytes)
            seconds = bandwidth_time(params["attention_decode"], moved, fits_in_cache(moved, device))
            return Priced(seconds, moved, compute_pb2.MEMORY)
        name, time = (
            ("attention_backward", attention_backward_time)
            if shape.backward
            else ("attention_forward", attention_forward_time)
        )
        return Priced(time(params[name], attention_features(shape)), op.bytes, compute_pb2.COMPUTE)
    assert isinstance(shape, ElementwiseShape)
    kind = elementwise_kind(op, shape, element_bytes)
    seconds = bandwidth_time(params[kind], op.bytes, elementwise_cached(kind, op.bytes, device))
    return Priced(seconds, op.bytes, compute_pb2.MEMORY, EAGER_KERNELS.get(kind, 1))
