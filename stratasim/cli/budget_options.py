"""``--max-memory`` and ``--max-events``: the run's budget on the command line (see :mod:`stratasim.study.budget`)."""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import TYPE_CHECKING

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import format_bytes, parse_bytes
from stratasim.study.limits import DEFAULT_MAX_EVENTS, DEFAULT_MAX_MEMORY

if TYPE_CHECKING:
    from stratasim.study.budget import Budget

__all__ = ["add_arguments", "budget"]


def _memory(text: str) -> int:
    """``--max-memory`` as bytes: a size with its unit (``8GiB``), more than nothing."""
    try:
        size = parse_bytes(text)
    except StrataSimError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"expected a size above 0, e.g. 8GiB, got {text!r}")
    return size


def _events(text: str) -> int:
    """``--max-events`` as a whole, positive number (``1e9`` reads as 10^9)."""
    try:
        events = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a whole number of events, e.g. 1e9, got {text!r}") from None
    if events.denominator != 1 or not 0 < events < 2**63:
        raise argparse.ArgumentTypeError(f"expected a whole number of events from 1 to 2^63-1, got {text!r}")
    return int(events)


def add_arguments(parser: argparse.ArgumentParser, what: str = "the run") -> None:
    """Add ``--max-memory`` and ``--max-events`` to ``parser``; ``what`` says what they bound in the help."""
    parser.add_argument(
        "--max-memory",
        type=_memory,
        metavar="SIZE",
        help=f"refuse, before building anything, {what} if estimated to need more memory than this "
        f"(default {format_bytes(DEFAULT_MAX_MEMORY).replace(' ', '')})",
    )
    parser.add_argument(
        "--max-events",
        type=_events,
        metavar="N",
        help=f"refuse {what} if estimated to process more engine events (or, converting, nodes) than this "
        f"(default {DEFAULT_MAX_EVENTS:.0e})",
    )


def budget(args: argparse.Namespace) -> Budget:
    """The budget the command line asks for (the study runner's :class:`Budget`, imported once a command runs)."""
    from stratasim.study.budget import Budget

    return Budget.of(args.max_memory, args.max_events)
