"""How one operator of a transformer trace changes when its tensor-parallel degree does: the rules ``stratasim
trace reshard`` applies to each compute node, by the operator's name and shape.

Megatron-LM's tensor parallelism splits each layer's weights over the TP ranks, and a trace records one rank's
share. The operator's name (what the transformer builder gives it, kept in the descriptor) says which dimension is
the split one; its role (forward, or a GEMM's ``dgrad`` / ``wgrad``, the node name's last word) says where that
dimension sits in the recorded shape. With ``ratio = old TP / new TP``:

- column-parallel GEMMs (``qkv``, ``mlp up``, ``lm head``: the output features split) scale N forward, K in
  ``dgrad`` ([M, N] x [N, K]) and N in ``wgrad`` ([K, M] x [M, N]);
- row-parallel GEMMs (``attention projection``, ``mlp down``: the input features split) scale K forward, N in
  ``dgrad`` and M in ``wgrad``;
- attention (fused ``attention``, unfused ``attention scores`` / ``attention context``) scales its batch of heads;
  the new count must still be whole heads of every micro-batch and whole key-value heads (grouped-query attention);
- element-wise operators on split tensors (``gelu``, ``swiglu``, ``softmax``, ``rotary embedding``, ``loss``)
  scale their elements; norms and residual adds (``layernorm``, ``rmsnorm``, ``residual ...``, ``final ...``)
  scale only under sequence parallelism (their tokens are split), and the embedding lookup never does;
- the optimizer step (an element-wise ``OPTIMIZER``) scales with the rank's parameters.

The vocabulary (``lm head``, ``loss``) is padded to a multiple of TP: its share is rounded up, one row off the
padding a direct build would choose at most. Every other split dimension must divide exactly. Any other operator
name (MoE experts and routers, an operator from a profiler) cannot be placed and is refused, naming the node.
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil

from stratasim.kernel import operators
from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import compute_pb2

__all__ = ["rescaled_operator"]

_COLUMN = frozenset({"qkv", "mlp up", "lm head"})
_ROW = frozenset({"attention projection", "mlp down"})
_HEADS = frozenset({"attention", "attention scores", "attention context"})
_SPLIT = frozenset({"gelu", "swiglu", "softmax", "rotary embedding", "loss"})
_SEQUENCE = frozenset(
    {"layernorm", "rmsnorm", "residual", "residual layernorm", "residual rmsnorm", "final layernorm", "final rmsnorm"}
)
_PADDED = frozenset({"lm head", "loss"})
_SPLIT_DIMENSION = {
    "column": {"forward": "n", "dgrad": "k", "wgrad": "n"},
    "row": {"forward": "k", "dgrad": "n", "wgrad": "m"},
}


def _scaled(value: int, ratio: Fraction, padded: bool, where: str, what: str) -> int:
    """``value * ratio``: rounded up when ``padded``, else exact (or refused, naming ``where``)."""
    scaled = value * ratio
    if padded:
        return ceil(scaled)
    if scaled.denominator != 1 or scaled < 1:
        raise WorkloadError(
            f"{where}: its {what} ({value}) times the TP ratio {ratio} is not a whole number, so this TP does not "
            "divide the split dimension"
        )
    return int(scaled)


def _gemm(op: compute_pb2.OperatorDesc, kind: str, role: str, ratio: Fraction, where: str) -> None:
    """Scale ``op``'s split dimension (in place), its FLOPs and bytes with it."""
    gemm = op.gemm
    batch = gemm.batch or 1
    before = batch * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n)
    dimension = _SPLIT_DIMENSION[kind][role]
    padded = op.name in _PADDED
    setattr(gemm, dimension, _scaled(getattr(gemm, dimension), ratio, padded, where, f"GEMM {dimension.upper()}"))
    after = batch * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n)
    op.flops = 2 * batch * gemm.m * gemm.k * gemm.n
    op.bytes = op.bytes // before * after


def _heads(op: compute_pb2.OperatorDesc, ratio: Fraction, micro_batch: int, where: str) -> compute_pb2.OperatorDesc:
    """``op`` (an attention or one of its batched GEMMs) over its heads scaled by ``ratio``."""
    case = op.WhichOneof("shape")
    batch = op.attention.batch if case == "attention" else op.gemm.batch or 1
    heads = _scaled(batch, ratio, False, where, "batch of heads")
    if heads % micro_batch:
        raise WorkloadError(
            f"{where}: {batch // micro_batch} heads per micro-batch on a rank times the TP ratio {ratio} is not a "
            "whole number of heads: this TP does not divide the attention heads"
        )
    if case == "gemm":
        new = compute_pb2.OperatorDesc()
        new.CopyFrom(op)
        new.gemm.batch = 0 if heads == 1 else heads
        new.flops = op.flops // batch * heads
        new.bytes = op.bytes // batch * heads
        return new
    a = op.attention
    try:
        return operators.attention(
            heads, a.queries, a.keys, a.head_dim, causal=a.causal, backward=a.backward, group=a.group or 1,
            dtype=op.dtype, name=op.name,
        )  # fmt: skip
    except ValueError as error:
        raise WorkloadError(f"{where}: {error} (this TP does not divide the key-value heads)") from None


def _elements(op: compute_pb2.OperatorDesc, ratio: Fraction, where: str) -> None:
    """Scale an element-wise ``op``'s elements, FLOPs and bytes by ``ratio`` (in place)."""
    before = op.elementwise.elements
    after = _scaled(before, ratio, op.name in _PADDED, where, "element count")
    op.elementwise.elements = after
    op.flops = op.flops // before * after
    op.bytes = op.bytes // before * after


def rescaled_operator(
    op: compute_pb2.OperatorDesc, node_name: str, ratio: Fraction, micro_batch: int, sequence_parallel: bool, where: str
) -> compute_pb2.OperatorDesc:
    """``op`` (run by the node ``node_name``) on one rank of a TP ``ratio`` times smaller (the module's rules).
    Raises :class:`WorkloadError` naming ``where`` for an operator whose split cannot be inferred, or whose split
    dimension the new TP does not divide."""
    role = node_name.rsplit(" ", 1)[-1] if node_name.endswith((" dgrad", " wgrad")) else "forward"
    case = op.WhichOneof("shape")
    if op.name in _HEADS and case in ("attention", "gemm"):
        return _heads(op, ratio, micro_batch, where)
    new = compute_pb2.OperatorDesc()
    new.CopyFrom(op)
    if case == "gemm" and op.name in _COLUMN | _ROW:
        _gemm(new, "column" if op.name in _COLUMN else "row", role, ratio, where)
    elif case == "elementwise" and (
        op.name in _SPLIT
        or op.elementwise.function == compute_pb2.OPTIMIZER
        or (sequence_parallel and op.name in _SEQUENCE)
    ):
        _elements(new, ratio, where)
    elif not (case == "elementwise" and (op.name in _SEQUENCE or op.name == "embedding")):
        raise WorkloadError(
            f"{where}: its {case or 'shapeless'} operator is not one whose tensor-parallel split can be inferred "
            "from its name (the transformer builder's GEMMs, attention and element-wise steps are): it cannot be "
            "re-sharded"
        )
    return new
