"""Chakra's communicator groups: which NPUs a collective's ``pg_name`` names.

Two sources exist in the wild: ASTRA-sim's ``--comm-group-configuration`` JSON file (each ``pg_name`` with its
NPU ids), and the ``process_group:init`` METADATA nodes Chakra's PyTorch converter writes into each rank's
trace (PyTorch's process-group records); the trace's own records take precedence, as in ASTRA-sim.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stratasim.chakra import et_def_pb2
from stratasim.chakra.et_def_pb2 import Node
from stratasim.kernel.errors import InputError, WorkloadError
from stratasim.kernel.safe_load import CONFIG_BYTES, check_depth, parse_json, read_text

__all__ = ["CommGroups", "read_comm_groups", "write_comm_groups", "trace_groups", "communicator_group"]

_DEFAULT_PG = "0"
"""PyTorch's default process group, which ASTRA-sim runs over every NPU when no group of that name is defined."""

_PG_INIT = "process_group:init"
"""What the name of a PyTorch METADATA node listing the process groups contains."""


@dataclass(frozen=True)
class CommGroups:
    """Communicator groups: each name (a ``pg_name``) with its NPU ids, sorted (empty: every NPU), and where
    they were defined, for error messages."""

    groups: Mapping[str, tuple[int, ...]]
    source: str


def _members(value: object, where: str, name: str, allow_empty: bool) -> tuple[int, ...]:
    """The NPU ids of group ``name`` (a quoted pg_name or, for a file that may not be the user's, its position),
    sorted, from a JSON list; raises :class:`WorkloadError` prefixed ``where`` unless it is a list of distinct
    non-negative integers (non-empty unless ``allow_empty``). What was found is said by its type, never echoed."""
    if not isinstance(value, list) or not all(type(npu) is int and npu >= 0 for npu in value):
        found = (
            f"a list holding {_kind(next(n for n in value if type(n) is not int or n < 0))}"
            if isinstance(value, list)
            else _kind(value)
        )
        raise WorkloadError(f"{where}: group {name} must be a list of NPU ids (integers from 0), found {found}")
    if not value and not allow_empty:
        raise WorkloadError(f"{where}: group {name} is empty")
    members = tuple(sorted(set(value)))
    if len(members) != len(value):
        raise WorkloadError(f"{where}: group {name} names an NPU twice")
    return members


def _kind(value: object) -> str:
    """What ``value`` is, without its contents: "a string", "a negative integer", ..."""
    if type(value) is int:
        return "a negative integer"
    return {
        bool: "a boolean",
        str: "a string",
        float: "a number with a fraction",
        dict: "an object",
        list: "a list",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def read_comm_groups(path: str | Path) -> CommGroups:
    """The communicator groups file ASTRA-sim takes as ``--comm-group-configuration``: a JSON object mapping each
    ``pg_name`` to a non-empty list of NPU ids. Raises :class:`WorkloadError` naming the file and the defect; the
    file may be anyone's, so its groups are named by position and nothing it holds is echoed."""
    try:
        data = parse_json(read_text(path, CONFIG_BYTES, "communicator groups file"), str(path), unique_keys=True)
    except InputError as exc:
        if exc.what == "duplicate key":
            raise WorkloadError(f"{path}: a group is defined twice") from None
        raise WorkloadError(str(exc)) from None
    if not isinstance(data, dict):
        raise WorkloadError(
            f"{path}: expected a JSON object mapping communicator names (pg_name) to lists of NPU ids, "
            f"found {_kind(data)}"
        )
    return CommGroups(
        {
            name: _members(value, str(path), f"#{index}", False)
            for index, (name, value) in enumerate(data.items(), start=1)
        },
        str(path),
    )


def write_comm_groups(path: str | Path, groups: Mapping[str, Sequence[int]]) -> None:
    """Write ``groups`` as a communicator groups file, one group a line; raises :class:`WorkloadError` on I/O
    failure."""
    lines = [f"  {json.dumps(name)}: {json.dumps(list(members))}" for name, members in groups.items()]
    try:
        Path(path).write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot write the communicator groups: {exc.strerror or exc}") from None


def _pg_records(text: str, where: str) -> list[tuple[str, tuple[int, ...]]]:
    """The ``(pg_name, ranks)`` of the PyTorch process-group records in a ``process_group:init`` node's
    ``inputs.values``: Chakra stores ``str()`` of PyTorch's input list, one JSON string of records (plain JSON
    is accepted too)."""
    problem = f"{where}: cannot read its process groups"
    try:
        records = parse_json(text, problem)
    except InputError as exc:
        if "nested deeper" in exc.what:
            raise WorkloadError(str(exc)) from None
        try:
            records = ast.literal_eval(text)
            check_depth(records, problem)
        except InputError as deep:
            raise WorkloadError(str(deep)) from None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise WorkloadError(f"{problem}: inputs.values is neither JSON nor a list of strings") from None
    if isinstance(records, list) and len(records) == 1 and isinstance(records[0], str):
        try:
            records = parse_json(records[0], problem)
        except InputError as exc:
            raise WorkloadError(
                f"{problem}: not valid JSON: {exc.what.removeprefix('invalid JSON: ')}"
                f"{f' ({exc.where})' if exc.where else ''}"
            ) from None
    if not isinstance(records, list) or not all(
        isinstance(record, dict) and isinstance(record.get("pg_name"), str) for record in records
    ):
        raise WorkloadError(f"{problem}: expected a list of records with pg_name and ranks")
    return [
        (record["pg_name"], _members(record.get("ranks"), problem, repr(record["pg_name"]), True)) for record in records
    ]


def trace_groups(nodes: Sequence[Node], source: str) -> CommGroups | None:
    """The process groups listed by the ``process_group:init`` METADATA nodes of one rank, a later record
    overriding an earlier one of the same name (as in ASTRA-sim); None if there are none."""
    groups: dict[str, tuple[int, ...]] = {}
    found = False
    for node in nodes:
        if node.type == et_def_pb2.METADATA_NODE and _PG_INIT in node.name and node.inputs.values:
            found = True
            groups.update(_pg_records(node.inputs.values, f"{source}: node {node.id}"))
    return CommGroups(groups, "the trace's process_group:init records") if found else None


def communicator_group(
    pg_name: str, where: str, npu: int, npus: int | None, definitions: Sequence[CommGroups]
) -> list[int]:
    """The IR ``group`` of communicator ``pg_name`` issued by NPU ``npu``: its sorted NPU ids, or empty for every
    NPU. With ``npus`` unknown (None) nothing is checked and an undefined name is every NPU."""
    found = next((groups for groups in definitions if pg_name in groups.groups), None)
    if found is None:
        if pg_name == _DEFAULT_PG or npus is None:
            return []
        if not definitions:
            raise WorkloadError(
                f"{where}: pg_name {pg_name!r} is not defined: no communicator groups file was found "
                "(workload.comm_groups, by default <path>.json beside the trace)"
            )
        raise WorkloadError(
            f"{where}: pg_name {pg_name!r} is not defined by {' or '.join(groups.source for groups in definitions)}"
        )
    members = found.groups[pg_name]
    if npus is None or not members:
        return list(members)
    outside = [member for member in members if member >= npus]
    if outside:
        raise WorkloadError(
            f"{where}: pg_name {pg_name!r} ({found.source}) names NPU {outside[0]}, but the trace has {npus} ranks"
        )
    if npu not in members:
        raise WorkloadError(
            f"{where}: pg_name {pg_name!r} is the group {list(members)} ({found.source}), which does not contain "
            f"NPU {npu}, the rank issuing it"
        )
    return [] if len(members) == npus else list(members)
