"""A profile row as the model sees it: which fitted form prices it (its *class*) and the time that form gives.

GEMMs and batched GEMMs share the ``gemm`` class; causal attention splits into ``attention_forward`` and
``attention_backward``; decode attention and each element-wise or normalisation kind is a class of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.measured.forms import (
    BF16_BYTES,
    attention_backward_time,
    attention_features,
    attention_forward_time,
    bandwidth_time,
    fits_in_cache,
    gemm_features,
    gemm_time,
)
from stratasim.compute_layer.measured.profile_rows import ELEMENTWISE_KINDS, ProfileRow
from stratasim.kernel.operator_shapes import AttentionShape

__all__ = ["class_of", "row_model", "decode_bytes", "ELEMENTWISE_TENSORS", "CLASSES", "RowModel"]
__all__ += ["WORK_BOUND", "elementwise_cached"]

ELEMENTWISE_TENSORS = {"add": 3, "silu_mul": 3, "gelu": 2, "layernorm": 2, "rmsnorm": 2, "softmax": 2, "copy": 2}
"""Tensors of ``elements`` values each kind reads or writes once (two inputs and an output for ``add``)."""

WORK_BOUND = ("softmax",)
"""Element-wise kinds bound by their per-row work (a softmax's exponentials and two reductions per row), not by the
memory level: from 16M elements up the profile's softmax moves about 1.3 TB/s, well under add's or
copy's there, so the L2 would not speed it up; it is priced at its one fitted bandwidth at every size."""

CLASSES = ("gemm", "attention_forward", "attention_backward", "attention_decode", *ELEMENTWISE_KINDS)
"""Every fitted class, in report order."""

RowModel = Callable[[Mapping[str, float]], float]


def decode_bytes(query_heads: int, group: int, keys: int, head_dim: int, element_bytes: int = BF16_BYTES) -> int:
    """Bytes one decode step's attention moves: the KV cache read (``query_heads / group`` heads of ``keys`` keys and
    values) and one query read and one output written per query head."""
    return (2 * (query_heads // group) * keys + 2 * query_heads) * head_dim * element_bytes


def elementwise_cached(kind: str, moved: int, device: Device) -> bool:
    """Whether an element-wise ``kind`` moving ``moved`` bytes is priced at its L2 bandwidth on ``device``."""
    return kind not in WORK_BOUND and fits_in_cache(moved, device)


def class_of(row: ProfileRow) -> str:
    """The fitted class that prices ``row`` (``tiny_kernel`` for the floor's row, which no class fits)."""
    if row.kind in ("gemm", "bmm"):
        return "gemm"
    if row.kind == "attention_causal":
        return f"attention_{row.shape['pass_']}"
    return row.kind


def row_model(row: ProfileRow, device: Device) -> RowModel:
    """The modelled time in seconds of ``row`` as a function of its class's parameters."""
    kind = row.kind
    if kind in ("gemm", "bmm"):
        batch = row.dim("B") if kind == "bmm" else 1
        gemm = gemm_features(batch, row.dim("M"), row.dim("K"), row.dim("N"), device)
        return lambda params: gemm_time(params, gemm)
    if kind == "attention_causal":
        seq, backward = row.dim("seq"), row.shape["pass_"] == "backward"
        shape = AttentionShape(row.dim("batch_heads"), seq, seq, row.dim("head_dim"), 1, True, backward)
        attention = attention_features(shape)
        time = attention_backward_time if backward else attention_forward_time
        return lambda params: time(params, attention)
    if kind == "attention_decode":
        heads = row.dim("batch") * row.dim("heads")
        moved = decode_bytes(heads, row.dim("heads") // row.dim("kv_heads"), row.dim("context"), row.dim("head_dim"))
        cached = fits_in_cache(moved, device)
        return lambda params: bandwidth_time(params, moved, cached)
    if kind in ELEMENTWISE_TENSORS:
        moved = row.dim("elements") * ELEMENTWISE_TENSORS[kind] * BF16_BYTES
        cached = elementwise_cached(kind, moved, device)
        return lambda params: bandwidth_time(params, moved, cached)
    raise ValueError(f"no fitted class prices a {kind} row")
