"""The operator descriptor each step of a block runs, forward and backward: what the graph emitter
(:mod:`stratasim.workload_layer.transformer.training_graph`) puts in its compute nodes, and what balancing a plan
to devices prices (:mod:`stratasim.workload_layer.transformer.balance`)."""

from __future__ import annotations

from typing import Literal, NamedTuple, TypeAlias

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.transformer.steps import (
    Attention,
    Block,
    GatheredAttention,
    Gemm,
    Pointwise,
    Recompute,
    RingAttention,
)

__all__ = [
    "Role",
    "step_operator",
    "ring_operators",
    "gathered_operators",
    "RingMerges",
    "ring_merges",
    "block_operators",
]

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


def gathered_operators(
    step: GatheredAttention, backward: bool, dtype: operators.DType
) -> tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorDesc]:
    """The two kernels of TE's all-gather CP, forward or ``backward``, in rank 0's shapes: its first chunk's
    ``chunk`` queries against the ``chunk`` keys up to them, and its last chunk's against the whole sequence's ``2
    ranks chunk`` keys, both causal (the diagonal at the bottom right, as TE masks them)."""
    c, keys = step.chunk, 2 * step.ranks * step.chunk

    def kernel(queries: int, keys: int, name: str) -> compute_pb2.OperatorDesc:
        return operators.attention(
            step.batch,
            queries,
            keys,
            step.head_dim,
            causal=True,
            backward=backward,
            group=step.group,
            dtype=dtype,
            name=name,
        )

    return kernel(c, c, step.name), kernel(c, keys, f"{step.name} gathered")


_LSE_CORRECTION_FLOPS = 6
"""FLOPs per query of merging two log-sum-exps, Transformer Engine's ``flash_attn_fwd_softmax_lse_correction``:
``max(a, b) + log1p(exp(min(a, b) - max(a, b)))`` (max, min, subtract, exp, log1p, add)."""

_OUTPUT_CORRECTION_FLOPS = 2
"""FLOPs per output element of TE's ``flash_attn_fwd_out_correction``: ``out += out_step * exp(lse_step - lse)``
(a multiply and an add; the exponential is per query and head, ``1 / head_dim`` of the elements)."""


class RingMerges(NamedTuple):
    """The element-wise operators Transformer Engine's ring attention runs beside its kernels, forward or backward:
    ``after[i]`` right after step ``i``'s kernel, ``final`` after the last one (see :func:`ring_merges`)."""

    after: tuple[tuple[compute_pb2.OperatorDesc, ...], ...]
    final: tuple[compute_pb2.OperatorDesc, ...]


def ring_merges(step: RingAttention, backward: bool, dtype: operators.DType) -> RingMerges:
    """What TE's ``AttnFuncWithCPAndKVP2P`` computes between ``step``'s kernels, in rank 0's shapes (as
    :func:`ring_operators`), with ``n = step.batch`` query heads (times the micro-batch), ``c`` the chunk and ``d``
    the head size.

    Forward: after each later step ``i`` the running log-sum-exp of the rank's second chunk is merged with the
    step's (``n c`` fp32 statistics); after the last kernel each step's partial output is rescaled by
    ``exp(lse_i - lse)`` and added into the output (``2 n c d`` elements for step 0's, ``n c d`` for each later
    half block, in ``dtype``). Backward: after each kernel its query gradient goes into the rank's (step 0's, over
    both chunks, copied; each later step's, over the second chunk, added) and its key-value gradients into the
    block's (``kv_elements``, copied at step 0 and added after), in ``dtype`` as TE accumulates them.
    """
    n, c, d = step.batch, step.chunk, step.head_dim
    later = range(1, step.ranks)
    if not backward:
        lse = operators.elementwise(
            (n, c),
            dtype=compute_pb2.FP32,
            flops_per_element=_LSE_CORRECTION_FLOPS,
            inputs=2,
            name=f"{step.name} cp lse correction",
        )
        outputs = tuple(
            operators.elementwise(
                (n, (1 if index else 2) * c, d),
                dtype=dtype,
                flops_per_element=_OUTPUT_CORRECTION_FLOPS,
                inputs=2,
                name=f"{step.name} cp out correction",
                function=compute_pb2.WEIGHTED_SUM,
            )
            for index in range(step.ranks)
        )
        return RingMerges(((),) + tuple((lse,) for _ in later), outputs)

    def accumulate(elements: int, first: bool, what: str) -> compute_pb2.OperatorDesc:
        function = compute_pb2.COPY if first else compute_pb2.ADD
        name = f"{step.name} cp {what} accumulate"
        return operators.elementwise(
            (elements,),
            dtype=dtype,
            flops_per_element=int(not first),
            inputs=1 + (not first),
            name=name,
            function=function,
        )

    first = (accumulate(2 * n * c * d, True, "dq"), accumulate(step.kv_elements, True, "dkv"))
    rest = (accumulate(n * c * d, False, "dq"), accumulate(step.kv_elements, False, "dkv"))
    return RingMerges((first,) + tuple(rest for _ in later), ())


def block_operators(
    block: Block, dtype: operators.DType, gemm_dtype: operators.DType | None = None
) -> list[compute_pb2.OperatorDesc]:
    """Every operator one micro-batch's forward and backward passes of ``block`` run, as the emitter runs them:
    the forward steps (again before the backward pass under full recomputation), then each step's backward
    operators (a selectively recomputed step's forward operator first)."""
    forward: list[compute_pb2.OperatorDesc] = []
    backward: list[compute_pb2.OperatorDesc] = []
    for step in block.steps:
        if isinstance(step, GatheredAttention):
            forward += gathered_operators(step, False, dtype)
            backward += gathered_operators(step, True, dtype)
            continue
        if isinstance(step, RingAttention):
            for pass_ops, backward_pass in ((forward, False), (backward, True)):
                kernels, merges = ring_operators(step, backward_pass, dtype), ring_merges(step, backward_pass, dtype)
                for index, after in enumerate(merges.after):
                    pass_ops += [kernels[bool(index)], *after]
                pass_ops += merges.final
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
