"""Fused attention priced as the matrix products its kernel runs, for backends that model GEMMs and not the fused
kernel itself (the Timeloop-style and wafer backends).

FlashAttention's kernel is a loop over blocks of the score matrix running, per block, the products
:meth:`~stratasim.kernel.operator_shapes.AttentionShape.products` lists (two forward, five backward); a causal kernel runs
only the blocks on or below the diagonal, :attr:`~stratasim.kernel.operator_shapes.AttentionShape.causal_share` of them.
So its cost here is the sum of those batched GEMMs' costs over the full score matrix, scaled by that share. The
on-chip softmax's pointwise work and the row statistics are left out: these backends price the products' MACs and
operand traffic, which dominate.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from math import ceil

from stratasim.kernel import operators
from stratasim.kernel.operator_shapes import AttentionShape
from stratasim.v1 import compute_pb2

__all__ = ["priced_as_products"]


def priced_as_products(
    op: compute_pb2.OperatorDesc,
    shape: AttentionShape,
    price: Callable[[compute_pb2.OperatorDesc], compute_pb2.OperatorCost],
) -> compute_pb2.OperatorCost:
    """``op``'s cost as its kernel's products, each priced by ``price`` (a GEMM descriptor in ``op``'s dtype),
    summed and scaled by the causal share: durations rounded up to whole picoseconds and bytes to whole bytes,
    energy scaled exactly; the bound and basis are those of the product taking longest."""
    costs = [
        price(operators.gemm(p.m, p.k, p.n, dtype=op.dtype, batch=p.batch, name=op.name)) for p in shape.products()
    ]
    share = shape.causal_share
    slowest = max(costs, key=lambda cost: cost.duration_ps)
    traffic: dict[str, int] = {}
    for cost in costs:
        for entry in cost.traffic:
            traffic[entry.level] = traffic.get(entry.level, 0) + entry.bytes
    return compute_pb2.OperatorCost(
        duration_ps=_scaled(sum(cost.duration_ps for cost in costs), share),
        energy_pj=float(sum(cost.energy_pj for cost in costs) * share),
        traffic=[compute_pb2.MemoryTraffic(level=level, bytes=_scaled(size, share)) for level, size in traffic.items()],
        bound=slowest.bound,
        basis=slowest.basis,
    )


def _scaled(value: int, share: Fraction) -> int:
    return ceil(value * share)
