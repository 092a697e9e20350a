"""docs/reference/sweep-keys.md: every key of a sweep file, generated from the models the sweep is validated with
(:class:`~stratasim.explore.sweep_file.SweepSection` and the named generators).

``python -m stratasim.explore.sweep_keys > docs/reference/sweep-keys.md`` regenerates the page; a test checks the
committed one is current and that every key has a meaning. The tables are those of the study key reference
(:mod:`stratasim.config.key_reference`).
"""

from __future__ import annotations

from typing import Any

from stratasim.config.key_reference import Table, documented_page, keys_without_meaning, section_tables
from stratasim.explore.sweep_file import SweepSection
from stratasim.kernel.schema import DocumentedSchema

__all__ = ["sweep_schema", "markdown", "undocumented"]

_HEADER = """# Sweep keys

Every key a sweep file may hold, generated from the models the sweep is validated with (`python -m
stratasim.explore.sweep_keys > docs/reference/sweep-keys.md`; a test keeps this page current). A sweep varies the
keys of a base study ([study keys](study-keys.md)) by their dotted names, as `--set` names them; how to write and run
one is in [Exploring](../tutorials/exploring.md). `[]` in a key stands for any entry of a list, `<name>` for any key of
a mapping: in `space`, a dotted study key (`system.splits`) holding a list of values or a range, or a label of your
choosing holding a generator.
"""


def sweep_schema() -> dict[str, Any]:
    """The JSON Schema of a sweep file, as written (quantities as strings with their unit)."""
    return SweepSection.model_json_schema(mode="validation", schema_generator=DocumentedSchema)


def _tables(schema: dict[str, Any]) -> list[Table]:
    return list(section_tables("Top level", "", schema, schema["$defs"]))


def undocumented(schema: dict[str, Any] | None = None) -> list[str]:
    """The dotted keys of the sweep schema (default :func:`sweep_schema`) that have no description."""
    return keys_without_meaning(_tables(sweep_schema() if schema is None else schema))


def markdown(schema: dict[str, Any] | None = None) -> str:
    """docs/reference/sweep-keys.md for the sweep schema (default :func:`sweep_schema`); an error if a key has no
    meaning."""
    schema = sweep_schema() if schema is None else schema
    return documented_page("sweep", _HEADER, _tables(schema), schema["$defs"])


if __name__ == "__main__":
    print(markdown(), end="")
