"""Reading a request's operators, for every compute backend: the wire error an unusable operator earns, the
label messages call it by, and its shape checked against its kind.

A backend raises :class:`Rejected` while pricing and returns ``rejected.error`` in its ``EstimateResponse``, so a
bad operator is one clear error naming ``ops[i]`` and the field, never an exception on the wire.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType

from stratasim.kernel.operators import dtype_bytes
from stratasim.v1 import common_pb2, compute_pb2

__all__ = ["Rejected", "label", "checked_shape", "element_bytes"]

# Per kind: the shape lengths accepted (empty: any) and how a message describes them.
_SHAPES: Mapping[int, tuple[tuple[int, ...], str]] = MappingProxyType({
    compute_pb2.GEMM: ((3, 4), "[M, K, N] or [B, M, K, N]"),
    compute_pb2.CONV: ((7, 8), "[N, K, C, P, Q, R, S] or [N, K, C, P, Q, R, S, stride]"),
    compute_pb2.ELEMENTWISE: ((), "positive dimensions"),
})  # fmt: skip


class Rejected(Exception):
    """An operator, device or environment a backend cannot price with; ``error`` is what goes on the wire."""

    def __init__(self, code: common_pb2.Error.Code.ValueType, message: str, where: str) -> None:
        super().__init__(message)
        self.error = common_pb2.Error(code=code, message=message, where=where)


def label(op: compute_pb2.OperatorDesc, index: int) -> str:
    """How messages name ``ops[index]``: ``ops[3] ('qkv')``, or ``ops[3]`` when it has no name."""
    return f"ops[{index}]" + (f" ({op.name!r})" if op.name else "")


def _kind_name(kind: int) -> str:
    known = compute_pb2.OperatorKind.values()
    return compute_pb2.OperatorKind.Name(compute_pb2.OperatorKind.ValueType(kind)) if kind in known else f"#{kind}"


def checked_shape(
    op: compute_pb2.OperatorDesc, index: int, backend: str, kinds: Collection[int] = tuple(_SHAPES)
) -> list[int]:
    """``op``'s shape, its optional entries filled in (a GEMM's batch first, a convolution's stride last).

    Raises :class:`Rejected`: UNSUPPORTED when ``backend`` does not price ``op``'s kind (``kinds``), and
    INVALID_ARGUMENT when the shape has the wrong length for its kind or a size that is not positive.
    """
    if op.kind not in kinds or op.kind not in _SHAPES:
        names = [_kind_name(kind) for kind in kinds]
        prices = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        message = f"{label(op, index)}: the {backend} backend cannot cost operator kind {_kind_name(op.kind)}; it " \
                  f"prices {prices}" + ("" if set(kinds) >= set(_SHAPES) else " (route others to another backend: "
                                        "compute.per_kind)")  # fmt: skip
        raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].kind")
    shape = list(op.shape)
    lengths, expected = _SHAPES[op.kind]
    if not shape or min(shape) <= 0 or (lengths and len(shape) not in lengths):
        message = f"{label(op, index)}: shape {shape} is not {expected} of positive sizes"
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}].shape")
    if op.kind == compute_pb2.GEMM and len(shape) == 3:
        return [1, *shape]
    if op.kind == compute_pb2.CONV and len(shape) == 7:
        return [*shape, 1]
    return shape


def element_bytes(op: compute_pb2.OperatorDesc, index: int) -> int:
    """Bytes of one element of ``op``'s dtype; :class:`Rejected` (INVALID_ARGUMENT) when it has none."""
    try:
        return dtype_bytes(op.dtype)
    except ValueError as exc:
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, f"{label(op, index)}: {exc}", f"ops[{index}].dtype") from None
