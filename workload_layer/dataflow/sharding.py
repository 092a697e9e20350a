"""A kernel's operator as one device of a group runs it under a scheme, forward and backward.

The scheme's ``divides`` names the operator dimension the group splits (rounded up: the busiest device sets the
pace); a scheme that divides nothing leaves every device the whole operator. Backward, a GEMM runs its input- and
weight-gradient products, an element-wise operator reads one more tensor (the incoming gradient), and attention
runs its gradient kernel.
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.graph import GraphError, Kernel, Scheme

__all__ = ["sharded_operator", "backward_operators", "DIVISIBLE"]

DIVISIBLE: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "batch"),
    "elementwise": ("elements",),
    "attention": ("batch", "queries"),
}
"""The dimensions a scheme may divide, by operator kind."""


def sharded_operator(kernel: Kernel, scheme: Scheme, devices: int) -> compute_pb2.OperatorDesc:
    """The share of ``kernel``'s operator one of ``devices`` runs under ``scheme``."""
    op = kernel.operator
    if scheme.divides is None or devices == 1:
        return op
    kind = op.WhichOneof("shape")
    if kind is None or scheme.divides not in DIVISIBLE.get(kind, ()):
        raise GraphError(
            f"kernel {kernel.name!r}",
            f"scheme {scheme.name!r} divides {scheme.divides!r}, which a {kind} operator does not have "
            f"(it may divide {', '.join(DIVISIBLE.get(kind or '', ())) or 'nothing'})",
        )
    if kind == "gemm":
        sizes = {"m": op.gemm.m, "k": op.gemm.k, "n": op.gemm.n, "batch": max(1, op.gemm.batch)}
        sizes[scheme.divides] = -(-sizes[scheme.divides] // devices)
        return operators.gemm(sizes["m"], sizes["k"], sizes["n"], dtype=op.dtype, batch=sizes["batch"], name=op.name)
    if kind == "elementwise":
        return _elementwise_share(op, devices)
    return _attention_share(kernel, scheme, devices)


def backward_operators(op: compute_pb2.OperatorDesc) -> tuple[compute_pb2.OperatorDesc, ...]:
    """The operators the backward pass of ``op`` runs (a GEMM's input and weight gradients; an element-wise
    operator reading the incoming gradient too; attention's gradient kernel)."""
    kind = op.WhichOneof("shape")
    if kind == "gemm":
        g, batch = op.gemm, max(1, op.gemm.batch)
        return (
            operators.gemm(g.m, g.n, g.k, dtype=op.dtype, batch=batch, name=f"{op.name}.dgrad"),
            operators.gemm(g.k, g.m, g.n, dtype=op.dtype, batch=batch, name=f"{op.name}.wgrad"),
        )
    if kind == "elementwise":
        grad = compute_pb2.OperatorDesc()
        grad.CopyFrom(op)
        grad.bytes = op.bytes + op.bytes // _slots(op)
        grad.name = f"{op.name}.backward"
        return (grad,)
    if kind == "attention":
        a = op.attention
        return (
            operators.attention(
                a.batch,
                a.queries,
                a.keys,
                a.head_dim,
                causal=a.causal,
                backward=True,
                group=max(1, a.group),
                dtype=op.dtype,
                name=f"{op.name}.backward",
            ),
        )
    raise ValueError(f"operator {op.name!r}: no backward pass is known for a {kind} operator")


def _slots(op: compute_pb2.OperatorDesc) -> int:
    """The tensors an element-wise operator moves (inputs and its output), from its bytes per element."""
    return max(1, op.bytes // (op.elementwise.elements * operators.dtype_bytes(op.dtype)))


def _elementwise_share(op: compute_pb2.OperatorDesc, devices: int) -> compute_pb2.OperatorDesc:
    elements = op.elementwise.elements
    share = -(-elements // devices)
    part = compute_pb2.OperatorDesc()
    part.CopyFrom(op)
    part.elementwise.elements = share
    part.flops = op.flops // elements * share
    part.bytes = op.bytes // elements * share
    return part


def _attention_share(kernel: Kernel, scheme: Scheme, devices: int) -> compute_pb2.OperatorDesc:
    a, op = kernel.operator.attention, kernel.operator
    group = max(1, a.group)
    batch, queries = a.batch, a.queries
    if scheme.divides == "batch":
        batch = -(-batch // devices)
        if batch % group:
            raise GraphError(
                f"kernel {kernel.name!r}",
                f"scheme {scheme.name!r} splits {a.batch} heads over {devices} devices: {batch} per device is not "
                f"a whole number of key-value groups of {group}",
            )
    else:
        queries = -(-queries // devices)
    return operators.attention(
        batch,
        queries,
        a.keys,
        a.head_dim,
        causal=a.causal,
        backward=a.backward,
        group=group,
        dtype=op.dtype,
        name=op.name,
    )
