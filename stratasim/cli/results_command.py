"""The ``results`` subcommand's options; reading the store is :mod:`stratasim.cli.results`, imported only then."""

from __future__ import annotations

from stratasim.cli.arg_types import Subparsers, lazy_handler, positive_int

__all__ = ["add_results"]


def add_results(subparsers: Subparsers) -> None:
    """The ``results`` subcommand."""
    parser = subparsers.add_parser("results", help="the best trials, Pareto front and per-parameter summary of a sweep")
    parser.add_argument("db", metavar="DB", help="a results store written by stratasim sweep (--db)")
    parser.add_argument(
        "--top",
        type=positive_int("a whole number of trials"),
        default=10,
        metavar="N",
        help="best trials to list (default 10)",
    )
    parser.add_argument("--csv", metavar="FILE", help="write every trial to FILE: a column per parameter and metric")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print every trial and the Pareto front as JSON (as stratasim sweep --json does)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="draw PNG charts into DIR: the Pareto front or the objective "
        "by trial, and the first objective against each parameter (needs matplotlib)",
    )
    parser.set_defaults(handler=lazy_handler("stratasim.cli.results"))
