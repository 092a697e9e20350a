"""Problems about a file a study includes, said without echoing that file's contents.

A study may include a device or fabric description from anywhere (``compute.device.file``,
``network.topology.file``), including a file that is not the user's own study; so what is wrong in it is said by
the keys StrataSim expected and where, never by the keys or values found there (a credentials file named by
mistake must not be printed back).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Included", "from_included", "redact"]

_LONG = 8
_GOT = re.compile(r",? got .*$", re.DOTALL)


@dataclass(frozen=True)
class Included:
    """A mapping read from ``path`` into the study at the dotted ``prefix``, the study's own keys beside it
    (``own``) overriding the file's; ``outside`` when the file is not in the study's folder (or below it)."""

    prefix: str
    path: str
    data: Mapping[Any, Any]
    own: frozenset[str]
    outside: bool


def redact(problems: Sequence[tuple[str, str]], included: Sequence[Included]) -> list[tuple[str, str]]:
    """``problems`` with those about keys read from an included file said without the file's keys and values."""
    result: list[tuple[str, str]] = []
    for where, message in problems:
        source = from_included(where, included)
        problem = (where, message) if source is None else _redacted(where, message, source)
        if problem not in result:  # two unknown keys read the same once their names are not shown
            result.append(problem)
    return result


def from_included(where: str, included: Sequence[Included]) -> Included | None:
    """The included file the key at ``where`` was read from, if any (a study's own key beside it is its own)."""
    return next((inc for inc in included if _from_file(where, inc)), None)


def _from_file(where: str, included: Included) -> bool:
    if where == included.prefix:  # a check of the whole section (a graph's links) names chips: said for the
        return included.outside  # study's own files, not for one outside its folder
    if not where.startswith(included.prefix + "."):
        return False
    top = re.split(r"[.\[]", where[len(included.prefix) + 1 :], maxsplit=1)[0]
    return top not in included.own and top in {str(key) for key in included.data}


def _redacted(where: str, message: str, included: Included) -> tuple[str, str]:
    shown = f"(read from {included.path}; its contents are not shown)"
    if message.startswith("unknown key"):
        parent = where.rsplit(".", 1)[0]
        expected = message.partition("expected one of ")[2]
        return parent, f"a key StrataSim does not know{f', expected one of {expected}' if expected else ''} {shown}"
    message = _GOT.sub("", message)
    for value in sorted(_strings(included.data), key=len, reverse=True):
        message = message.replace(repr(value), "its value")
        if len(value) >= _LONG:  # a long string may be echoed unquoted; a short one may be a word of the message
            message = message.replace(value, "its value")
    return where, f"{message} {shown}"


def _strings(data: object) -> set[str]:
    """Every key and string value in ``data``, walked without recursion."""
    found: set[str] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            found.add(item)
    return found
