"""Value types for command-line options shared by several commands: each turns the text into a value or raises
``argparse.ArgumentTypeError`` with a message that says what was expected; and :data:`Subparsers`, what each
command's ``add_*`` function adds its parser to."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeAlias

__all__ = ["Subparsers", "positive_int"]

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


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
