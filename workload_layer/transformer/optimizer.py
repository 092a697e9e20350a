"""The optimizer step closing a training iteration: mixed-precision Adam over the parameters one NPU updates.

Adam in mixed precision (Megatron-LM's and DeepSpeed's fused multi-tensor kernels) streams every parameter once:
it reads the fp32 master weight, momentum and variance and the gradient, writes the three states back and writes
the weight in the training dtype. With ``e`` bytes per training-dtype element that is ``24 + 2e`` bytes per
parameter (28 in bf16), so the step is bound by memory bandwidth. The operator counts them as
``24 / e + 2`` training-dtype tensors read or written once over the parameters, and 14 FLOPs per parameter
(AdamW's two moment updates, bias corrections, square root, division, weight decay and update).

An NPU updates the parameters whose optimizer states it holds: all of its stage's (data parallelism without
ZeRO), or its shard of them (ZeRO stages 1 to 3: the same count as
:func:`~stratasim.workload_layer.transformer.memory.training_memory`'s optimizer bytes).
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2

__all__ = ["ADAM_FLOPS_PER_PARAMETER", "MASTER_BYTES_PER_PARAMETER", "optimizer_step"]

ADAM_FLOPS_PER_PARAMETER = 14
"""FLOPs of one AdamW update of one parameter."""

MASTER_BYTES_PER_PARAMETER = 24
"""The fp32 master weight, momentum and variance, each read and written once."""


def optimizer_step(parameters: int, dtype: operators.DType) -> compute_pb2.OperatorDesc:
    """The Adam step over ``parameters`` parameters trained in ``dtype`` (see the module)."""
    size = operators.dtype_bytes(dtype)
    tensors = MASTER_BYTES_PER_PARAMETER // size + 2
    return operators.elementwise(
        (parameters,),
        dtype=dtype,
        flops_per_element=ADAM_FLOPS_PER_PARAMETER,
        inputs=tensors - 1,
        name="optimizer step",
        function=compute_pb2.OPTIMIZER,
    )
