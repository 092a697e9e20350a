"""Value types for command-line options shared by several commands: each turns the text into a value or raises
``argparse.ArgumentTypeError`` with a message that says what was expected; :data:`Subparsers`, what each
command's ``add_*`` function adds its parser to; and :func:`lazy_handler`, a command's handler imported only when
that command runs."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import TypeAlias

__all__ = ["Handler", "Subparsers", "lazy_handler", "positive_int"]

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler: TypeAlias = Callable[[argparse.Namespace], int]
"""What a command runs: its parsed arguments in, its exit code out."""


def lazy_handler(module: str, name: str = "handle") -> Handler:
    """The handler ``name`` of ``module``, imported when the command runs: building the command line (``--help``,
    another command) never imports what a command needs to do its work."""

    def handle(args: argparse.Namespace) -> int:
        handler: Handler = getattr(importlib.import_module(module), name)
        return handler(args)

    return handle


def positive_int(what: str = "a whole number") -> Callable[[str], int]:
    """An option type accepting a whole number of at least 1; ``what`` says what it counts, for the message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected {what}, at least 1, got {text!r}")
        return value

    return parse


def add_set(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the repeatable ``--set KEY=VALUE`` study override (``args.overrides``)."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a study key by dotted path, e.g. network.topology.1.bandwidth=100GB/s (repeatable)",
    )
