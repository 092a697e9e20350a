"""The fenced code blocks of a Markdown page, with the test directive written just above each.

A directive is an HTML comment on the line before a fence, invisible on the site:

- ``<!-- test: skip REASON -->``: the block is not run (a server that runs until stopped, say); the reason is
  required, so a skipped block says why.
- ``<!-- test: slow -->``: the block runs alone, in a fresh folder, as a test marked ``slow``.
- ``<!-- test: file PATH -->`` (YAML): the block shows part of the file ``PATH``, which must hold every key and
  value the block does.
- ``<!-- test: base PATH -->`` (YAML): the block is part of a study; merged onto the study ``PATH`` it must pass
  ``stratasim check``.

Without a directive a ``yaml`` block holding a ``workload`` is a whole study and runs; ``console`` blocks run
each ``$ stratasim ...`` line and compare what it prints with the lines under it (doctest's ``...`` and
whitespace rules); ``bash`` and ``sh`` blocks run each line that starts with ``stratasim``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "Command", "blocks", "commands"]

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_DIRECTIVE = re.compile(r"<!--\s*test:\s*(\w+)\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its text, its directive (``""`` for none) and the directive's argument."""

    page: Path
    line: int
    language: str
    text: str
    directive: str
    argument: str

    @property
    def label(self) -> str:
        """``page:line``, for test ids and messages."""
        return f"{self.page.name}:{self.line}"


@dataclass(frozen=True)
class Command:
    """One ``stratasim`` command of a shell block: its arguments after ``stratasim`` and the output shown under it
    (``None`` when the page shows none)."""

    argv: list[str]
    expected: str | None


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = _DIRECTIVE.search(before)
        name, argument = directive.groups() if directive else ("", "")
        if name not in ("", "skip", "slow", "file", "base"):
            raise ValueError(f"{page.name}: unknown test directive {name!r}")
        if name == "skip" and not argument:
            raise ValueError(f"{page.name}: 'test: skip' needs a reason")
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, match.group(1), match.group(2), name, argument))
    return found


def commands(block: Block) -> list[Command]:
    """The ``stratasim`` commands of a ``console``, ``bash`` or ``sh`` block, continuation lines joined."""
    lines = block.text.replace("\\\n", " ").splitlines()
    if block.language != "console":
        return [_command(line, None) for line in lines if line.startswith("stratasim ")]
    found: list[Command] = []
    for line in lines:
        if line.startswith("$ "):
            found.append(_command(line[2:], ""))
        elif found and found[-1].expected is not None:
            found[-1] = Command(found[-1].argv, f"{found[-1].expected}{line}\n")
    return [command for command in found if command.argv]


def _command(line: str, expected: str | None) -> Command:
    argv = shlex.split(line, comments=True)
    return Command(argv[1:] if argv[:1] == ["stratasim"] else [], expected)
