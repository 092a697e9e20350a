"""YAML reading that refuses duplicate keys, which PyYAML would otherwise resolve by keeping the last one."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

__all__ = ["StrictLoader", "load"]


class StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicate keys, naming the key and its line."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if not isinstance(key, Hashable):
                continue  # the base class reports unhashable keys
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load(text: str) -> Any:
    """Parse ``text``; raises ``yaml.YAMLError`` (with its line) on bad syntax or a duplicate key."""
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
