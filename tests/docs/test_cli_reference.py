"""The command-line reference (``docs/reference/cli.md``, written by hand) names every command and every option the
parser has, so a flag added to the command line and not to the page fails here."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from stratasim.cli.commands import build_parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"


def _commands(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command below ``parser`` as ``stratasim run``, ``stratasim trace export``..., with its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                yield from _commands(sub, f"{path} {name}")


COMMANDS = dict(_commands(build_parser(), "stratasim"))


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [
        option
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        for option in action.option_strings
        if option.startswith("--")
    ]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_page_documents_every_command_and_its_options(command: str) -> None:
    page = PAGE.read_text()
    assert f"`{command}" in page, f"{PAGE.name} has no section for {command}"
    missing = [option for option in _options(COMMANDS[command]) if f"`{option}" not in page]
    assert not missing, f"{PAGE.name} does not name {command}'s {', '.join(missing)}"
