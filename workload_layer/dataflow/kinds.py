"""The kernel kinds a dataflow-graph file names: each kind's keys, the operator, weights and sharding schemes they
give, and a kernel written back as those keys.

- ``gemm``: ``m``, ``k``, ``n`` (and ``batch``, default 1) of ``[m, k] x [k, n]``; with ``weights: true`` the
  second operand is a weight the kernel holds (``batch k n`` elements) and the kernel takes one input, else two.
- ``elementwise``: ``elements`` outputs from ``inputs`` same-shaped inputs (default 1), ``flops_per_element``
  (default 1), optionally the ``function`` it computes (``gelu``, ``layernorm``...).
- ``attention``: fused attention over ``batch`` query heads of ``queries`` queries against ``keys`` keys of
  ``head_dim``; ``causal`` (default false); ``group`` query heads per key-value head (default 1).
- ``embedding``: ``lookups`` rows of ``dim`` gathered from a table of ``rows`` rows the kernel holds as weights
  (an element-wise gather of ``lookups dim`` elements).

Every kind also takes ``schemes`` (a subset of its sharding schemes by name, or schemes of its own written out:
:mod:`stratasim.workload_layer.dataflow.file_schemes`; the first is the default),
``weight_bytes`` (overriding the weights the kind implies), ``dtype`` (overriding the graph's), and ``flops`` and
``bytes`` (overriding the operator's totals, which a roofline prices).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stratasim.kernel import operator_shapes, operators
from stratasim.kernel.elementwise_functions import function_name
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.file_schemes import scheme_entry
from stratasim.workload_layer.dataflow.graph import GraphError, Kernel, Scheme
from stratasim.workload_layer.dataflow.schemes import (
    attention_schemes,
    elementwise_schemes,
    embedding_schemes,
    gemm_schemes,
)

__all__ = ["KernelKind", "KINDS", "COMMON_KEYS", "output_bytes", "kernel_entry"]

COMMON_KEYS = ("name", "kind", "schemes", "weight_bytes", "dtype", "flops", "bytes")
"""Keys every kernel of a file may have."""

_MOST_INPUTS = 64
"""The most inputs a kernel written back is said to read; bytes that would need more are written as ``bytes``."""


@dataclass(frozen=True)
class KernelKind:
    """A kind of kernel: its required positive ``sizes``, its ``options`` with their defaults (``function`` is
    written as a name), and ``build`` making the operator, the weight bytes and the schemes offered from the
    values read, the dtype and the kernel's name."""

    sizes: tuple[str, ...]
    options: Mapping[str, object]
    build: Callable[[Mapping[str, Any], operators.DType, str], tuple[compute_pb2.OperatorDesc, int, tuple[Scheme, ...]]]


def _gemm(values: Mapping[str, Any], dtype: operators.DType, name: str) -> Any:
    m, k, n, batch = values["m"], values["k"], values["n"], values["batch"]
    op = operators.gemm(m, k, n, dtype=dtype, batch=batch, name=name)
    weights = batch * k * n * operators.dtype_bytes(dtype) if values["weights"] else 0
    return op, weights, gemm_schemes(values["weights"])


def _elementwise(values: Mapping[str, Any], dtype: operators.DType, name: str) -> Any:
    op = operators.elementwise(
        (values["elements"],),
        dtype,
        flops_per_element=values["flops_per_element"],
        inputs=values["inputs"],
        name=name,
        function=values["function"],
    )
    return op, 0, elementwise_schemes(values["inputs"])


def _attention(values: Mapping[str, Any], dtype: operators.DType, name: str) -> Any:
    sizes = (values[key] for key in ("batch", "queries", "keys", "head_dim"))
    op = operators.attention(*sizes, causal=values["causal"], group=values["group"], dtype=dtype, name=name)
    return op, 0, attention_schemes()


def _embedding(values: Mapping[str, Any], dtype: operators.DType, name: str) -> Any:
    shape = (values["lookups"], values["dim"])
    op = operators.elementwise(shape, dtype, flops_per_element=0, name=name, function=compute_pb2.EMBEDDING)
    return op, values["rows"] * values["dim"] * operators.dtype_bytes(dtype), embedding_schemes()


KINDS: Mapping[str, KernelKind] = {
    "gemm": KernelKind(("m", "k", "n"), {"batch": 1, "weights": False}, _gemm),
    "elementwise": KernelKind(
        ("elements",),
        {"flops_per_element": 1, "inputs": 1, "function": compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED},
        _elementwise,
    ),
    "attention": KernelKind(("batch", "queries", "keys", "head_dim"), {"causal": False, "group": 1}, _attention),
    "embedding": KernelKind(("lookups", "dim", "rows"), {}, _embedding),
}
"""The kinds a file's ``kind`` names."""


def output_bytes(kernel: Kernel) -> int:
    """The size of ``kernel``'s output, whole: a GEMM's ``batch m n`` elements, an element-wise operator's
    ``elements``, attention's ``batch queries head_dim``."""
    shape = operator_shapes.shape_of(kernel.operator)
    size = operators.dtype_bytes(kernel.operator.dtype)
    if isinstance(shape, operator_shapes.GemmShape):
        return shape.batch * shape.m * shape.n * size
    if isinstance(shape, operator_shapes.ElementwiseShape):
        return shape.elements * size
    if isinstance(shape, operator_shapes.AttentionShape):
        return shape.batch * shape.queries * shape.head_dim * size
    raise GraphError(f"kernel {kernel.name!r}", "a convolution has no place in a dataflow graph file")


def kernel_entry(kernel: Kernel, dtype: operators.DType) -> dict[str, object]:
    """``kernel`` as a file's entry (``dtype`` is the graph's); :class:`GraphError` when no entry gives it back."""
    kind, values = _values(kernel)
    entry: dict[str, object] = {"name": kernel.name, "kind": kind, **values}
    if "function" in values:
        entry["function"] = function_name(values["function"])  # type: ignore[arg-type]
    op_dtype = kernel.operator.dtype
    built, weights, offered = KINDS[kind].build({**KINDS[kind].options, **values}, op_dtype, kernel.name)
    if kernel.weight_bytes != weights:
        entry["weight_bytes"] = kernel.weight_bytes
    if op_dtype != dtype:
        entry["dtype"] = operators.dtype_name(op_dtype)
    if kernel.schemes != offered:
        entry["schemes"] = [scheme_entry(scheme, offered) for scheme in kernel.schemes]
    for total in ("flops", "bytes"):  # an operator whose totals its builder set by hand
        if getattr(built, total) != getattr(kernel.operator, total):
            entry[total] = getattr(kernel.operator, total)
            setattr(built, total, getattr(kernel.operator, total))
    built.name = kernel.operator.name
    if built != kernel.operator:
        raise GraphError(f"kernel {kernel.name!r}", "its operator is not one a graph file can describe")
    return entry


def _values(kernel: Kernel) -> tuple[str, dict[str, object]]:
    """The kind and the keys (those not at their defaults) a file writes for ``kernel``'s operator."""
    shape = operator_shapes.shape_of(kernel.operator)
    if isinstance(shape, operator_shapes.GemmShape):
        values: dict[str, object] = {"m": shape.m, "k": shape.k, "n": shape.n, "weights": kernel.slots == 1}
        return "gemm", values | ({"batch": shape.batch} if shape.batch != 1 else {})
    if isinstance(shape, operator_shapes.AttentionShape):
        values = {"batch": shape.batch, "queries": shape.queries, "keys": shape.keys, "head_dim": shape.head_dim}
        return "attention", values | {"causal": shape.causal} | ({"group": shape.group} if shape.group != 1 else {})
    if not isinstance(shape, operator_shapes.ElementwiseShape):
        raise GraphError(f"kernel {kernel.name!r}", "a convolution has no place in a dataflow graph file")
    op, size = kernel.operator, operators.dtype_bytes(kernel.operator.dtype)
    gather = shape.function == compute_pb2.EMBEDDING and not op.flops and kernel.slots == 1
    if gather and {s.name for s in kernel.schemes} <= {s.name for s in embedding_schemes()}:
        rows = kernel.weight_bytes // size if kernel.weight_bytes % size == 0 and kernel.weight_bytes else 1
        return "embedding", {"lookups": shape.elements, "dim": 1, "rows": rows}
    values = {"elements": shape.elements, "flops_per_element": op.flops // shape.elements}
    moved = op.bytes // (shape.elements * size)  # inputs and output, when the bytes are the builder's own
    exact = 2 <= moved <= _MOST_INPUTS + 1 and moved * shape.elements * size == op.bytes
    values["inputs"] = moved - 1 if exact else max(1, kernel.slots)
    if shape.function != compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED:
        values["function"] = shape.function
    return "elementwise", values
