"""``--set key=value`` overrides, applied to a study's raw mapping before it is validated.

A key is a dotted path; list items are addressed by index, written ``topology.1`` or ``topology[1]``. The
value is read as YAML, so ``4`` is an int, ``true`` a bool, ``[ring, direct]`` a list and ``50GB/s`` stays a
string for the schema to parse. Missing mapping keys are created; indexing past a list's end or into a
scalar is a problem naming the override.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import yaml

from stratasim.kernel.errors import InputError
from stratasim.kernel.safe_load import parse_yaml

__all__ = ["apply_overrides", "as_overrides", "parse_key"]

_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]|(\.)")


def parse_key(key: str) -> list[str]:
    """Split ``network.topology[1].bandwidth`` into ``["network", "topology", "1", "bandwidth"]``.

    Raises ``ValueError`` if the key is empty or malformed (unbalanced brackets, empty segments).
    """
    parts: list[str] = []
    pos = 0
    expect_name = True
    while pos < len(key):
        match = _TOKEN.match(key, pos)
        if match is None:
            raise ValueError(f"cannot read key {key!r}")
        name, index, dot = match.groups()
        if dot:
            if expect_name:
                raise ValueError(f"empty segment in key {key!r}")
            expect_name = True
        elif index is not None:
            if not index.strip().isdigit() or not parts:
                raise ValueError(f"bad index [{index}] in key {key!r}")
            parts.append(index.strip())
            expect_name = False
        else:
            if not expect_name:
                raise ValueError(f"missing '.' before {name!r} in key {key!r}")
            parts.append(name.strip())
            expect_name = False
        pos = match.end()
    if not parts or expect_name:
        raise ValueError(f"empty segment in key {key!r}")
    return parts


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "null" if value is None else type(value).__name__


def _set(data: MutableMapping[str, Any], parts: list[str], value: object) -> None:
    """Assign ``value`` at ``parts`` inside ``data``; raise ``ValueError`` explaining why it cannot."""
    node: Any = data
    for depth, part in enumerate(parts):
        here = ".".join(parts[:depth]) or "the study"
        last = depth == len(parts) - 1
        if isinstance(node, MutableMapping):
            if last:
                node[part] = value
            elif not isinstance(node.get(part), (MutableMapping, list)):
                if node.get(part) is not None:
                    path = ".".join(parts[: depth + 1])
                    raise ValueError(f"{path} is {_describe(node[part])}, not a mapping or list")
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            if not part.isdigit():
                raise ValueError(f"{here} is a list; use an index such as {here}.0, not {part!r}")
            index = int(part)
            if index >= len(node):
                raise ValueError(f"index {index} is past the end of {here} ({len(node)} entries)")
            if last:
                node[index] = value
            node = node[index]
        else:
            raise ValueError(f"{here} is {_describe(node)}, not a mapping or list")


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Return a copy of ``data`` with every applicable override set, and the problems with the others.

    Problems are ``("--set KEY=VALUE", message)`` pairs, so one report can list them with the schema's own.
    """
    result: dict[str, Any] = copy.deepcopy(dict(data))
    problems: list[tuple[str, str]] = []
    for text in overrides:
        shown = text if text.isprintable() else repr(text)[1:-1]  # a control character would break the line
        where = f"--set {shown:.80}"  # a long value is said by its start
        key, sep, raw = text.partition("=")
        if not sep:
            problems.append((where, "expected KEY=VALUE, e.g. system.splits=4"))
            continue
        try:
            parts = parse_key(key.strip())
            value = parse_yaml(raw, where) if raw.strip() else raw
        except InputError as exc:
            problems.append((where, f"cannot read value {raw[:60]!r} as YAML: {exc.what}"))
            continue
        except ValueError as exc:
            problems.append((where, str(exc).splitlines()[0]))
            continue
        try:
            _set(result, parts, value)
        except ValueError as exc:
            problems.append((where, str(exc)))
    return result, problems


def as_overrides(values: Mapping[str, Any]) -> list[str]:
    """``{dotted key: value}`` as ``--set KEY=VALUE`` strings, each value written as YAML (so a list stays a list
    and ``50GB/s`` a string)."""
    return [
        f"{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"
        for key, value in values.items()
    ]
