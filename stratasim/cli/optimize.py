"""``stratasim optimize FILE``: the optimal plan of a study or sweep file by a mixed-integer program, simulated (see
:mod:`stratasim.optimize.run`)."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING

from stratasim.explore.optimize import DataflowOptions, load_input, optimize_study
from stratasim.optimize.result import OBJECTIVES, OptimizeResult

if TYPE_CHECKING:
    from stratasim.cli.arg_types import Subparsers

__all__ = ["add_optimize"]


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
    parser.set_defaults(handler=_optimize)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _optimize(args: argparse.Namespace) -> int:
    target = load_input(args.file, args.overrides)
    dataflow = DataflowOptions(overlap=args.overlap, keep_degrees=args.keep_degrees, execution=args.execution)
    result = optimize_study(
        target,
        objective=args.objective,
        time_limit_s=args.time_limit,
        simulate=not args.no_simulate,
        dataflow=dataflow,
    )
    print(json.dumps(result.to_json(), indent=1) if args.json else to_text(result))
    return 0


def to_text(result: OptimizeResult) -> str:
    """The result as the command prints it: the plan, the solver, the estimate's terms, the simulated time."""
    lines = ["plan:"]
    lines += [f"  {key} = {value}" for key, value in result.plan.items()]
    gap = "0" if result.gap == 0 else f"{result.gap:.3%}"
    lines.append(
        f"solver: {result.status}, gap {gap}, {result.solver_seconds:.3f} s, {result.candidates} candidates, "
        f"objective {result.objective}"
    )
    lines.append(f"estimate: {result.estimate_ps / 1e3:,.0f} ns per iteration")
    width = max(len(term) for term in result.estimate_terms)
    lines += [f"  {term:<{width}}  {value / 1e3:>18,.0f} ns" for term, value in result.estimate_terms.items()]
    if result.simulated_ps is not None:
        difference = (result.estimate_ps - result.simulated_ps) / result.simulated_ps
        lines.append(f"simulated: {result.simulated_ps / 1e3:,.0f} ns (estimate {difference:+.4%})")
    if result.economics:
        lines.append("economics:")
        lines += [f"  {key}: {value:.6g}" for key, value in result.economics.items()]
    lines.append("notes:")
    lines += [f"  - {note}" for note in result.notes]
    return "\n".join(lines)
