"""The operator descriptor each step of a block runs, forward and backward: what the graph emitter
(:mod:`stratasim.workload_layer.transformer.training_graph`) puts in its compute nodes, and what balancing a plan
to devices prices (:mod:`stratasim.workload_layer.transformer.balance`)."""

from __future__ import annotations

from typing import Literal, TypeAlias

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.transformer.steps import Attention, Block, Gemm, Pointwise, Recompute, RingAttention

__all__ = ["Role", "step_operator", "ring_operators", "block_operators"]

Role: TypeAlias = Literal["forward", "backward", "dgrad", "wgrad"]
"""Which of a step's operators: its forward pass, a pointwise or attention step's backward pass, or a GEMM's
input-gradient (``dgrad``) or weight-gradient (``wgrad``) GEMM."""


def step_operator(
    step: Gemm | Pointwise | Attention,
    role: Role,
    dtype: operators.DType,
    gemm_dtype: operators.DType | None = None,
) -> compute_pb2.OperatorDesc:
    """The operator ``step`` runs in ``role``, its data in ``dtype``; a GEMM priced at ``gemm_dtype``'s peak when
    given (its bytes stay ``dtype``'s)."""
    if isinstance(step, Pointwise):
        return operators.elementwise(
            step.shape,
            dtype=dtype,
            flops_per_element=step.flops_per_element,
            inputs=step.inputs + (role == "backward"),
            name=step.name,
            function=step.function,
        )
    if isinstance(step, Attention):
        return operators.attention(
            step.batch,
            step.seq,
            step.seq,
            step.head_dim,
            causal=True,
            backward=role == "backward",
            group=step.group,
            dtype=dtype,
            name=step.name,
        )
    m, k, n = {
        "forward": (step.m, step.k, step.n),
        "dgrad": (step.m, step.n, step.k),
        "wgrad": (step.k, step.m, step.n),
    }[role]
    desc = operators.gemm(m, k, n, dtype=dtype, batch=step.batch, name=step.name)
    if gemm_dtype is not None:
        desc.dtype = gemm_dtype
    return desc


def ring_operators(
    step: RingAttention, backward: bool, dtype: operators.DType
) -> tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorDesc]:
    """The two kernels a ring attention's steps run (:class:`RingAttention`), forward or ``backward``: the causal
    one over the rank's own ``2 chunk`` tokens (step 0) and the half block of every later step."""
    c = step.chunk

    def kernel(queries: int, keys: int, causal: bool, name: str) -> compute_pb2.OperatorDesc:
        return operators.attention(
            step.batch,
            queries,
            keys,
            step.head_dim,
            causal=causal,
            backward=backward,
            group=step.group,
            dtype=dtype,
            name=name,
        )

    return kernel(2 * c, 2 * c, True, step.name), kernel(c, 2 * c, False, f"{step.name} ring")


def block_operators(
    block: Block, dtype: operators.DType, gemm_dtype: operators.DType | None = None
) -> list[compute_pb2.OperatorDesc]:
    """Every operator one micro-batch's forward and backward passes of ``block`` run, as the emitter runs them:
    the forward steps (again before the backward pass under full recomputation), then each step's backward
    operators (a selectively recomputed step's forward operator first)."""
    forward: list[compute_pb2.OperatorDesc] = []
    backward: list[compute_pb2.OperatorDesc] = []
    for step in block.steps:
        if isinstance(step, RingAttention):
            for pass_ops, backward_pass in ((forward, False), (backward, True)):
                local, ring = ring_operators(step, backward_pass, dtype)
                pass_ops += [local] + [ring] * (step.ranks - 1)
            continue
        inner = step.steps if isinstance(step, Recompute) else (step,)
        for each in inner:
            if isinstance(each, (Gemm, Pointwise, Attention)):
                forward.append(step_operator(each, "forward", dtype, gemm_dtype))
                if isinstance(step, Recompute):
                    backward.append(step_operator(each, "forward", dtype, gemm_dtype))
                roles: tuple[Role, ...] = ("dgrad", "wgrad") if isinstance(each, Gemm) else ("backward",)
                backward += [step_operator(each, role, dtype, gemm_dtype) for role in roles]
    return forward + (forward if block.recompute else []) + backward
