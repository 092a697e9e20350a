"""Dataflow graphs written as YAML or JSON files (the same mapping either way), and graphs written back.

A file names the graph, how many times it runs in sequence per pass (``repeat``), whether it trains and the dtype
of its operators, then lists its kernels (the kinds of :mod:`stratasim.workload_layer.dataflow.kinds`) and the
tensors between them::

    name: two-gemms
    repeat: 4
    training: true
    dtype: bf16
    kernels:
      - {name: up, kind: gemm, m: 2048, k: 4096, n: 16384, weights: true}
      - {name: act, kind: elementwise, elements: 33554432, flops_per_element: 8, function: gelu}
      - {name: down, kind: gemm, m: 2048, k: 16384, n: 4096, weights: true, schemes: [k, m]}
    tensors:
      - {name: h, from: up, to: act}
      - {from: act, to: down}

A tensor's ``bytes`` default to its producer's whole output, its ``slot`` (the consumer's input it fills) to 0 and
its ``name`` to ``from->to``. Every defect is one :class:`~stratasim.workload_layer.dataflow.graph.GraphError`
naming the file and the key path (``graph.yaml: kernels[2].m: expected a positive integer, got -3``), or the
kernels of a cycle; several defects are listed together.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from stratasim.kernel import operators
from stratasim.kernel.elementwise_functions import parse_function
from stratasim.kernel.errors import did_you_mean
from stratasim.kernel.safe_load import CONFIG_BYTES, parse_json, parse_yaml, read_text
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.file_schemes import read_schemes
from stratasim.workload_layer.dataflow.file_values import Problems, shown
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError, Kernel, Tensor
from stratasim.workload_layer.dataflow.kinds import COMMON_KEYS, KINDS, kernel_entry, output_bytes

__all__ = ["load_graph", "parse_graph", "dump", "save_graph"]

_TOP_KEYS = ("name", "repeat", "training", "dtype", "kernels", "tensors")
_TENSOR_KEYS = ("name", "from", "to", "bytes", "slot")


def load_graph(path: str | Path) -> DataflowGraph:
    """The dataflow graph in the YAML or JSON file ``path`` (JSON when it ends in ``.json``); its name defaults
    to the file's stem."""
    text = read_text(path, CONFIG_BYTES, "dataflow graph")
    source = str(path)
    data = parse_json(text, source, unique_keys=True) if source.endswith(".json") else parse_yaml(text, source)
    if isinstance(data, dict) and "name" not in data:
        data = {"name": Path(path).stem, **data}
    return parse_graph(data, source)


def save_graph(graph: DataflowGraph, path: str | Path) -> None:
    """Write ``graph`` to ``path`` as :func:`load_graph` reads it: JSON when it ends in ``.json``, else YAML.
    :class:`GraphError` naming the file when it cannot be written."""
    data = dump(graph)
    text = json.dumps(data, indent=1) if str(path).endswith(".json") else yaml.safe_dump(data, sort_keys=False)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GraphError(str(path), f"cannot write the dataflow graph: {exc.strerror or exc}") from None


def parse_graph(data: object, source: str) -> DataflowGraph:
    """The dataflow graph the mapping ``data`` describes (read from ``source``, which messages name)."""
    if not isinstance(data, Mapping):
        raise GraphError(source, f"expected a mapping with {', '.join(_TOP_KEYS)}, got {shown(data)}")
    problems = Problems()
    problems.keys(data, "", _TOP_KEYS, ("kernels",))
    name = problems.text(data.get("name", Path(source).stem), "name")
    repeat = problems.integer(data.get("repeat", 1), "repeat")
    training = problems.boolean(data.get("training", False), "training")
    dtype = _dtype(data.get("dtype", "bf16"), "dtype", problems)
    entries = data.get("kernels", [])
    kernels = _kernels(entries, dtype, problems) if "kernels" in data else []
    declared = (
        [str(k["name"]) for k in entries if isinstance(k, Mapping) and "name" in k] if isinstance(entries, list) else []
    )
    tensors = _tensors(data.get("tensors", []), {k.name: k for k in kernels}, declared, problems)
    _raise(source, problems)
    assert name is not None and repeat is not None and training is not None  # problems would have said
    try:
        return DataflowGraph(name, tuple(kernels), tuple(tensors), repeat, training)
    except GraphError as exc:
        raise GraphError(source, str(exc)) from None


def dump(graph: DataflowGraph) -> dict[str, object]:
    """``graph`` as the mapping a file holds (keys at their defaults left out), which :func:`parse_graph` reads
    back into an equal graph; an operator's name becomes its kernel's. :class:`GraphError` for a kernel no file
    can describe (a convolution)."""
    dtype = graph.kernels[0].operator.dtype
    kernels = {k.name: k for k in graph.kernels}
    tensors = []
    for tensor in graph.tensors:
        entry: dict[str, object] = {"from": tensor.source, "to": tensor.target}
        if tensor.name != _default_name(tensor.source, tensor.target, tensor.slot):
            entry = {"name": tensor.name, **entry}
        if tensor.bytes != output_bytes(kernels[tensor.source]):
            entry["bytes"] = tensor.bytes
        if tensor.slot:
            entry["slot"] = tensor.slot
        tensors.append(entry)
    return {
        "name": graph.name,
        "repeat": graph.repeat,
        "training": graph.training,
        "dtype": operators.dtype_name(dtype),
        "kernels": [kernel_entry(kernel, dtype) for kernel in graph.kernels],
        "tensors": tensors,
    }


def _raise(source: str, problems: Problems) -> None:
    found = problems.found
    if len(found) == 1:
        raise GraphError(f"{source}: {found[0][0] or '<top>'}", found[0][1])
    if found:
        lines = "".join(f"\n  {path or '<top>'}: {message}" for path, message in found)
        raise GraphError(source, f"{len(found)} problems{lines}")


def _default_name(source: str, target: str, slot: int) -> str:
    return f"{source}->{target}" + (f":{slot}" if slot else "")


def _dtype(value: object, path: str, problems: Problems) -> operators.DType | None:
    try:
        return operators.parse_dtype(value)
    except ValueError as exc:
        problems.add(path, str(exc).replace(repr(value), shown(value)))
        return None


def _list(value: object, path: str, problems: Problems) -> list[Any]:
    if isinstance(value, list):
        return value
    problems.add(path, f"expected a list of mappings, got {shown(value)}")
    return []


def _kernels(value: object, dtype: operators.DType | None, problems: Problems) -> list[Kernel]:
    kernels = []
    entries = _list(value, "kernels", problems)
    if not entries and isinstance(value, list):
        problems.add("kernels", "expected at least one kernel")
    for index, entry in enumerate(entries):
        kernel = _kernel(entry, f"kernels[{index}]", dtype, problems)
        if kernel is not None:
            kernels.append(kernel)
    return kernels


def _kernel(entry: object, path: str, dtype: operators.DType | None, problems: Problems) -> Kernel | None:
    if not isinstance(entry, Mapping):
        problems.add(path, f"expected a mapping with name, kind and the kind's sizes, got {shown(entry)}")
        return None
    written = entry.get("kind")
    kind = KINDS.get(written) if isinstance(written, str) else None
    if kind is None:
        said = "required" if "kind" not in entry else f"unknown kind {shown(written)}"
        problems.add(f"{path}.kind", f"{said}; expected one of {', '.join(KINDS)}")
        return None
    count = len(problems.found)
    problems.keys(entry, path, (*COMMON_KEYS, *kind.sizes, *kind.options), ("name", *kind.sizes))
    name = problems.text(entry.get("name", "?"), f"{path}.name")
    values = {key: problems.integer(entry[key], f"{path}.{key}") for key in kind.sizes if key in entry}
    values |= {
        key: _option(entry.get(key, default), default, f"{path}.{key}", problems)
        for key, default in kind.options.items()
    }
    if "dtype" in entry:
        dtype = _dtype(entry["dtype"], f"{path}.dtype", problems)
    if len(problems.found) > count or dtype is None or name is None:
        return None
    try:
        op, weights, offered = kind.build(values, dtype, name)
    except ValueError as exc:
        problems.add(path, str(exc))
        return None
    weights = _overrides(entry, path, op, weights, problems)
    schemes = (
        read_schemes(entry["schemes"], f"{path}.schemes", offered, op, problems) if "schemes" in entry else offered
    )
    return Kernel(name, op, schemes, weights)


def _overrides(
    entry: Mapping[str, Any], path: str, op: compute_pb2.OperatorDesc, weights: int, problems: Problems
) -> int:
    """Set the operator's totals an entry gives by hand (``flops``, ``bytes``); the weight bytes it gives, or
    ``weights``."""
    for total in ("flops", "bytes"):
        if total in entry:
            where = f"{path}.{total}"
            value = problems.size(entry[total], where) if total == "bytes" else problems.integer(entry[total], where, 0)
            if value is not None and value >= 2**64:
                problems.add(where, f"must fit in 64 bits, got {value}")
            elif value is not None:
                setattr(op, total, value)
    if "weight_bytes" in entry:
        return problems.size(entry["weight_bytes"], f"{path}.weight_bytes") or 0
    return weights


def _option(value: object, default: object, path: str, problems: Problems) -> Any:
    """An optional key's value: an element-wise ``function`` by name, a flag, or an integer (``flops_per_element``
    from 0, the others from 1)."""
    if path.endswith(".function"):
        if value == default:
            return value
        try:
            return parse_function(value)
        except ValueError as exc:
            problems.add(path, str(exc).replace(repr(value), shown(value)))
            return None
    if isinstance(default, bool):
        return problems.boolean(value, path)
    return problems.integer(value, path, least=0 if path.endswith("flops_per_element") else 1)


def _tensors(value: object, kernels: Mapping[str, Kernel], declared: list[str], problems: Problems) -> list[Tensor]:
    """The tensors listed in ``value``; ``declared`` names every kernel entry, ``kernels`` those that are valid."""
    tensors = []
    for index, entry in enumerate(_list(value, "tensors", problems)):
        path = f"tensors[{index}]"
        if not isinstance(entry, Mapping):
            problems.add(path, f"expected a mapping with from and to, got {shown(entry)}")
            continue
        count = len(problems.found)
        problems.keys(entry, path, _TENSOR_KEYS, ("from", "to"))
        ends = [_end(entry, key, path, declared, problems) for key in ("from", "to") if key in entry]
        slot = problems.integer(entry.get("slot", 0), f"{path}.slot", least=0)
        source, target = ends if len(ends) == 2 else [None, None]
        if len(problems.found) > count or slot is None or source is None or target is None:
            continue
        if source not in kernels or target not in kernels:  # a kernel with a problem of its own
            continue
        name = problems.text(entry.get("name", _default_name(source, target, slot)), f"{path}.name")
        size = problems.size(entry["bytes"], f"{path}.bytes") if "bytes" in entry else output_bytes(kernels[source])
        if name is not None and size is not None:
            tensors.append(Tensor(name, source, target, size, slot))
    return tensors


def _end(entry: Mapping[str, Any], key: str, path: str, declared: list[str], problems: Problems) -> str | None:
    """The kernel a tensor's ``key`` (from or to) names; None, without a problem of its own, when that kernel's
    entry has one."""
    name = problems.text(entry[key], f"{path}.{key}")
    if name is not None and name not in declared:
        hint = did_you_mean(name, declared)
        problems.add(f"{path}.{key}", f"no kernel named {shown(name)}; {hint}the graph has {', '.join(declared)}")
    return name
