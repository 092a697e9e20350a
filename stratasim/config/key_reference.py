"""docs/reference/study-keys.md: every study key, generated from the study's JSON Schema
(:mod:`stratasim.config.json_schema`).

One table per section — dotted key, type (with its unit), default, allowed values, meaning — and one per form
of a key that takes several (each fabric of ``network.topology``, each form of ``compute.device``, each workload
kind). ``python -m stratasim.config.key_reference > docs/reference/study-keys.md`` regenerates the page; a test
checks the committed one is current and that every key has a meaning.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from stratasim.config.json_schema import study_schema
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.plausible import USUAL_KEY
from stratasim.kernel.schema import QUANTITY_KEY

__all__ = ["Table", "documented_page", "keys_without_meaning", "markdown", "page", "section_tables", "undocumented"]

_HEADER = """# Study keys

Every key a study file may hold, generated from the schema the study is validated with (`python -m
stratasim.config.key_reference > docs/reference/study-keys.md`; a test keeps this page current). `stratasim schema`
prints the same schema as JSON Schema for editors. A quantity is a number with a unit (`50GB/s`, `500ns`, `64MiB`);
`[]` in a key stands for any entry of a list, `<name>` for any key of a mapping. "Usually" gives a quantity's soft
band ([units and limits](../how-to/limits.md)): outside it the study runs with a warning naming the key, as a slip of
a prefix is likelier.
"""

Table = tuple[str, list[tuple[str, dict[str, Any], bool | str]]]
"""A section's title and its rows: dotted key, property schema, whether required."""


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        return {**defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _branches(node: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The forms a property takes (its anyOf/oneOf members, references resolved), nulls left out."""
    members = node.get("anyOf") or node.get("oneOf") or [node]
    resolved = [_resolve(member, defs) for member in members]
    return [member for member in resolved if member.get("type") != "null"]


def _models(node: dict[str, Any], defs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The mappings with keys of their own a property holds: ``("", model)`` or, in a list, ``("[]", model)``;
    a mapping of mappings gives ``(".<name>", model)``."""
    found = []
    for branch in _branches(node, defs):
        if "properties" in branch:
            found.append(("", branch))
        elif branch.get("type") == "array" and isinstance(branch.get("items"), dict):
            found += [("[]" + suffix, model) for suffix, model in _models(branch["items"], defs)]
        elif isinstance(branch.get("additionalProperties"), dict):
            found += [(".<name>" + suffix, model) for suffix, model in _models(branch["additionalProperties"], defs)]
    return found


def section_tables(title: str, prefix: str, model: dict[str, Any], defs: dict[str, Any]) -> Iterator[Table]:
    """The table of ``model``'s keys under ``prefix``, then the tables of the keys that hold several forms (each
    titled by its ``kind``, else by its schema's title)."""
    rows: list[tuple[str, dict[str, Any], bool | str]] = []
    nested: list[Table] = []
    required = set(model.get("required", ()))
    unless_file = {
        key
        for branch in model.get("anyOf", ())
        if branch.get("required") != ["file"]
        for key in branch.get("required", ())
    }
    for key, prop in model["properties"].items():
        dotted = f"{prefix}.{key}" if prefix else key
        rows.append((dotted, prop, "required (or `file`)" if key in unless_file else key in required))
        models = _models(prop, defs)
        for suffix, sub in models:
            if len(models) == 1:
                for sub_title, sub_rows in section_tables(title, dotted + suffix, sub, defs):
                    (rows.extend(sub_rows) if sub_title == title else nested.append((sub_title, sub_rows)))
            else:
                nested += section_tables(f"`{dotted}{suffix}` — {_form(sub)}", dotted + suffix, sub, defs)
    yield title, rows
    yield from nested


def _form(model: dict[str, Any]) -> str:
    kind = model.get("properties", {}).get("kind", {})
    names = kind.get("enum") or ([kind["const"]] if "const" in kind else [])
    return f"kind: {' / '.join(names)}" if names else model.get("title", "")


def _type(node: dict[str, Any], defs: dict[str, Any]) -> str:
    if QUANTITY_KEY in node:
        return str(node[QUANTITY_KEY])
    branches = _branches(node, defs)
    if len(branches) > 1 or branches[0] is not node:
        return " or ".join(dict.fromkeys(_type(branch, defs) for branch in branches))
    if "properties" in node:
        return "mapping"
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(_resolve(node.get('items', {}), defs), defs)}" if node.get("items") else "list"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"mapping to {_type(_resolve(node['additionalProperties'], defs), defs)}"
    if "enum" in node or "const" in node:
        return "name" if all(isinstance(v, str) for v in node.get("enum", [node.get("const")])) else "number"
    return {"integer": "integer", "number": "number", "string": "text", "boolean": "true / false"}.get(
        " / ".join(kind) if isinstance(kind, list) else str(kind), "any"
    )


def _allowed(node: dict[str, Any], defs: dict[str, Any]) -> str:
    said = []
    for branch in [node, *_branches(node, defs)]:
        values = branch.get("enum") or ([branch["const"]] if "const" in branch else [])
        said += [", ".join(f"`{value}`" for value in values)] if values else []
        said += [
            f"{sign} {branch[key]}"
            for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
            if key in branch
        ]
        said += [f"at least {branch['minItems']} entries"] if branch.get("minItems", 0) > 1 else []
        said += [f"usually {branch[USUAL_KEY]}"] if USUAL_KEY in branch else []
    return "; ".join(dict.fromkeys(said))


def _default(prop: dict[str, Any], required: bool | str) -> str:
    if required:
        return required if isinstance(required, str) else "required"
    if "default" not in prop:
        return ""
    return "none" if prop["default"] is None else f"`{json.dumps(prop['default'])}`"


def _all_tables(schema: dict[str, Any]) -> Iterator[Table]:
    defs: dict[str, Any] = schema["$defs"]
    yield from section_tables("Top level", "", {"properties": {"name": schema["properties"]["name"]}}, defs)
    workload = schema["properties"]["workload"]
    for rule in workload["allOf"]:
        kind = rule["if"]["properties"]["kind"]["const"]
        yield from section_tables(f"`workload` — kind: {kind}", "workload", _resolve(rule["then"], defs), defs)
    for section in ("system", "network", "compute", "goodput", "economics"):
        (model,) = [model for _, model in _models(schema["properties"][section], defs)]
        yield from section_tables(f"`{section}`", section, model, defs)


def undocumented(schema: dict[str, Any] | None = None) -> list[str]:
    """The dotted keys of the study schema (default :func:`study_schema`) that have no description."""
    return keys_without_meaning(_all_tables(study_schema() if schema is None else schema))


def markdown(schema: dict[str, Any] | None = None) -> str:
    """docs/reference/study-keys.md for the study schema (default :func:`study_schema`); an error if a key has no
    meaning."""
    schema = study_schema() if schema is None else schema
    return documented_page("study", _HEADER, list(_all_tables(schema)), schema["$defs"])


def keys_without_meaning(tables: Iterable[Table]) -> list[str]:
    """The dotted keys of ``tables`` that have no description, each once, in order."""
    return list(dict.fromkeys(key for _, rows in tables for key, prop, _ in rows if not prop.get("description")))


def documented_page(what: str, header: str, tables: list[Table], defs: dict[str, Any]) -> str:
    """:func:`page` for ``tables``, or a :class:`StrataSimError` naming the ``what`` keys (``study``, ``sweep``)
    that have no description."""
    missing = keys_without_meaning(tables)
    if missing:
        raise StrataSimError(f"{what} keys without a description: {', '.join(missing)}")
    return page(header, tables, defs)


def page(header: str, tables: Iterable[Table], defs: dict[str, Any]) -> str:
    """A reference page: ``header``, then a table per entry of ``tables`` — key, type, default, allowed, meaning."""
    lines = [header]
    for title, rows in tables:
        lines += [f"## {title}", "", "| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        for key, prop, required in rows:
            meaning = " ".join(str(prop.get("description", "")).split()).replace("|", "\\|")
            cells = (f"`{key}`", _type(prop, defs), _default(prop, required), _allowed(prop, defs), meaning)
            lines.append(
                "| " + " | ".join(cell.replace("|", "\\|") if i < 4 else cell for i, cell in enumerate(cells)) + " |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
