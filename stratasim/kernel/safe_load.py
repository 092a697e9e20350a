"""Reading every file StrataSim takes as input — YAML, JSON, CSV, binary traces — in bounded time and memory.

Each reader caps what a file of a few hundred bytes could otherwise turn into gigabytes or a crash, and turns
every parser exception into one :class:`InputError` naming the file and, when known, the line and column:

- size: :data:`YAML_BYTES` for any YAML (studies, includes, sweeps, ASTRA-sim network files), :data:`CONFIG_BYTES`
  for JSON configs (ASTRA-sim system and comm-group files), :data:`TABLE_BYTES` for profile tables and text
  workloads, :data:`TRACE_BYTES` for one rank's trace; a character device (``/dev/zero``) is refused and a pipe is
  read no further than the cap;
- text: a NUL byte means a binary file, and anything but UTF-8 is refused with the offset of the first bad byte;
- nesting: :data:`MAX_DEPTH` levels of YAML or JSON, counted without recursion (YAML while composing, JSON by a
  scan before parsing), so 10,000 levels give an error, never a ``RecursionError``;
- YAML aliases: at most :data:`MAX_ALIASES`, adding at most :data:`MAX_ALIAS_NODES` nodes once expanded and no
  cycle, checked on the composed node graph before any Python object is built (an anchor bomb never expands);
- YAML speed: libyaml's C parser when PyYAML has it (five times PyYAML's pure-Python one), its events scanned for
  nesting and aliases before it composes (it recurses in C), and the node graph walked for aliases' expansion only
  when there are aliases;
- YAML duplicate keys are errors (PyYAML would keep the last); so are JSON's when asked, and JSON's ``NaN``,
  ``Infinity`` and numbers beyond a double.
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
from collections.abc import Hashable
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from stratasim.kernel.errors import InputError

__all__ = [
    "CONFIG_BYTES",
    "MAX_ALIASES",
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "TABLE_BYTES",
    "TRACE_BYTES",
    "YAML_BYTES",
    "check_depth",
    "csv_rows",
    "parse_json",
    "parse_yaml",
    "open_bounded",
    "read_bytes",
    "read_text",
    "unquoted",
]

CONFIG_BYTES = 8 << 20
"""Largest JSON config: ASTRA-sim system or comm-group file (8 MiB; a comm-group file of thousands of ranks is a
few MiB, and JSON parses in C at some 100 MiB/s)."""
YAML_BYTES = 256 << 10
"""Largest YAML file: study, included device or graph fabric, sweep, ASTRA-sim network file (256 KiB). A study is a
few kB (the largest example 2.3 kB, the largest YAML shipped 18 kB) and bulk data lives in trace, CSV and JSON
files. YAML costs some microseconds of CPU per node even with libyaml (node objects, tag resolution, Python values),
so this cap bounds the worst file (a flow list of one-digit numbers, 131,000 nodes) to about 1 s of CPU and
100 MB; an 8 MiB cap let a well-formed 6.8 MiB study take 16 s (81 s without libyaml). A hand-written graph
fabric of 5,000 links fits."""
TABLE_BYTES = 256 << 20
"""Largest profile table or ASTRA-sim text workload (256 MiB)."""
TRACE_BYTES = 4 << 30
"""Largest trace file of one rank (4 GiB: traces are legitimately big)."""
MAX_DEPTH = 64
"""Deepest nesting of YAML or JSON collections (a study nests about 6 levels; 64 leaves room and stays far from
Python's recursion limit for whatever walks the result)."""
MAX_ALIASES = 10_000
"""Most YAML aliases (``*name``) in one document."""
MAX_ALIAS_NODES = 1_000_000
"""Most nodes aliases may add once expanded (a billion-laughs bomb adds 10^9)."""

_BINARY_SNIFF = 1 << 20  # bytes searched for a NUL in a binary reader's input: a text file has none


def read_bytes(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of ``path`` (a ``what``, e.g. "trace"; "file" says a missing one is "no such file"), refusing
    more than ``limit`` bytes, a missing or unreadable file and a device."""
    with open_bounded(path, limit, what) as file:
        try:
            data = file.read(limit + 1)  # a pipe says nothing of its size: read no further than the limit
        except OSError as exc:
            raise InputError(str(path), "", f"cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(str(path), "", f"the {what} is above the limit of {_size(limit)}")
    return data


def open_bounded(path: str | Path, limit: int, what: str) -> BinaryIO:
    """``path`` opened for reading bytes, after refusing a missing or unreadable file, a folder, a device and a
    file above ``limit`` bytes (a pipe says nothing of its size: its reader must count); for streamed readers."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(str(path), "", f"cannot read the {what}: it is a folder")
        if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
            raise InputError(str(path), "", f"cannot read the {what}: it is a device, not a file")
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise InputError(str(path), "", f"the {what} is {_size(info.st_size)}, above the limit of {_size(limit)}")
        return open(path, "rb")  # noqa: SIM115 (the caller closes it)
    except FileNotFoundError:
        raise InputError(
            str(path), "", "no such file" if what == "file" else f"cannot read the {what}: no such file"
        ) from None
    except OSError as exc:
        raise InputError(str(path), "", f"cannot read the {what}: {exc.strerror or exc}") from None


def read_text(path: str | Path, limit: int, what: str) -> str:
    """The UTF-8 text of ``path``, as :func:`read_bytes` reads it; a NUL byte or invalid UTF-8 is refused with
    one message saying where, never echoing the bytes."""
    return decode(read_bytes(path, limit, what), str(path), what)


def decode(data: bytes, source: str, what: str) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped); refuses binary data and invalid UTF-8."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise InputError(source, "", f"the {what} is binary, not text (a NUL byte at offset {nul})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(source, "", f"the {what} is not UTF-8 text (invalid byte at offset {exc.start})") from None


def parse_yaml(text: str, source: str) -> Any:
    """The one YAML document in ``text`` (at most :data:`YAML_BYTES`), built only after its nesting, aliases and
    their expansion were checked; duplicate keys are errors. Raises :class:`InputError` naming ``source`` and the
    line and column."""
    if len(text) > YAML_BYTES:
        raise InputError(
            source,
            "",
            f"the YAML is above the limit of {_size(YAML_BYTES)} (a study is a few kB; bulk "
            "data belongs in trace, CSV or JSON files)",
        )
    loader: Any = None
    try:
        if _LIBYAML:
            aliases = _check_events(text, source)  # before libyaml composes, recursing in C
            loader = _FastLoader(text)
        else:
            loader = _Loader(text)  # reading the whole text here: a control character is refused at once
        node = loader.get_single_node()
        if node is None:
            return None
        if aliases if _LIBYAML else loader.aliases:  # without aliases, nothing expands
            _check_graph(node, source)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        said = (
            f"{exc.context}, {exc.problem}"
            if exc.context and (exc.problem or "").startswith("but")
            else exc.problem or exc.context
        )
        said = _LIBYAML_SAYS.get(str(said), str(said).replace("did not find expected", "expected"))
        raise InputError(source, _where(mark), f"invalid YAML: {unquoted(said)}") from None
    except yaml.reader.ReaderError as exc:  # a control character: said by its code, never echoed
        where = f"line {text.count(chr(10), 0, exc.position) + 1}"  # libyaml's position counts bytes: near enough
        raise InputError(source, where, f"invalid YAML: character #x{exc.character:04x} is not allowed") from None
    except yaml.YAMLError as exc:
        raise InputError(source, "", f"invalid YAML: {unquoted(str(exc))}") from None
    except (ValueError, OverflowError) as exc:  # a date like 2024-02-30, an integer of 5,000 digits, !!int 0x
        raise InputError(source, "", f"invalid YAML value: {unquoted(_first_clause(exc))}") from None
    except (TypeError, AttributeError, KeyError, IndexError, RecursionError):  # PyYAML's own, on a misplaced tag
        raise InputError(
            source, "", "invalid YAML value: a tag (!!timestamp, !!bool, !!set, !!map...) on a value it cannot build"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


_QUOTED = re.compile(r"""\s*(?:'[^'\n]*'|"[^"\n]*")""")


def unquoted(message: str) -> str:
    """A parser's ``message`` without what it quotes from the file (a tag, an alias, a key, a value): only a
    token's name (``'<scalar>'``) and punctuation (``','``) stay, so no error echoes a file's text."""

    def keep(match: re.Match[str]) -> str:
        quoted = match.group().strip()[1:-1]
        return match.group() if quoted.startswith("<") or not any(c.isalnum() for c in quoted) else ""

    return _QUOTED.sub(keep, message).rstrip(" :")


_LIBYAML_SAYS = {"exceeded maximum nesting depth": f"nested deeper than {MAX_DEPTH} levels"}
"""libyaml's messages said as PyYAML's pure-Python parser says them (libyaml scans ahead of its events: on a line of
brackets its own nesting limit may speak before ours)."""


def parse_json(text: str, source: str, unique_keys: bool = False) -> Any:
    """The JSON value in ``text`` after a scan that caps its nesting; with ``unique_keys`` an object naming a
    key twice is an error. ``NaN``, ``Infinity`` and numbers beyond a double are refused."""
    check_depth_json(text, source)
    hook = _unique_pairs if unique_keys else None
    try:
        return json.loads(text, object_pairs_hook=hook, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except _Duplicate:
        raise InputError(source, "", "duplicate key") from None
    except _Refused as exc:
        raise InputError(source, "", str(exc)) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # an integer of more digits than Python converts
        raise InputError(source, "", f"invalid JSON value: {unquoted(_first_clause(exc))}") from None


# A string (possessive, and an unterminated one runs to the end: linear on any text) or a bracket.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]++|\\.?)*+"?|[\[\]{}]', re.DOTALL)


def check_depth_json(text: str, source: str) -> None:
    """Refuse ``text`` if its brackets nest deeper than :data:`MAX_DEPTH` (strings skipped), without parsing."""
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise InputError(source, f"line {line}", f"nested deeper than {MAX_DEPTH} levels")
        elif token in "]}":
            depth -= 1


def check_depth(value: object, source: str) -> None:
    """Refuse a parsed value nesting lists, tuples or mappings deeper than :data:`MAX_DEPTH` (walked without
    recursion), e.g. what :func:`ast.literal_eval` made of a trace's attribute."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else ()
        for child in children:
            if isinstance(child, (dict, list, tuple)):
                if depth + 1 > MAX_DEPTH:
                    raise InputError(source, "", f"nested deeper than {MAX_DEPTH} levels")
                stack.append((child, depth + 1))


def csv_rows(text: str, source: str) -> list[tuple[int, list[str]]]:
    """The rows of CSV ``text`` with their line numbers; a malformed row (a NUL, an unterminated quote at the
    end, a cell above the csv module's field limit) is an :class:`InputError` naming its line."""
    reader = csv.reader(text.splitlines())
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise InputError(source, f"line {reader.line_num}", f"invalid CSV: {exc}") from None
    return rows


class _Refused(ValueError):
    """Raised inside ``json``'s hooks; turned into an :class:`InputError` by :func:`parse_json`."""


class _Duplicate(_Refused):
    """An object names a key twice (``json`` would keep the last)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Duplicate
        result[key] = value
    return result


def _no_constant(name: str) -> float:
    raise _Refused(f"invalid JSON: {name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"invalid JSON: the number {text[:40]} is beyond a double")
    return value


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor refusing a mapping that names a key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if not isinstance(key, Hashable):
                continue  # the base class reports unhashable keys
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, "duplicate key", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _LIBYAML = False
else:
    _LIBYAML = True

    class _FastLoader(CParser, _UniqueKeys, yaml.resolver.Resolver):  # type: ignore[misc]
        """libyaml's parser and composer with the safe constructor refusing duplicate keys; composing recurses in C,
        so :func:`_check_events` bounds the nesting first."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _UniqueKeys.__init__(self)
            yaml.resolver.Resolver.__init__(self)


def _check_events(text: str, source: str) -> int:
    """The aliases in ``text``, read from libyaml's events (in C, no Python recursion); :class:`InputError` when
    collections nest deeper than :data:`MAX_DEPTH` or aliases are more than :data:`MAX_ALIASES`."""
    depth = 0
    aliases = 0
    parser = CParser(text)
    try:
        while (event := parser.get_event()) is not None:
            kind = type(event)
            if kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(
                        source, _where(event.start_mark), f"invalid YAML: nested deeper than {MAX_DEPTH} levels"
                    )
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                depth -= 1
            elif kind is yaml.AliasEvent:
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise InputError(source, _where(event.start_mark), f"invalid YAML: more than {MAX_ALIASES} aliases")
    finally:
        parser.dispose()
    return aliases


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _UniqueKeys,
    yaml.resolver.Resolver,
):
    """PyYAML's pure-Python safe loader (when libyaml is missing) composing at most :data:`MAX_DEPTH` levels and
    :data:`MAX_ALIASES` aliases, and refusing duplicate keys."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _UniqueKeys.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0
        self.aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES} aliases", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def fetch_flow_collection_start(self, TokenClass: type) -> None:  # noqa: N803 - PyYAML's name
        # Refused by the scanner too: it looks up to 1024 characters ahead, slowly, on a line of brackets.
        if self.flow_level >= MAX_DEPTH:
            raise yaml.scanner.ScannerError(None, None, f"nested deeper than {MAX_DEPTH} levels", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)  # type: ignore[misc]


def _check_graph(root: yaml.Node, source: str) -> None:
    """Refuse a composed document whose aliases form a cycle, nest it deeper than :data:`MAX_DEPTH` or add more
    than :data:`MAX_ALIAS_NODES` nodes once expanded; a post-order walk without recursion, each node once."""
    size: dict[int, int] = {}  # id(node) -> nodes of its expanded subtree
    depth: dict[int, int] = {}
    written = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(kid)] for kid in kids)
            depth[key] = 1 + max((depth[id(kid)] for kid in kids), default=0)
            open_nodes.discard(key)
            if depth[key] > MAX_DEPTH:
                raise InputError(source, _where(node.start_mark), f"aliases nest it deeper than {MAX_DEPTH} levels")
            if size[key] - written > MAX_ALIAS_NODES:
                raise InputError(
                    source, _where(node.start_mark), f"aliases expand it by more than {MAX_ALIAS_NODES:,} nodes"
                )
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise InputError(source, _where(node.start_mark), "an alias refers to a node that contains it")
        written += 1
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if id(kid) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _first_clause(exc: BaseException) -> str:
    """What a Python exception says, up to its first semicolon (int()'s advice on its digit limit is not ours)."""
    return str(exc).split(";")[0][:120] or type(exc).__name__


def _where(mark: yaml.Mark | yaml._yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _size(count: int) -> str:
    if count and count % (1 << 20) == 0:
        return f"{count >> 20} MiB"
    return f"{count >> 10} KiB" if count and count % (1 << 10) == 0 else f"{count:,} bytes"
