"""The ``optimize`` subcommand's options; solving is :mod:`stratasim.cli.optimize`, imported only then."""

from __future__ import annotations

import argparse
import math

from stratasim.cli.arg_types import Subparsers, lazy_handler
from stratasim.optimize.result import OBJECTIVES

__all__ = ["add_optimize"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def add_optimize(subparsers: Subparsers) -> None:
    """The ``optimize`` subcommand."""
    parser = subparsers.add_parser(
        "optimize", help="find the optimal plan of a study (or a sweep file's plan space) by MILP, and simulate it"
    )
    parser.add_argument(
        "file", metavar="FILE", help="a study file, or a sweep file whose space is a parallelism generator"
    )
    parser.add_argument(
        "--objective", choices=OBJECTIVES, default="time", help="what to optimise (default time: iteration time)"
    )
    parser.add_argument(
        "--time-limit",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="the solver's time limit in seconds (default 60): past it, the best plan found and its gap",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of the study (a sweep file's base study) by dotted path (repeatable)",
    )
    parser.add_argument(
        "--execution",
        choices=("dataflow", "kernel_by_kernel"),
        default=None,
        help="a dataflow study on a dataflow_chip backend: how the chip runs each stage in DFModel's two passes "
        "(default: the chip's own style; sn30, sn10 and wse2 dataflow, h100 and tpuv4 kernel_by_kernel)",
    )
    parser.add_argument(
        "--overlap",
        action="store_true",
        help="a dataflow study on a roofline device: price a stage as DFModel's eq. 7 does (compute, layout "
        "conversions and sends overlapped) rather than as the engine runs blocking collectives",
    )
    parser.add_argument(
        "--keep-degrees",
        action="store_true",
        help="a dataflow study on a roofline device: keep workload.mapping's tp, pp and dp and find the best sharding "
        "and pipeline cut of that split",
    )
    parser.add_argument("--no-simulate", action="store_true", help="report the estimate only, without simulating")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (and nothing else) on stdout")
    parser.set_defaults(handler=lazy_handler("stratasim.cli.optimize"))
