"""The ``stratasim`` command: a thin layer over :func:`~stratasim.config.load_study` and
:func:`~stratasim.study.run_study`.

Exit codes: 0 success; 2 invalid input or a failed run (any :class:`~stratasim.kernel.errors.StrataSimError`,
printed as one ``error: ...`` message on stderr, and argparse's own usage errors), or output that could not be
written (an :class:`OSError`: a full disk, a folder that is not writable); 130 interrupted. Anything else escapes
with a traceback, because it is a bug.

Each subcommand is one ``_add_<name>`` function, or a module's ``add_<name>`` (cost, profile and others), that
builds its parser and sets ``handler``; adding a subcommand means writing one such function and listing it in
``_SUBCOMMANDS``. Building the parser imports no more than the options need (the kernel's units and errors, a few
constants): each handler is imported when its command runs (:func:`~stratasim.cli.arg_types.lazy_handler`, or an
import inside it), so that ``--help``, ``--version`` and every command start without the engine, the explorer or
gRPC (``tests/cli/test_startup_imports.py`` lists what each must not import).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from stratasim import __version__
from stratasim.cli import (
    budget_options,
    cost_command,
    optimize_command,
    profile_command,
    results_command,
    roofline,
    schema,
    serve,
    sweep_command,
    trace_command,
    trace_options,
    validate_command,
)
from stratasim.cli.arg_types import Subparsers, add_set, lazy_handler, positive_int
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import parse_bytes

__all__ = ["main", "build_parser"]

EXIT_OK = 0
EXIT_INVALID = 2
EXIT_INTERRUPTED = 130


def _add_run(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("run", help="run one study and report it")
    parser.add_argument("study", metavar="STUDY", help="the study file (YAML)")
    add_set(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON (and nothing else) on stdout")
    parser.add_argument(
        "--layers",
        action="store_true",
        help="compute the per-layer breakdown (slower): after the text report, the critical NPU's time by layer and "
        "pass (a serving study: the run's time by pool, layer and phase); with --json or --out, the report's "
        "'layers' (docs/how-to/per-layer-breakdown.md)",
    )
    parser.add_argument(
        "--pictures",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --out, draw the PNGs too when matplotlib is installed (default; some 0.6 s on a "
        "whole GPT-3 iteration)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress line on stderr (shown on a terminal for runs over a second)"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write report.json, a Chrome trace (trace.json) and, with matplotlib, PNG pictures into DIR",
    )
    parser.add_argument(
        "--samples",
        type=positive_int("a number of samples"),
        metavar="N",
        help="Monte-Carlo mode: simulate N seeded samples of system.variability (seeds seed, seed+1...) and report "
        "the step-time distribution (overrides system.variability.samples)",
    )
    trace_options.add_arguments(parser)
    budget_options.add_arguments(parser)
    parser.set_defaults(handler=lazy_handler("stratasim.cli.study_commands", "run"))


def _add_check(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("check", help="validate a study and explain every problem")
    parser.add_argument("study", metavar="STUDY", help="the study file (YAML)")
    add_set(parser)
    budget_options.add_arguments(parser)
    parser.set_defaults(handler=lazy_handler("stratasim.cli.study_commands", "check"))


def _add_serve(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("serve", help="serve one layer's backend over gRPC")
    serve.add_arguments(parser)
    parser.set_defaults(handler=serve.handle)


def _bench(args: argparse.Namespace) -> int:
    from stratasim.cli import bench

    return bench.run_from_args(args)


def _add_bench(subparsers: Subparsers) -> None:
    from stratasim.cli import bench

    parser = subparsers.add_parser("bench", help="time collective studies and print wall time, events/s, memory")
    bench.add_arguments(parser)
    parser.set_defaults(handler=_bench)


def _import_astra(args: argparse.Namespace) -> int:
    from stratasim.importers import astra
    from stratasim.kernel.errors import ConfigError

    imported = astra.read_astra(
        args.network,
        args.system,
        collective=args.collective,
        size=args.size,
        npus=args.npus,
        name=args.name,
        backend=args.backend,
        trace=_trace_for(args.workload, args.output),
    )
    text = astra.to_yaml(imported.study, imported.comments)
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        raise ConfigError(args.output, [("", f"cannot write the study: {exc.strerror or exc}")]) from None
    print(f"wrote {args.output}")
    return EXIT_OK


def _trace_for(prefix: str | None, output: str | None) -> str | None:
    """The trace ``prefix`` given on the command line (relative to the current folder) as the study written to
    ``output`` names it: relative to that file's folder, where a study's traces are read from."""
    if prefix is None or output is None or os.path.isabs(prefix):
        return prefix
    return os.path.relpath(os.path.abspath(prefix), os.path.dirname(os.path.abspath(output)))


def _size_text(text: str) -> str:
    """``--size`` as written, once it reads as a size with its unit (the study keeps the text)."""
    try:
        parse_bytes(text)
    except StrataSimError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _add_import(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("import", help="write a study from another simulator's input files")
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    astra = formats.add_parser("astra", help="ASTRA-sim 2.x: an analytical network YAML and a system JSON")
    astra.add_argument("--network", required=True, metavar="NET.yml", help="the analytical network file")
    astra.add_argument("--system", required=True, metavar="SYS.json", help="the system file")
    astra.add_argument(
        "--collective",
        choices=("all_reduce", "all_gather", "reduce_scatter", "all_to_all"),
        help="the workload's collective (default: all_reduce)",
    )
    astra.add_argument(
        "--size", type=_size_text, metavar="SIZE", help="the collective's size, e.g. 64MiB (default: 1MiB)"
    )
    astra.add_argument("--npus", type=int, metavar="N", help="NPUs taking part (default: all of the topology)")
    astra.add_argument("--name", help="the study's name (default: the network file's stem)")
    astra.add_argument(
        "--backend",
        default="analytical",
        metavar="{analytical,congestion_aware}",
        help="the network backend: analytical for AstraSim_Analytical_Congestion_Unaware (the default), "
        "congestion_aware for AstraSim_Analytical_Congestion_Aware (the network file does not say)",
    )
    astra.add_argument(
        "--workload",
        metavar="PREFIX",
        help="replay the Chakra trace PREFIX.<rank>.et (ASTRA-sim's --workload-configuration) instead of one "
        "collective; the study names it relative to its own folder (-o's, else the current one)",
    )
    astra.add_argument("-o", "--output", metavar="STUDY.yaml", help="write the study here instead of stdout")
    astra.set_defaults(handler=_import_astra)


_SUBCOMMANDS = (
    _add_run,
    _add_check,
    _add_serve,
    cost_command.add_cost,
    roofline.add_roofline,
    _add_bench,
    _add_import,
    trace_command.add_trace,
    sweep_command.add_sweep,
    results_command.add_results,
    optimize_command.add_optimize,
    schema.add_schema,
    validate_command.add_validate,
    profile_command.add_profile,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="stratasim", description="Co-simulation of distributed deep-learning systems."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse already explained
        return exc.code if isinstance(exc.code, int) else EXIT_INVALID
    try:
        code: int = args.handler(args)
        return code
    except StrataSimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (`stratasim run ... | head`): not an error of ours
        _quiet_stdout()
        return 0
    except OSError as exc:  # a full disk (stdout on /dev/full, --out), a folder that is not writable
        _quiet_stdout()
        where = f"{exc.filename}: " if exc.filename else "writing the output: "
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID


def _quiet_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's flush at exit does not fail again on what is
    still buffered."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
