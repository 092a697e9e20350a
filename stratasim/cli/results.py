"""``stratasim results DB``: what a sweep's results store holds — the counts, the best trials, the Pareto front,
what each parameter does — as text, JSON, CSV or PNG charts (see :mod:`stratasim.explore.results`)."""

from __future__ import annotations

import argparse

from stratasim.explore.results import ParameterSummary, SweepResults, read_results
from stratasim.explore.store import TrialRecord

__all__ = ["handle"]


def handle(args: argparse.Namespace) -> int:
    found = read_results(args.db)
    written = []
    if args.csv:
        found.write_csv(args.csv)
        written.append(args.csv)
    if args.out:
        from stratasim.explore.plots import draw_plots  # matplotlib only when asked for

        written += [str(path) for path in draw_plots(found, args.out)]
    if args.json:
        print(found.to_json())
    else:
        print(to_text(found, args.top))
        if written:
            print(f"\nwrote {', '.join(written)}")
    return 0


def to_text(found: SweepResults, top: int) -> str:
    """The counts, the ``top`` best trials, the Pareto front (several objectives) and the parameter summary."""
    counts = found.counts()
    outside = f" ({counts['infeasible']} outside the constraints)" if found.section.constraints else ""
    lines = [f"{found.source}: {len(found)} trials: {counts['done']} done{outside}, {counts['failed']} failed"]
    goals = ", ".join(f"{o.metric} ({o.goal})" for o in found.section.objectives)
    best = found.best(top)
    lines += [f"\nbest {len(best)} by {goals}", *(_trial(found, r) for r in best)]
    if not best:
        lines.append("  none: no trial finished within the constraints")
    if len(found.objectives) > 1:
        lines += [f"\nPareto front ({len(found.pareto)} trials)", *(_trial(found, r) for r in found.pareto)]
    first = found.section.objectives[0]
    lines.append(
        f"\nby parameter: {first.metric} ({first.goal}) over the feasible trials (done, within the "
        "constraints), the parameters whose medians differ most first"
    )
    for summary in found.parameters():
        lines += _parameter(summary)
    return "\n".join(lines)


def _trial(found: SweepResults, record: TrialRecord) -> str:
    values = ", ".join(f"{name} {record.metrics[name]:.6g}" for name in found.objectives)
    return f"  #{record.number:<4} {values}  {record.params}"


def _parameter(summary: ParameterSummary) -> list[str]:
    width = max(len("value"), *(len(v.label) for v in summary.values))
    lines = [
        f"  {summary.key} (medians differ by {summary.spread:.6g})",
        f"    {'value':<{width}}  {'trials':>6}  {'feasible':>8}  {'best':>12}  {'median':>12}",
    ]
    for value in summary.values:
        best = "-" if value.best is None else f"{value.best:.6g}"
        median = "-" if value.median is None else f"{value.median:.6g}"
        lines.append(f"    {value.label:<{width}}  {value.trials:>6}  {value.feasible:>8}  {best:>12}  {median:>12}")
    return lines
