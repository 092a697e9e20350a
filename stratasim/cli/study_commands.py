"""``stratasim run`` and ``stratasim check``: a study loaded, then run and reported, or checked (see
:mod:`stratasim.cli.commands`, which imports this module only when one of them runs)."""

from __future__ import annotations

import argparse
import sys

from stratasim.cli import budget_options, trace_options
from stratasim.cli.commands import EXIT_INTERRUPTED, EXIT_OK
from stratasim.cli.interrupts import stoppable
from stratasim.cli.run_progress import RunProgress
from stratasim.config.study_file import Study, load_study
from stratasim.report.figures import PlottingUnavailable, write_figures
from stratasim.report.json_report import write_report
from stratasim.report.layers import layers_text
from stratasim.report.serving_layers import serving_layers_text
from stratasim.study.run import check_study, run_study

__all__ = ["check", "run"]


def run(args: argparse.Namespace) -> int:
    study = load_study(args.study, args.overrides)
    selected = trace_options.selection(args)
    with RunProgress(quiet=args.quiet) as shown, stoppable(shown) as progress:
        report = run_study(
            study,
            record_trace=selected or False,
            progress=progress,
            budget=budget_options.budget(args),
            notes=_note,
            samples=args.samples,
            layers=args.layers,
        )
    written = report.write(args.out, trace=selected is not None) if args.out is not None else ()
    if args.out is not None and args.pictures:
        try:
            written += write_figures(report, args.out)
        except PlottingUnavailable as exc:
            print(f"note: {exc}", file=sys.stderr)  # stderr: --json keeps stdout for the report alone
    if args.json:
        write_report(sys.stdout, report)
    else:
        print(report.to_text())
        if args.layers:
            breakdown = (
                serving_layers_text(report.serving_layers) if report.engine is None else layers_text(report.layers)
            )
            print(f"\n{breakdown}")
        if written:
            print(f"\nwrote {', '.join(str(path) for path in written)}")
        if selected is not None and report.engine is not None and (line := trace_options.note(args, report.engine)):
            print(line)
    failed = report.engine is not None and report.engine.stopped_by_failure  # a result, not an interruption
    return EXIT_OK if report.stopped_at_ps is None or failed else EXIT_INTERRUPTED


def _note(line: str) -> None:
    """A line the run says before it starts (on stderr: --json keeps stdout for the report alone)."""
    print(f"note: {line}", file=sys.stderr, flush=True)


def check(args: argparse.Namespace) -> int:
    study = load_study(args.study, args.overrides)
    npus = check_study(study, budget_options.budget(args))
    for warning in study.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"OK: {study.name} — {npus} NPUs, workload {study.workload.kind}, network {_network_backends(study)}")
    return EXIT_OK


def _network_backends(study: Study) -> str:
    """``analytical``, or for a study mixing backends per dimension ``mixed (dim 0 analytical, dim 1 ...)``."""
    network = study.network
    if not network.mixes_fidelity or not isinstance(network.topology, list):
        return network.backend_name
    dims = ", ".join(f"dim {i} {dim.backend or network.backend}" for i, dim in enumerate(network.topology))
    return f"mixed ({dims})"
