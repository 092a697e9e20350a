"""The operators of a Chakra trace converted from a PyTorch execution trace, read from what Chakra's converter keeps
of them, and their share of a new tensor-parallel degree: what ``stratasim trace reshard`` applies to the compute
nodes that carry no ``stratasim.op`` attribute.

Chakra's converter names a node by its ATen operator and keeps PyTorch's inputs and outputs as Python literals:
``inputs.shapes`` (``[[4096, 1024], [1024, 3072]]``), ``inputs.types`` (``['Tensor(c10::BFloat16)', ...]``) and
``inputs.values``. From them:

- GEMMs: ``aten::mm`` and ``aten::addmm`` (``[M, K] x [K, N]``, after the bias), ``aten::bmm`` and
  ``aten::baddbmm`` (``[B, M, K] x [B, K, N]``), ``aten::matmul`` (leading dimensions folded into M against a 2-D
  operand, else into the batch) and ``aten::linear`` (input ``[..., K]``, weight ``[N, K]``);
- attention: PyTorch's fused scaled-dot-product kernels (flash, memory-efficient, cuDNN) and their backward
  passes, query ``[B, heads, S, D]`` against keys ``[B, kv heads, S_kv, D]``, causal when ``is_causal`` is True;
- element-wise: every other node with tensors, over its largest tensor's elements, reading its inputs and writing
  that output (an approximation by bytes);
- nodes PyTorch ran on the CPU (``is_cpu_op``) are kept as recorded: their time does not follow TP.

The rule for a new TP (``ratio = old TP / new TP``) is told by which dimension is not the model's: the hidden size
``H`` and the tokens ``T`` come from the trace's first layer norm (``aten::layer_norm``, ``aten::native_layer_norm``,
``aten::rms_norm``: its input's last dimension and the rest); a GEMM scales the one dimension that is neither (the
output features of a column-parallel GEMM, the input features of a row-parallel one, wherever the backward pass puts
them), a batched GEMM its batch (heads), attention its heads (whole heads and key-value heads), an element-wise
operator its elements unless its last dimension is ``T`` or ``H`` (replicated). Whatever does not fit is refused,
naming the node: a trace recorded at TP 1 has square row-parallel GEMMs (``[T, H] x [H, H]``), whose split dimension
cannot be told.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from fractions import Fraction
from math import prod

from stratasim.chakra.et_def_pb2 import Node
from stratasim.kernel import operators
from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import compute_pb2
from stratasim.v1.compute_pb2 import OperatorDesc

__all__ = [
    "NORMS",
    "ModelDimensions",
    "has_tensors",
    "model_dimensions",
    "output_bytes",
    "rescaled_torch_operator",
    "weight_bytes",
]

_GEMMS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"})
_ATTENTION = {  # name: (index of the query among the inputs, index of is_causal)
    "aten::scaled_dot_product_attention": (0, 5),
    "aten::_scaled_dot_product_flash_attention": (0, 4),
    "aten::_scaled_dot_product_efficient_attention": (0, 6),
    "aten::_scaled_dot_product_cudnn_attention": (0, 6),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 11),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 11),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 11),
}
NORMS = frozenset({"aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm"})
"""The layer norms whose input gives the model's dimensions, and whose position marks where a layer begins."""
_DTYPES = {
    "c10::BFloat16": compute_pb2.BF16,
    "c10::Half": compute_pb2.FP16,
    "float": compute_pb2.FP32,
    "double": compute_pb2.FP64,
}


@dataclass(frozen=True)
class ModelDimensions:
    """The tokens ``T`` and hidden size ``H`` of a rank's layers: the dimensions TP does not split."""

    tokens: int
    hidden: int


def _literal(text: str, node: Node, what: str) -> list[object]:
    """``text`` (a node's ``inputs.shapes`` or the like) as the Python list it spells."""
    try:
        value = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError):
        value = None
    if not isinstance(value, list):
        raise WorkloadError(f"node {node.id} ({node.name}): its {what} ({text[:60]!r}) is not a Python list")
    return value


def _shapes(node: Node) -> list[list[int]]:
    """The tensor shapes among ``node``'s inputs (non-tensors as empty shapes)."""
    shapes = _literal(node.inputs.shapes, node, "inputs.shapes")
    return [[int(d) for d in s] if isinstance(s, list) and all(isinstance(d, int) for d in s) else [] for s in shapes]


def _dtype(node: Node) -> compute_pb2.DType.ValueType:
    """The first floating-point dtype among ``node``'s input and output types (BF16 when none is named)."""
    types = _literal(node.inputs.types, node, "inputs.types") + _literal(node.outputs.types, node, "outputs.types")
    for kind in types:
        for spelling, dtype in _DTYPES.items():
            if isinstance(kind, str) and kind == f"Tensor({spelling})":
                return dtype
    return compute_pb2.BF16


def model_dimensions(nodes: list[Node]) -> ModelDimensions:
    """``T`` and ``H`` from the first layer norm among ``nodes``."""
    for node in nodes:
        if node.name in NORMS:
            shapes = [s for s in _shapes(node) if s]
            if shapes and len(shapes[0]) >= 2:
                return ModelDimensions(prod(shapes[0][:-1]), shapes[0][-1])
    raise WorkloadError(
        f"no layer norm ({', '.join(sorted(NORMS))}) with a tensor input of two or more dimensions gives "
        "the hidden size and tokens, which tell a tensor-parallel GEMM's split dimension from the rest"
    )


def _scaled(value: int, ratio: Fraction, node: Node, what: str) -> int:
    """``value * ratio``, which must be whole (else refused, naming ``node``)."""
    scaled = value * ratio
    if scaled.denominator != 1 or scaled < 1:
        raise WorkloadError(
            f"node {node.id} ({node.name}): its {what} ({value}) times the TP ratio {ratio} is not a whole number, "
            "so this TP does not divide the split dimension"
        )
    return int(scaled)


def _gemm_dimensions(node: Node) -> tuple[int, int, int, int]:
    """``node``'s matrix product as (batch, M, K, N) from its input shapes."""
    shapes = [s for s in _shapes(node) if s]
    if node.name in ("aten::addmm", "aten::baddbmm") and len(shapes) == 3:
        shapes = shapes[1:]
    if node.name == "aten::linear" and len(shapes) >= 2 and len(shapes[1]) == 2:
        return 1, prod(shapes[0][:-1]), shapes[0][-1], shapes[1][0]
    if len(shapes) != 2 or len(shapes[0]) < 2 or len(shapes[1]) < 2 or shapes[0][-1] != shapes[1][-2]:
        raise WorkloadError(
            f"node {node.id} ({node.name}): its input shapes {shapes} are not two matrices [.., M, K] x [.., K, N]"
        )
    a, b = shapes
    if len(b) == 2:
        return 1, prod(a[:-1]), a[-1], b[-1]
    return prod(a[:-2]), a[-2], a[-1], b[-1]


def _gemm(node: Node, dtype: compute_pb2.DType.ValueType, ratio: Fraction, dims: ModelDimensions) -> OperatorDesc:
    """``node``'s matrix product on a rank of the new TP: its batch (heads) scaled, or its one dimension that is
    neither the tokens nor the hidden size."""
    batch, m, k, n = _gemm_dimensions(node)
    if batch > 1:
        return operators.gemm(m, k, n, dtype, batch=_scaled(batch, ratio, node, "batch"), name=node.name)
    shape = {"M": m, "K": k, "N": n}
    split = [name for name, value in shape.items() if value not in (dims.tokens, dims.hidden)]
    if len(split) != 1:
        raise WorkloadError(
            f"node {node.id} ({node.name}): [M, K] x [K, N] = {[m, k]} x {[k, n]} has {len(split)} dimensions other "
            f"than the tokens ({dims.tokens}) and the hidden size ({dims.hidden}), where a tensor-parallel GEMM has "
            "exactly one, its split one (a trace recorded at TP 1 leaves row-parallel GEMMs square)"
        )
    shape[split[0]] = _scaled(shape[split[0]], ratio, node, f"GEMM {split[0]}")
    return operators.gemm(shape["M"], shape["K"], shape["N"], dtype, name=node.name)


def _attention(node: Node, dtype: compute_pb2.DType.ValueType, ratio: Fraction) -> OperatorDesc:
    """``node``'s fused attention over its heads scaled by ``ratio``, from its query and key shapes and its
    ``is_causal`` input."""
    query, causal = _ATTENTION[node.name]
    shapes = _shapes(node)
    if len(shapes) < query + 2 or len(shapes[query]) != 4 or len(shapes[query + 1]) != 4:
        raise WorkloadError(
            f"node {node.id} ({node.name}): expected a query [B, heads, S, D] and keys [B, kv heads, S_kv, D] "
            f"among its input shapes {shapes}"
        )
    (batch, heads, queries, head_dim), (_, kv_heads, keys, _) = shapes[query], shapes[query + 1]
    values = _literal(node.inputs.values, node, "inputs.values") if node.inputs.values else []
    heads, kv_heads = _scaled(heads, ratio, node, "query heads"), _scaled(kv_heads, ratio, node, "key-value heads")
    if heads % kv_heads:
        raise WorkloadError(f"node {node.id} ({node.name}): {heads} query heads do not share {kv_heads} kv heads")
    return operators.attention(
        batch * heads, queries, keys, head_dim, causal=len(values) > causal and values[causal] is True,
        backward=node.name.endswith("_backward"), group=heads // kv_heads, dtype=dtype, name=node.name,
    )  # fmt: skip


def has_tensors(node: Node) -> bool:
    """Whether ``node`` records the shape of a tensor among its inputs or outputs."""
    return any(_shapes(node)) or any(_output_shapes(node))


def rescaled_torch_operator(node: Node, ratio: Fraction, dims: ModelDimensions) -> compute_pb2.OperatorDesc:
    """The operator the compute node ``node`` (converted from PyTorch) runs on a rank of a TP ``ratio`` times
    smaller. Raises :class:`WorkloadError` naming the node when it cannot be classified or its split dimension is
    not divided."""
    dtype = _dtype(node)
    if node.name in _GEMMS:
        return _gemm(node, dtype, ratio, dims)
    if node.name in _ATTENTION:
        return _attention(node, dtype, ratio)
    inputs = [s for s in _shapes(node) if s]
    largest = max(inputs + [s for s in _output_shapes(node) if s], key=prod)
    elements = prod(largest)
    if largest[-1] not in (dims.tokens, dims.hidden):
        elements = _scaled(elements, ratio, node, "element count")
    return operators.elementwise([elements], dtype, inputs=len(inputs), name=node.name)


def _output_shapes(node: Node) -> list[list[int]]:
    shapes = _literal(node.outputs.shapes, node, "outputs.shapes")
    return [[int(d) for d in s] if isinstance(s, list) and all(isinstance(d, int) for d in s) else [] for s in shapes]


def weight_bytes(node: Node) -> int:
    """The bytes of the weight ``node`` multiplies by: K x N elements of a GEMM against a matrix (``aten::linear``'s
    weight, or the second operand of a 2-D product), 0 for any other node or a batched GEMM (attention's)."""
    if node.name not in _GEMMS:
        return 0
    batch, _, k, n = _gemm_dimensions(node)
    return 0 if batch > 1 else k * n * operators.dtype_bytes(_dtype(node))


def output_bytes(node: Node) -> int:
    """The bytes of ``node``'s largest output tensor (``outputs.shapes``, at its dtype), 0 when it records none."""
    shapes = [s for s in _output_shapes(node) if s]
    return max(prod(shape) for shape in shapes) * operators.dtype_bytes(_dtype(node)) if shapes else 0
