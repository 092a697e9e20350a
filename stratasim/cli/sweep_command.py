"""The ``sweep`` subcommand's options; running it is :mod:`stratasim.cli.sweep`, imported only then."""

from __future__ import annotations

import os

from stratasim.cli import budget_options
from stratasim.cli.arg_types import Subparsers, lazy_handler

__all__ = ["add_sweep"]


def add_sweep(subparsers: Subparsers) -> None:
    """The ``sweep`` subcommand."""
    parser = subparsers.add_parser("sweep", help="run the trials of a sweep file into a results store")
    parser.add_argument("sweep", metavar="FILE", help="the sweep file (YAML): base study, space, objectives, search")
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="the results store (SQLite; default: FILE's name with .db, in the current folder): re-running resumes",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="discard the trials the store holds (of another sweep, or run before the base study or a file it "
        "reads changed) and run them all again",
    )
    parser.add_argument("--json", action="store_true", help="print every trial and the Pareto front as JSON")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="local worker processes running trials (default: the machine's cores)",
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run the trials on the Dask scheduler at ADDRESS (e.g. tcp://10.0.0.5:8786)",
    )
    budget_options.add_arguments(parser, "the sweep's list of trials, or a trial,")
    parser.set_defaults(handler=lazy_handler("stratasim.cli.sweep"))
