"""One operator's time under the fitted model: which class prices a descriptor, and the seconds, bytes and bound.

- a GEMM (batched or not) is the ``gemm`` class;
- an attention with one query per head is a decode step, ``attention_decode``, priced by the bytes it moves (the
  KV cache of its ``batch / group`` key-value heads, its queries and outputs); any other attention is fused,
  ``attention_forward`` or ``attention_backward``, with causal blocks counted as FlashAttention-2 skips them;
- an element-wise operator carries only its element count, FLOPs and bytes, so its kind is read from those
  (:func:`elementwise_class`) and it is priced by its bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
from stratasim.kernel.operators import AttentionShape, ElementwiseShape, GemmShape, Shape
from stratasim.v1 import compute_pb2

__all__ = ["Priced", "price_shape", "elementwise_class"]

Parameters = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Priced:
    """An operator's modelled time in seconds, the bytes it moves and the level that bounds it."""

    seconds: float
    bytes: int
    bound: compute_pb2.Bound.ValueType


def elementwise_class(flops: int, moved: int, elements: int, element_bytes: int) -> str:
    """The profiled kind an element-wise descriptor is priced as, from its FLOPs and tensors per element.

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
    kind = elementwise_class(op.flops, op.bytes, shape.elements, element_bytes)
    seconds = bandwidth_time(params[kind], op.bytes, elementwise_cached(kind, op.bytes, device))
    return Priced(seconds, op.bytes, compute_pb2.MEMORY)
