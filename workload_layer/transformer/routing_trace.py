"""Routing traces: measured expert loads, per mixture-of-experts layer, as a small CSV file.

The file has the header ``layer,expert,tokens`` and one row per expert of each layer: ``layer`` counts the
mixture-of-experts layers from 0 (the model's layers ``0, k, 2k, ...`` for ``moe_every = k``), ``expert`` the
layer's experts from 0, and ``tokens`` the tokens routed to it (a count, or any non-negative share: only the
ratios matter). An expert a layer does not list takes none of its tokens. Every layer from 0 to the model's last
mixture-of-experts layer must appear, no other, each with at least one token; a row naming an expert the model
does not have, a negative or unreadable number, or a (layer, expert) given twice is an error naming the file, the
line and the key. Lines starting with ``#`` are comments. Such counts are what vLLM's and SGLang's expert
distribution recorders and TensorRT-LLM's expert statistics write per layer.
"""

from __future__ import annotations

import re
from fractions import Fraction

from stratasim.kernel.errors import InputError
from stratasim.kernel.safe_load import TABLE_BYTES, csv_rows, read_text
from stratasim.workload_layer.transformer.routing import Shares

__all__ = ["read_routing_trace"]

_COLUMNS = ("layer", "expert", "tokens")
_WHOLE = re.compile(r"\s*([0-9]{1,9})\s*")
_NUMBER = re.compile(r"\s*(-?)([0-9]{1,15}(?:\.[0-9]{0,12})?|\.[0-9]{1,12})\s*")


def read_routing_trace(path: str, layers: int, experts: int) -> tuple[Shares, ...]:
    """Each of ``layers`` mixture-of-experts layers' expert shares from the routing trace at ``path``, for a model
    of ``experts`` experts (module docstring)."""
    rows = [(line, row) for line, row in csv_rows(read_text(path, TABLE_BYTES, "routing trace"), path) if _data(row)]
    if not rows or [cell.strip() for cell in rows[0][1]] != list(_COLUMNS):
        raise InputError(path, "line 1" if rows else "", "expected the header layer,expert,tokens")
    loads: dict[int, dict[int, Fraction]] = {}
    for line, row in rows[1:]:
        if len(row) != len(_COLUMNS):
            raise InputError(
                path, f"line {line}", f"expected {len(_COLUMNS)} cells (layer,expert,tokens), got {len(row)}"
            )
        layer = _whole(row[0], path, line, "layer")
        expert = _whole(row[1], path, line, "expert")
        if layer >= layers:
            raise InputError(
                path, f"line {line}", f"layer {layer} does not exist: the model has {layers} mixture-of-experts layers"
            )
        if expert >= experts:
            raise InputError(
                path, f"line {line}", f"expert {expert} does not exist: the model has {experts} (0 to {experts - 1})"
            )
        if expert in loads.setdefault(layer, {}):
            raise InputError(path, f"line {line}", f"layer {layer}, expert {expert} is given twice")
        loads[layer][expert] = _tokens(row[2], path, line)
    return tuple(_shares(loads, layer, experts, path, layers) for layer in range(layers))


def _data(row: list[str]) -> bool:
    """Whether a CSV row holds data (neither empty nor a ``#`` comment)."""
    return bool(row) and any(cell.strip() for cell in row) and not row[0].lstrip().startswith("#")


def _whole(cell: str, path: str, line: int, key: str) -> int:
    matched = _WHOLE.fullmatch(cell)
    if matched is None:
        raise InputError(path, f"line {line}", f"{key}: expected a whole number from 0")
    return int(matched[1])


def _tokens(cell: str, path: str, line: int) -> Fraction:
    matched = _NUMBER.fullmatch(cell)
    if matched is None:
        raise InputError(path, f"line {line}", "tokens: expected a number of tokens (or a share), 0 or more")
    if matched[1] and Fraction(matched[2]):
        raise InputError(path, f"line {line}", "tokens: a count cannot be negative")
    return Fraction(matched[2])


def _shares(loads: dict[int, dict[int, Fraction]], layer: int, experts: int, path: str, layers: int) -> Shares:
    """Layer ``layer``'s loads as shares; a layer missing, or with no tokens, is an error."""
    if layer not in loads:
        raise InputError(
            path,
            "",
            f"layer {layer} is missing: the trace must give all {layers} mixture-of-experts layers (0 to {layers - 1})",
        )
    total = sum(loads[layer].values())
    if not total:
        raise InputError(path, "", f"layer {layer} routes no tokens: give at least one expert a positive count")
    return tuple(loads[layer].get(expert, Fraction(0)) / total for expert in range(experts))
