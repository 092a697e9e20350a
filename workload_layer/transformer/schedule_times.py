"""How long a model chunk's zero-bubble passes take, relative to each other, before anything is priced: the FLOPs
of its forward pass (F), its input-gradient pass (B: every backward operator but the weighted GEMMs' weight
gradients, with the forward pass again under full recomputation) and its weight-gradient pass (W).

The workload builds its pipeline orders before the system layer prices an operator, so ZB-H2's and ZB-V's greedy
orders (:mod:`stratasim.workload_layer.transformer.zero_bubble`) can weigh the passes by their FLOPs at most
(``parallelism.schedule_times: flops``), not by their times: memory-bound operators and communication count for
nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from stratasim.kernel import operators
from stratasim.workload_layer.transformer.step_operators import block_operators, step_operator
from stratasim.workload_layer.transformer.steps import Block, Gemm, Recompute

__all__ = ["pass_flops"]


def pass_flops(
    blocks: Sequence[Block], dtype: operators.DType, gemm_dtype: operators.DType | None = None
) -> tuple[int, int, int]:
    """The FLOPs of one micro-batch's F, B and W passes over ``blocks`` (a model chunk), as the graphs run them."""
    forward = backward = weight = 0
    for block in blocks:
        whole = sum(op.flops for op in block_operators(replace(block, recompute=False), dtype, gemm_dtype))
        again = sum(op.flops for op in block_operators(replace(block, recompute=True), dtype, gemm_dtype))
        gemms = [g for s in block.steps for g in (s.steps if isinstance(s, Recompute) else (s,))]
        wgrad = sum(
            step_operator(g, "wgrad", dtype, gemm_dtype).flops for g in gemms if isinstance(g, Gemm) and g.weights
        )
        forward += again - whole  # the forward pass is what recomputation runs again
        backward += whole - (again - whole) - wgrad + (again - whole if block.recompute else 0)
        weight += wgrad
    return forward, backward, weight
