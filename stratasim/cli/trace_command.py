"""``stratasim trace``: inspect, convert, export, rescale and re-shard execution traces (Chakra ``.et``, StrataSim
``.pb``).

Each action's handler imports the trace machinery only when it runs, so building the parser stays light.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from stratasim.cli import budget_options
from stratasim.cli.arg_types import Subparsers, add_set, positive_int
from stratasim.kernel.errors import StrataSimError
from stratasim.study.limits import DEFAULT_MAX_NPUS

__all__ = ["add_trace"]


def _trace_inspect(args: argparse.Namespace) -> int:
    from stratasim.workload_layer.traces import convert as chakra_convert

    print(chakra_convert.summarize(args.trace).to_text())
    return 0


def _trace_convert(args: argparse.Namespace) -> int:
    from stratasim.study.budget import check_conversion
    from stratasim.workload_layer.traces import convert as chakra_convert

    if args.npus is not None and Path(args.input).is_file():
        check_conversion(args.input, args.npus, args.passes, budget_options.budget(args))
    written = chakra_convert.convert(args.input, args.output, args.to, npus=args.npus, passes=args.passes)
    print(f"wrote {len(written)} files: {', '.join(str(path) for path in written)}")
    return 0


def _trace_export(args: argparse.Namespace) -> int:
    from stratasim.config.study_file import load_study
    from stratasim.study import export

    if args.to not in ("chakra", "stratasim"):
        raise StrataSimError(f"--to: expected chakra or stratasim, got {args.to!r}")
    limit = args.max_npus or str(DEFAULT_MAX_NPUS)
    if not limit.isdigit() or int(limit) < 1:
        raise StrataSimError(f"--max-npus: expected a whole number of NPUs, at least 1, got {limit!r}")
    written = export.export_trace(
        load_study(args.study, args.overrides),
        args.output,
        args.to,
        max_npus=int(limit),
        budget=budget_options.budget(args),
    )
    _print_written(written)
    return 0


def _trace_rescale(args: argparse.Namespace) -> int:
    from stratasim.workload_layer.traces.rescale import rescale

    degrees = {"tp": args.tp, "pp": args.pp, "dp": args.dp}
    _print_written(rescale(args.input, args.output, args.npus, degrees, max_npus=args.max_npus))
    return 0


def _print_written(written: Sequence[Path]) -> None:
    print(
        f"wrote {len(written)} files: {written[0]} ... {written[-1]}"
        if len(written) > 3
        else f"wrote {len(written)} files: {', '.join(str(path) for path in written)}"
    )


def _trace_reshard(args: argparse.Namespace) -> int:
    from stratasim.config.study_file import load_study
    from stratasim.study.reshard import Schedule, reshard_trace

    study = None if args.study is None else load_study(args.study, [])
    given = args.schedule is not None or args.virtual_stages is not None
    schedule = Schedule(args.schedule or "1f1b", args.virtual_stages or 1) if given else None
    written, assumed = reshard_trace(
        args.input,
        args.output,
        args.tp,
        args.pp,
        args.dp,
        study,
        max_npus=args.max_npus,
        schedule=schedule,
        ep=args.ep,
    )
    _print_written(written)
    for assumption in assumed:
        print(f"note: {assumption}")
    return 0


def _add_max_ranks(parser: argparse.ArgumentParser) -> None:
    """``--max-npus`` of the actions that write one file per rank."""
    parser.add_argument(
        "--max-npus",
        type=positive_int("a rank count"),
        default=DEFAULT_MAX_NPUS,
        metavar="N",
        help=f"refuse more ranks than this (default: {DEFAULT_MAX_NPUS}), as every rank gets a file",
    )


def _add_reshard(actions: Subparsers) -> None:
    reshard = actions.add_parser(
        "reshard",
        help="re-shard a Chakra trace to another tensor-parallel (and data-parallel) degree",
        description="Splits or merges each operator by its shape (the stratasim.op attribute stratasim trace export "
        "writes), resizes the DP collectives, regroups every collective for the new layout and prices the new "
        "operators with --study's compute section; a new PP (or --schedule) moves whole layers between stages. "
        "See docs/how-to/reshard-a-trace.md.",
    )
    reshard.add_argument("input", metavar="IN", help="the input Chakra trace prefix (IN.<rank>.et, IN.json)")
    reshard.add_argument("output", metavar="OUT", help="the output trace prefix")
    reshard.add_argument("--tp", type=positive_int("a degree"), required=True, metavar="N", help="the new TP degree")
    reshard.add_argument(
        "--pp",
        type=positive_int("a degree"),
        required=True,
        metavar="M",
        help="the new PP degree (layers move between stages in whole layers)",
    )
    reshard.add_argument(
        "--dp", type=positive_int("a degree"), metavar="K", help="the new DP degree (default: the recorded one)"
    )
    reshard.add_argument(
        "--ep",
        type=positive_int("a degree"),
        metavar="E",
        help="the new expert-parallel degree of a MoE trace, at its recorded TP, PP and DP (default: the recorded one)",
    )
    reshard.add_argument(
        "--study", metavar="STUDY", help="the study whose compute section prices the re-sharded operators"
    )
    reshard.add_argument(
        "--schedule",
        choices=("1f1b", "gpipe", "interleaved", "zb_h1"),
        help="the new pipeline's schedule (default: the recorded order, 1f1b when --pp changes)",
    )
    reshard.add_argument(
        "--virtual-stages",
        type=positive_int("a chunk count"),
        metavar="V",
        help="model chunks per stage of --schedule interleaved (default 1)",
    )
    _add_max_ranks(reshard)
    reshard.set_defaults(handler=_trace_reshard)


def _add_rescale(actions: Subparsers) -> None:
    rescale = actions.add_parser(
        "rescale",
        help="rescale a Chakra trace to another rank count by changing its data-parallel degree",
        description="Replicates the trace's DP replicas (compute and sizes kept, groups and peers renumbered); "
        "stratasim trace reshard changes TP. The plan comes from the metadata stratasim trace "
        "export writes for a transformer, or the trace must be purely data-parallel.",
    )
    rescale.add_argument("input", metavar="IN", help="the input Chakra trace prefix (IN.<rank>.et, IN.json)")
    rescale.add_argument("output", metavar="OUT", help="the output trace prefix")
    rescale.add_argument(
        "--npus", type=positive_int("a rank count"), required=True, metavar="M", help="the rank count to rescale to"
    )
    for axis in ("dp", "tp", "pp"):
        rescale.add_argument(
            f"--{axis}",
            type=positive_int("a degree"),
            metavar="N",
            help=f"the {axis.upper()} degree wanted (checked against --npus and the trace)",
        )
    _add_max_ranks(rescale)
    rescale.set_defaults(handler=_trace_rescale)


def add_trace(subparsers: Subparsers) -> None:
    """The ``trace`` subcommand and its actions."""
    parser = subparsers.add_parser("trace", help="inspect and convert execution traces (Chakra .et, StrataSim .pb)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    inspect = actions.add_parser("inspect", help="summarize a trace: ranks, nodes, collectives, compute time")
    inspect.add_argument("trace", metavar="FILE_OR_PREFIX", help="one .et file, or a prefix of <prefix>.<rank>.et|pb")
    inspect.set_defaults(handler=_trace_inspect)
    convert = actions.add_parser("convert", help="convert between Chakra (<p>.<rank>.et) and StrataSim (<p>.<rank>.pb)")
    convert.add_argument("input", metavar="IN", help="the input trace prefix, or an ASTRA-sim text workload file")
    convert.add_argument("output", metavar="OUT", help="the output trace prefix")
    convert.add_argument(
        "--to", required=True, choices=("chakra", "stratasim"), help="the output format (a trace input is the other)"
    )
    convert.add_argument("--npus", type=int, help="NPUs to convert an ASTRA-sim text workload for (required for it)")
    convert.add_argument("--passes", type=int, default=1, help="training iterations of a text workload (default 1)")
    budget_options.add_arguments(convert, "the conversion")
    convert.set_defaults(handler=_trace_convert)
    export = actions.add_parser("export", help="write a study's workload as a trace, one file per NPU")
    export.add_argument("study", metavar="STUDY", help="the study file (YAML)")
    export.add_argument("output", metavar="OUT", help="the output trace prefix: OUT.<npu>.et or OUT.<npu>.pb")
    export.add_argument(
        "--to",
        required=True,
        metavar="{chakra,stratasim}",
        help="Chakra (operators priced into durations) or StrataSim's own format (kept whole)",
    )
    export.add_argument(
        "--max-npus",
        metavar="N",
        help=f"refuse workloads on more NPUs than this (default: {DEFAULT_MAX_NPUS}), as every NPU gets a file",
    )
    add_set(export)
    budget_options.add_arguments(export, "the export")
    export.set_defaults(handler=_trace_export)
    _add_rescale(actions)
    _add_reshard(actions)
