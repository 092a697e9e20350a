"""What a sweep's trials depend on, as digests: the sweep's definition, its base study and every file they name.

A results store keeps these digests beside its trials (:class:`~stratasim.explore.store.ResultStore`), so that a
store whose base study — or a trace, a device file, a fabric it reads — changed since is not reused with stale
numbers. A file is found by the values that name it: any string of the base study or of the sweep that is the
path of a file (relative to the base study's folder or the current one), or the prefix of per-rank files
(``traces/allreduce`` for ``traces/allreduce.0.et``, as trace replay names them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stratasim.explore.sweep_file import Sweep

__all__ = ["input_digests", "changed_inputs"]

_CHUNK = 1 << 20
_PREFIXED = 4096  # per-rank files of one prefix digested, at most (beyond, their names and sizes only)


def input_digests(sweep: Sweep) -> dict[str, str]:
    """A SHA-256 per input of the sweep's trials, by what a person would call it: ``the sweep``, ``the base study``
    and each file named, by its path as written."""
    digests = {
        "the sweep": _text_digest(sweep.section.model_dump_json()),
        "the base study": _text_digest(json.dumps(_keyed(sweep.base), sort_keys=True, default=repr)),
    }
    folders = dict.fromkeys((Path(sweep.base_source).parent, Path(sweep.source).parent, Path.cwd()))
    for value in dict.fromkeys(_strings([sweep.base, sweep.section.model_dump(exclude={"base"})])):
        files = _named_files(value, list(folders))
        if files:
            digests[value] = _files_digest(files)
    return digests


def changed_inputs(stored: dict[str, str], now: dict[str, str]) -> list[str]:
    """The inputs whose digest differs, or that one side names and the other does not, in a stable order."""
    return sorted(name for name in {*stored, *now} if stored.get(name) != now.get(name))


def _keyed(data: Any) -> Any:
    """``data`` with every mapping's keys as text (YAML allows numbers and more as keys), so it sorts."""
    if isinstance(data, dict):
        return {repr(key) if not isinstance(key, str) else key: _keyed(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_keyed(value) for value in data]
    return data


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, list | tuple):
        for value in data:
            yield from _strings(value)


def _named_files(value: str, folders: list[Path]) -> list[Path]:
    """The files ``value`` names in one of ``folders``: itself, or the files whose name it prefixes with a dot."""
    if not value.strip() or len(value) > 4096 or "\x00" in value:
        return []
    for folder in folders:
        try:
            path = folder / value
            if path.is_file():
                return [path]
            parent, stem = path.parent, path.name + "."
            if path.name and parent.is_dir():
                found = sorted(p for p in parent.iterdir() if p.name.startswith(stem) and p.is_file())
                if found:
                    return found
        except (OSError, ValueError):  # a name the file system cannot hold is no file
            continue
    return []


def _files_digest(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for index, path in enumerate(files):
        digest.update(path.name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            if index >= _PREFIXED:
                digest.update(str(path.stat().st_size).encode())
                continue
            with path.open("rb") as file:
                while chunk := file.read(_CHUNK):
                    digest.update(chunk)
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
