"""ZeRO-3's own memory-bound work in mixed precision: the casts around each parameter gather and gradient reduce.

PyTorch's FSDP (and DeepSpeed's ZeRO-3) keep each rank's shard of the parameters in fp32 and train in a narrower
dtype. Before a unit's parameters are all-gathered, each rank casts its fp32 shard to the training dtype
(:func:`parameter_cast`: reads 4 B, writes ``e`` B per sharded parameter; 6 B in bf16); after the unit's gradients
are reduce-scattered, it casts the reduced shard to fp32 and accumulates it into the fp32 gradient
(:func:`gradient_accumulate`: reads ``e`` + 4 B, writes 4 B; 10 B in bf16), after every micro-batch's
reduce-scatter. Both are described as element-wise operators over the shard in the training dtype, with as many
inputs as make their bytes: the cast as a ``copy`` (data moved without arithmetic), the accumulation as an
``add``. In fp32 training there is nothing to cast (:func:`casts_apply`).
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2

__all__ = ["FP32_BYTES", "casts_apply", "gradient_accumulate", "parameter_cast"]

FP32_BYTES = 4
"""The bytes of one fp32 master parameter or gradient element."""


def casts_apply(dtype: operators.DType) -> bool:
    """Whether training in ``dtype`` over fp32 master parameters casts anything: a dtype narrower than fp32."""
    return operators.dtype_bytes(dtype) < FP32_BYTES


def parameter_cast(shard: int, dtype: operators.DType) -> compute_pb2.OperatorDesc:
    """The cast of ``shard`` fp32 parameters to ``dtype`` before their all-gather: ``shard * (4 + e)`` bytes."""
    size = operators.dtype_bytes(dtype)
    return operators.elementwise(
        (shard,),
        dtype=dtype,
        flops_per_element=0,
        inputs=FP32_BYTES // size,
        name="zero parameter cast",
        function=compute_pb2.COPY,
    )


def gradient_accumulate(shard: int, dtype: operators.DType) -> compute_pb2.OperatorDesc:
    """The cast of ``shard`` reduced gradients from ``dtype`` to fp32, added into the fp32 gradient:
    ``shard * (e + 8)`` bytes, one addition per element."""
    size = operators.dtype_bytes(dtype)
    return operators.elementwise(
        (shard,),
        dtype=dtype,
        flops_per_element=1,
        inputs=(2 * FP32_BYTES) // size,
        name="zero gradient accumulate",
        function=compute_pb2.ADD,
    )
