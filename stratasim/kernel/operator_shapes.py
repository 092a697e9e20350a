"""Operator shapes: the named sizes of an operator descriptor's ``shape`` oneof, decoded once for every reader.

Compute backends, adapters and reports read an operator's sizes through :func:`shape_of` only, which fills in the
optional fields (a GEMM's batch, a convolution's stride) and refuses a shape this peer cannot price with a
:class:`ShapeError` naming the field. The builders that write these shapes live in
:mod:`stratasim.kernel.operators`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar, TypeAlias

from stratasim.kernel.elementwise_functions import (
    ELEMENTWISE_FUNCTIONS,
    ElementwiseFunction,
    function_choices,
    function_name,
)
from stratasim.v1 import compute_pb2

__all__ = [
    "OperatorKind",
    "ATTENTION_BLOCK",
    "GemmShape",
    "ConvShape",
    "ElementwiseShape",
    "AttentionShape",
    "Shape",
    "ShapeError",
    "shape_of",
]

OperatorKind: TypeAlias = compute_pb2.OperatorKind.ValueType
"""A value of the ``stratasim.v1.OperatorKind`` enum, e.g. ``compute_pb2.GEMM``."""

ATTENTION_BLOCK = 128
"""The query and key block size of the fused attention kernel (FlashAttention-2's 128 x 128 tiles for head sizes up
to 128): a causal kernel skips exactly the key blocks wholly above the diagonal, and computes the rest whole."""


@dataclass(frozen=True)
class GemmShape:
    """``batch`` matrix products ``[m, k] x [k, n] -> [m, n]``."""

    kind: ClassVar[OperatorKind] = compute_pb2.GEMM
    batch: int
    m: int
    k: int
    n: int

    def dims(self) -> tuple[int, ...]:
        """``(M, K, N)``, with a leading batch when it is not 1: how tables print it."""
        return (self.m, self.k, self.n) if self.batch == 1 else (self.batch, self.m, self.k, self.n)


@dataclass(frozen=True)
class ConvShape:
    """``n`` images of ``c`` channels convolved with ``k`` ``r x s`` filters into ``p x q`` outputs, unpadded."""

    kind: ClassVar[OperatorKind] = compute_pb2.CONV
    n: int
    k: int
    c: int
    p: int
    q: int
    r: int
    s: int
    stride: int

    @property
    def height(self) -> int:
        """Input rows, (P - 1)·stride + R."""
        return (self.p - 1) * self.stride + self.r

    @property
    def width(self) -> int:
        """Input columns, (Q - 1)·stride + S."""
        return (self.q - 1) * self.stride + self.s

    def dims(self) -> tuple[int, ...]:
        """``(N, K, C, P, Q, R, S, stride)``: how tables print it."""
        return (self.n, self.k, self.c, self.p, self.q, self.r, self.s, self.stride)


@dataclass(frozen=True)
class ElementwiseShape:
    """An operator producing one output element per input element, ``elements`` of them, computing ``function``
    (``ELEMENTWISE_FUNCTION_UNSPECIFIED`` when its builder did not say)."""

    kind: ClassVar[OperatorKind] = compute_pb2.ELEMENTWISE
    elements: int
    function: ElementwiseFunction = compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED

    def dims(self) -> tuple[int, ...]:
        """``(elements,)``: how tables print it."""
        return (self.elements,)


@dataclass(frozen=True)
class AttentionShape:
    """Fused attention over ``batch`` query heads of ``queries`` queries against ``keys`` keys of ``head_dim``,
    ``group`` query heads per key-value head; ``causal`` aligns the queries to the end of the keys (a prefill with
    a cache, a decode step); ``backward`` is the gradient pass."""

    kind: ClassVar[OperatorKind] = compute_pb2.ATTENTION
    batch: int
    queries: int
    keys: int
    head_dim: int
    group: int
    causal: bool
    backward: bool

    @property
    def scores(self) -> int:
        """Scores the kernel computes: every one, or causally the whole :data:`ATTENTION_BLOCK`-square blocks (edge
        blocks cut to the matrix) holding any score on or below the diagonal, as FlashAttention-2 skips the rest."""
        if not self.causal:
            return self.batch * self.queries * self.keys
        block, offset, computed = ATTENTION_BLOCK, self.keys - self.queries, 0
        for start in range(0, self.queries, block):
            end = min(start + block, self.queries)
            seen = offset + end  # keys the block's last query sees
            computed += (end - start) * min(self.keys, -(-seen // block) * block)
        return self.batch * computed

    @property
    def causal_share(self) -> Fraction:
        """The share of the full ``queries x keys`` products the kernel runs: 1 unless causal."""
        return Fraction(self.scores, self.batch * self.queries * self.keys)

    def products(self) -> tuple[GemmShape, ...]:
        """The batched matrix products the kernel runs over the full score matrix (scale their cost by
        :attr:`causal_share`): Q·Kᵀ and P·V forward; S = Q·Kᵀ again, dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K and
        dK = dSᵀ·Q backward."""
        b, q, k, d = self.batch, self.queries, self.keys, self.head_dim
        scores, context = GemmShape(b, q, d, k), GemmShape(b, q, k, d)
        if not self.backward:
            return scores, context
        return scores, GemmShape(b, k, q, d), GemmShape(b, q, d, k), context, GemmShape(b, k, q, d)

    def dims(self) -> tuple[int, ...]:
        """``(batch, queries, keys, head_dim)``: how tables print it."""
        return (self.batch, self.queries, self.keys, self.head_dim)


Shape: TypeAlias = GemmShape | ConvShape | ElementwiseShape | AttentionShape
"""An operator's sizes as :func:`shape_of` decodes them, optional fields filled in."""


class ShapeError(ValueError):
    """An operator whose shape cannot be read; ``field`` names where, relative to the descriptor (``gemm.k``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def _sizes(
    message: compute_pb2.GemmShape | compute_pb2.ConvShape | compute_pb2.ElementwiseShape | compute_pb2.AttentionShape,
    field: str,
    names: str,
    **defaults: int,
) -> list[int]:
    """The named fields of ``message``, an unset optional one (``defaults``) replaced by its value."""
    sizes = []
    for name in names.split():
        value = getattr(message, name) or defaults.get(name, 0)
        if value <= 0:
            raise ShapeError(f"{field}.{name} must be a positive size, got {value}", f"{field}.{name}")
        sizes.append(value)
    return sizes


def _elementwise_shape(message: compute_pb2.ElementwiseShape) -> ElementwiseShape:
    """The element-wise shape of ``message``; its function must be one this peer knows (a newer client's would
    otherwise be priced as a function it is not)."""
    (elements,) = _sizes(message, "elementwise", "elements")
    if (
        message.function != compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED
        and message.function not in ELEMENTWISE_FUNCTIONS
    ):
        raise ShapeError(
            f"elementwise.function is {function_name(message.function)}, which this peer does not know; expected "
            f"one of {function_choices()}, or 0 (unspecified) to have it inferred",
            "elementwise.function",
        )
    return ElementwiseShape(elements, message.function)


def shape_of(op: compute_pb2.OperatorDesc) -> Shape:
    """``op``'s shape with its optional fields filled in (a GEMM's batch and a convolution's stride: 1).

    Raises :class:`ShapeError` when ``op`` carries no shape, a size that is not positive or an element-wise
    function this peer does not know (a value from a newer peer's enum). Every reader of
    operator shapes (compute backends, adapters, reports) goes through here.
    """
    case = op.WhichOneof("shape")
    if case == "gemm":
        batch, m, k, n = _sizes(op.gemm, case, "batch m k n", batch=1)
        return GemmShape(batch, m, k, n)
    if case == "conv":
        return ConvShape(*_sizes(op.conv, case, "n k c p q r s stride", stride=1))
    if case == "elementwise":
        return _elementwise_shape(op.elementwise)
    if case == "attention":
        message = op.attention
        batch, queries, keys, head_dim, group = _sizes(message, case, "batch queries keys head_dim group", group=1)
        if batch % group:
            raise ShapeError(
                f"attention.batch ({batch}) must be divisible by attention.group ({group})", "attention.group"
            )
        if message.causal and queries > keys:
            raise ShapeError(
                f"a causal attention needs attention.queries ({queries}) at most attention.keys ({keys})",
                "attention.queries",
            )
        return AttentionShape(batch, queries, keys, head_dim, group, message.causal, message.backward)
    raise ShapeError("the operator carries no shape (gemm, conv, elementwise or attention)", "shape")
