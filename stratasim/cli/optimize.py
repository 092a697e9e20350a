"""``stratasim optimize FILE``: the optimal plan of a study or sweep file by a mixed-integer program, simulated (see
:mod:`stratasim.optimize.run`)."""

from __future__ import annotations

import argparse
import json

from stratasim.explore.optimize import DataflowOptions, load_input, optimize_study
from stratasim.optimize.result import OptimizeResult

__all__ = ["handle"]


def handle(args: argparse.Namespace) -> int:
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
