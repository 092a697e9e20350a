"""The ``validate`` subcommand's options; the regression itself is :mod:`stratasim.cli.validate`, imported only then."""

from __future__ import annotations

from stratasim.cli.arg_types import Subparsers, lazy_handler

__all__ = ["add_validate"]


def add_validate(subparsers: Subparsers) -> None:
    """The ``validate`` subcommand."""
    parser = subparsers.add_parser(
        "validate",
        help="check published and reference numbers (Megatron-LM, ASTRA-sim, SCALE-Sim, calibration)",
        description="Runs the cases shipped in stratasim/validate/cases.yaml and prints expected, got, error and "
        "tolerance for each figure. The default is the short form (a few seconds); --full runs every row.",
    )
    parser.add_argument("--full", action="store_true", help="every row (about half a minute), not only the short form")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (and nothing else) on stdout")
    parser.set_defaults(handler=lazy_handler("stratasim.cli.validate"))
