"""A kernel's ``schemes`` in a dataflow-graph file: each a name its kind offers, or a scheme of its own written out.

A scheme written out is a mapping: ``name``; ``inputs``, the layout each input slot takes (``R``, ``S0``, ``S1``);
``output``, the result's layout (those or ``P``, partial sums); ``divides``, the operator dimension the group splits
(``m``, ``n``, ``k`` or ``batch`` of a GEMM, ``elements`` of an element-wise or embedding kernel, ``batch`` or
``queries`` of attention; null or left out: every device runs the whole kernel); ``weights_split`` (default true),
whether the weights are divided among the group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.file_values import Problems, shown
from stratasim.workload_layer.dataflow.graph import LAYOUTS, Layout, Scheme
from stratasim.workload_layer.dataflow.sharding import DIVISIBLE

__all__ = ["read_schemes", "scheme_entry"]

_KEYS = ("name", "inputs", "output", "divides", "weights_split")


def read_schemes(
    value: object, path: str, offered: tuple[Scheme, ...], op: compute_pb2.OperatorDesc, problems: Problems
) -> tuple[Scheme, ...]:
    """The schemes ``value`` (a kernel's ``schemes`` at ``path``) lists: names of ``offered`` ones or mappings;
    ``offered`` itself when any is wrong (the problem is recorded)."""
    if not isinstance(value, list) or not value:
        problems.add(path, f"expected a non-empty list of scheme names or mappings, got {shown(value)}")
        return offered
    count = len(problems.found)
    known = {scheme.name: scheme for scheme in offered}
    schemes: list[Scheme] = []
    for index, item in enumerate(value):
        where = f"{path}[{index}]"
        if isinstance(item, Mapping):
            scheme = _written(item, where, op, problems)
        elif isinstance(item, str) and item in known:
            scheme = known[item]
        else:
            problems.add(
                where, f"unknown scheme {shown(item)}; this kernel offers {', '.join(known)}, or write one out"
            )
            scheme = None
        if scheme is not None:
            schemes.append(scheme)
    names = [scheme.name for scheme in schemes]
    if len(set(names)) < len(names):
        problems.add(path, "names a scheme twice")
    return tuple(schemes) if len(problems.found) == count else offered


def scheme_entry(scheme: Scheme, offered: tuple[Scheme, ...]) -> str | dict[str, object]:
    """``scheme`` as a file writes it: its name when its kind offers it, else written out."""
    if scheme in offered:
        return scheme.name
    entry: dict[str, object] = {"name": scheme.name, "inputs": list(scheme.inputs), "output": scheme.output}
    if scheme.divides is not None:
        entry["divides"] = scheme.divides
    if not scheme.weights_split:
        entry["weights_split"] = False
    return entry


def _written(item: Mapping[str, object], path: str, op: compute_pb2.OperatorDesc, problems: Problems) -> Scheme | None:
    count = len(problems.found)
    problems.keys(item, path, _KEYS, ("name", "inputs", "output"))
    name = problems.text(item.get("name", "?"), f"{path}.name")
    inputs = item.get("inputs", [])
    if not isinstance(inputs, list) or not all(layout in LAYOUTS[:3] for layout in inputs):
        problems.add(f"{path}.inputs", f"expected a list of layouts R, S0 or S1, got {shown(inputs)}")
    output = item.get("output", "R")
    if output not in LAYOUTS:
        problems.add(f"{path}.output", f"expected a layout R, S0, S1 or P, got {shown(output)}")
    divides = item.get("divides")
    dimensions = DIVISIBLE.get(op.WhichOneof("shape") or "", ())
    if divides is not None and divides not in dimensions:
        problems.add(f"{path}.divides", f"expected one of {', '.join(dimensions)} or null, got {shown(divides)}")
    split = problems.boolean(item.get("weights_split", True), f"{path}.weights_split")
    if len(problems.found) > count or name is None or split is None:
        return None
    layouts = tuple(cast(Layout, layout) for layout in cast(list[object], inputs))
    return Scheme(name, layouts, cast(Layout, output), cast(str | None, divides), split)
